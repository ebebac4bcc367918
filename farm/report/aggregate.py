"""Aggregation of runs held in memory, and the JSON form of an entry (pure functions, no I/O).

The store streams the same entries from SQL (farm.store.reads.iter_entries); `aggregate` is for runs already in
memory (tests, a single job). The records (Entry, RecipeSummary, ProvenanceSummary) are the store's read model.
One entry per recipe × hardware class × engine version × workload × measurement.

An entry pools the repeats of every run in its group: n, mean, median, min, max, standard deviation (sample,
n - 1; 0 for one value) and spread ((max - min) / mean, as the seed's page uses). It says how many samples the
sweeps asked for (each figure's `requested_repeats`, else its plan's `repeats`) and is `incomplete` when it got
fewer. Entries measured on the simulator carry `simulated=True`; ranks are given within one measurement and
only among entries of the same kind (real with real, simulated with simulated), so a simulated figure is never
ranked with a real one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from farm.domain import LOWER_IS_BETTER_UNITS, Figure, lower_is_better, split_key, summarize
from farm.filters import ALL, ResultFilter
from farm.store.leaderboard import ORIGIN_ORDER
from farm.store.reads import BULKY_PARAMS
from farm.store.records import Entry, ProvenanceSummary, RecipeSummary, RunMeasurements
from farm.store.records import GroupKey as RecordsGroupKey
from farm.store.summaries import provenance_record, short_provenance

__all__ = [
    "BULKY_PARAMS",
    "LOWER_IS_BETTER_UNITS",
    "Entry",
    "GroupKey",
    "ProvenanceSummary",
    "RecipeSummary",
    "entries_from_runs",
    "entry_json",
    "groups",
    "lower_is_better",
    "rank",
    "split_key",
]

GroupKey = RecordsGroupKey


def provenance_summary(run: RunMeasurements) -> ProvenanceSummary:
    """The short provenance of one run, from the provenance JSON the worker stored (farm.provenance)."""
    return provenance_record(
        short_provenance(run.provenance, run.worker_id),
        job_id=run.job_id,
        attempt=run.attempt,
        measured_at=run.measured_at,
        engine=run.engine_name,
        engine_version=run.engine_version,
        simulated=run.simulated,
    )


def recipe_summary(run: RunMeasurements) -> RecipeSummary:
    return RecipeSummary(
        recipe_id=run.recipe_id,
        recipe_sha256=run.recipe_sha256,
        model_id=run.model_id,
        hardware_id=run.hardware_id,
        hardware_count=run.hardware_count,
        argv=run.recipe_argv,
        tensor_parallel=run.tensor_parallel,
        max_context_tokens=run.max_context_tokens,
    )


def group_of(run: RunMeasurements) -> GroupKey:
    return (
        run.recipe_id,
        run.recipe_sha256,
        run.hardware_class,
        run.engine_name,
        run.engine_version,
        run.simulated,
    )


def _requested(figure: Figure, run: RunMeasurements) -> int:
    if figure.requested_repeats is not None:
        return figure.requested_repeats
    if run.requested_repeats is not None:
        return run.requested_repeats
    return len(figure.values)


def entries_from_runs(runs: Iterable[RunMeasurements], filters: ResultFilter = ALL) -> list[Entry]:
    """Entries of the runs that pass `filters`, ranked, in a stable order: real before simulated, then by
    recipe, hardware, engine version and figure key."""
    members: dict[tuple[GroupKey, str], list[tuple[RunMeasurements, Figure]]] = defaultdict(list)
    for run in runs:
        if not filters.matches_run(run):
            continue
        for figure in run.figures:
            if figure.values:
                members[(group_of(run), figure.key)].append((run, figure))
    entries = []
    for (_group, key), pairs in members.items():
        entry = _entry(key, pairs)
        if filters.matches_status(entry.simulated, entry.incomplete):
            entries.append(entry)
    return rank(entries)


def _entry(key: str, pairs: list[tuple[RunMeasurements, Figure]]) -> Entry:
    pairs = sorted(pairs, key=lambda pair: (pair[0].measured_at, pair[0].job_id))
    first_run, _ = pairs[0]
    last_run, last_figure = pairs[-1]
    values = tuple(value for _, figure in pairs for value in figure.values)
    stats = summarize(values)
    kind, point, metric = split_key(key)
    runs = {run.job_id: run for run, _ in pairs}
    return Entry(
        recipe=recipe_summary(last_run),
        hardware_class=last_run.hardware_class,
        engine_name=last_run.engine_name,
        engine_version=last_run.engine_version,
        simulated=last_run.simulated,
        workload=last_figure.workload,
        key=key,
        kind=kind,
        point=point,
        metric=metric,
        unit=last_figure.unit,
        n=stats.n,
        mean=stats.mean,
        median=stats.median,
        min=stats.min,
        max=stats.max,
        stdev=stats.stdev,
        spread=stats.spread,
        values=values,
        runs=len(runs),
        requested=sum(_requested(figure, run) for run, figure in pairs),
        job_ids=tuple(sorted(runs)),
        first_measured_at=first_run.measured_at,
        measured_at=last_run.measured_at,
        params={k: v for k, v in last_figure.params.items() if k not in BULKY_PARAMS},
        provenance=tuple(provenance_summary(run) for run in runs.values()),
        origin="simulated" if last_run.simulated else last_run.origin,
    )


def rank(entries: Iterable[Entry]) -> list[Entry]:
    """The entries with `rank` set (1 is best) within each measurement, each origin ranked apart."""
    pools: dict[tuple[str, str, bool], list[Entry]] = defaultdict(list)
    for entry in entries:
        pools[(entry.key, entry.origin, entry.simulated)].append(entry)
    ranked: list[Entry] = []
    for pool in pools.values():
        descending = not lower_is_better(pool[0].unit)
        ordered = sorted(pool, key=lambda e: -e.mean if descending else e.mean)
        ranked.extend(_with_rank(entry, position) for position, entry in enumerate(ordered, start=1))
    ranked.sort(
        key=lambda e: (
            ORIGIN_ORDER.get(e.origin, 9),
            e.simulated,
            e.recipe.model_id,
            e.recipe.recipe_id,
            e.hardware_class,
            e.engine_version or "",
            e.recipe.recipe_sha256,
            e.engine_name,
            e.key,
        )
    )
    return ranked


def _with_rank(entry: Entry, position: int) -> Entry:
    return replace(entry, rank=position)


def groups(entries: Iterable[Entry]) -> dict[GroupKey, list[Entry]]:
    """Entries by sweep group, in the order they come."""
    out: dict[GroupKey, list[Entry]] = defaultdict(list)
    for entry in entries:
        out[entry.group].append(entry)
    return dict(out)


@lru_cache(maxsize=65536)
def provenance_json(p: ProvenanceSummary) -> dict[str, Any]:
    """A run's short provenance as JSON (cached: one run's appears in every entry of its group)."""
    return {
        "job_id": p.job_id,
        "attempt": p.attempt,
        "worker_id": p.worker_id,
        "measured_at": p.measured_at,
        "host": p.host,
        "cpu": p.cpu,
        "os": p.os,
        "gpu_names": list(p.gpu_names),
        "gpu_count": p.gpu_count,
        "driver_version": p.driver_version,
        "cuda_version": p.cuda_version,
        "engine": p.engine,
        "engine_version": p.engine_version,
        "image_digest": p.image_digest,
        "farm_version": p.farm_version,
        "farm_commit": p.farm_commit,
        "cache_state": p.cache_state,
        "simulated": p.simulated,
    }


def entry_json(entry: Entry, *, provenance: bool = True) -> dict[str, Any]:
    """An entry as plain JSON: identity, statistics, completeness, rank, params and provenance summary."""
    data = {
        "recipe_id": entry.recipe.recipe_id,
        "recipe_sha256": entry.recipe.recipe_sha256,
        "model_id": entry.recipe.model_id,
        "hardware_class": entry.hardware_class,
        "gpu_count": entry.gpu_count,
        "engine_name": entry.engine_name,
        "engine_version": entry.engine_version,
        "simulated": entry.simulated,
        "origin": entry.origin,
        "verified": entry.verified,
        "status": entry.status,
        "workload": entry.workload,
        "key": entry.key,
        "kind": entry.kind,
        "point": entry.point,
        "metric": entry.metric,
        "unit": entry.unit,
        "n": entry.n,
        "mean": entry.mean,
        "median": entry.median,
        "min": entry.min,
        "max": entry.max,
        "stdev": entry.stdev,
        "spread": entry.spread,
        "values": list(entry.values),
        "runs": entry.runs,
        "requested": entry.requested,
        "got": entry.n,
        "incomplete": entry.incomplete,
        "rank": entry.rank,
        "ranked_among": "simulated" if entry.simulated else ("endpoint" if entry.origin == "endpoint" else "real"),
        "job_ids": list(entry.job_ids),
        "first_measured_at": entry.first_measured_at.isoformat(),
        "measured_at": entry.measured_at.isoformat(),
        "params": entry.params,
    }
    if provenance:
        data["provenance"] = [provenance_json(p) for p in entry.provenance]
    return data
