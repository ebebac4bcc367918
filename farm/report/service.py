"""The reads that the CLI and the HTTP API share: results under filters, and a leaderboard under filters.

The one module of farm.report that talks to the store (through farm.store.reads); everything it hands on is
frozen records for the pure modules (aggregate, exports, html, compare).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from farm.errors import InputError, JobNotFound
from farm.report.aggregate import Entry, aggregate
from farm.report.exports import Results
from farm.report.filters import ALL, ResultFilter, engine_matches
from farm.store import LeaderboardRow, Store
from farm.store.leaderboard import LEADERBOARD_KINDS
from farm.store.leaderboard import aggregate as leaderboard_aggregate
from farm.store.reads import RunMeasurements, run_measurements
from farm.store.records import MeasuredRun


def load_results(store: Store, filters: ResultFilter = ALL) -> Results:
    """The succeeded runs the filters select, and their aggregated entries."""
    runs = run_measurements(store, since=filters.since, until=filters.until, job_ids=filters.job_ids)
    selected = tuple(run for run in runs if filters.matches_run(run))
    return Results(runs=selected, entries=tuple(aggregate(selected, filters)), filters=filters)


def leaderboard(store: Store, filters: ResultFilter = ALL) -> list[LeaderboardRow]:
    """`farm leaderboard`'s rows (farm.store.leaderboard.aggregate) over the runs the filters select."""
    runs = run_measurements(store, since=filters.since, until=filters.until, job_ids=filters.job_ids)
    return leaderboard_aggregate(
        measured_runs(run for run in runs if filters.matches_run(run)), include_simulated=not filters.real_only
    )


def measured_runs(runs: Iterable[RunMeasurements]) -> list[MeasuredRun]:
    """The leaderboard's view of runs: identity and the values of the figure kinds it reads."""
    return [
        MeasuredRun(
            job_id=run.job_id,
            recipe_id=run.recipe_id,
            recipe_sha256=run.recipe_sha256,
            model_id=run.model_id,
            hardware_class=run.hardware_class,
            engine_name=run.engine_name,
            engine_version=run.engine_version,
            simulated=run.simulated,
            values={f.key: f.values for f in run.figures if f.kind in LEADERBOARD_KINDS},
        )
        for run in runs
    ]


COMPARE_KINDS = ("job", "recipe", "engine")
"""What `farm compare A B` compares: two jobs, two recipes, or two engine versions."""


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: what it names, the runs it pooled, and its values per measurement."""

    name: str
    job_ids: tuple[str, ...]
    simulated: bool
    values: dict[str, tuple[float, ...]]
    units: dict[str, str]


def _side(name: str, entries: Sequence[Entry], what: str) -> CompareSide:
    if not entries:
        raise InputError(f"no succeeded results for {what} {name!r} under these filters", field=what)
    kinds = {e.simulated for e in entries}
    if len(kinds) > 1:
        raise InputError(
            f"{what} {name!r} has both real and simulated results; they are never pooled: "
            "add --real-only or --status simulated",
            field=what,
        )
    return CompareSide(
        name=name,
        job_ids=tuple(sorted({job for e in entries for job in e.job_ids})),
        simulated=kinds.pop(),
        values={e.key: _pool(e.key, entries) for e in entries},
        units={e.key: e.unit for e in entries},
    )


def _pool(key: str, entries: Sequence[Entry]) -> tuple[float, ...]:
    return tuple(value for e in entries if e.key == key for value in e.values)


def _is_job(store: Store, job_id: str) -> bool:
    try:
        store.get_job(job_id)
    except JobNotFound:
        return False
    return True


def compare_sides(
    store: Store, a: str, b: str, *, by: str = "auto", filters: ResultFilter = ALL
) -> tuple[str, CompareSide, CompareSide]:
    """Resolve A and B as jobs, recipes or engine versions (`by="auto"`: the first kind both names are) and
    pool each side's values per measurement. Returns the kind and both sides."""
    if by not in (*COMPARE_KINDS, "auto"):
        raise InputError(f"{by!r} is not one of auto, {', '.join(COMPARE_KINDS)}", field="by")
    if by in ("auto", "job") and _is_job(store, a) and _is_job(store, b):
        sides = [load_results(store, replace(filters, job_ids=(name,))).entries for name in (a, b)]
        return "job", _side(a, sides[0], "job"), _side(b, sides[1], "job")
    if by == "job":
        missing = a if not _is_job(store, a) else b
        raise InputError(f"no job {missing!r}", field="job")
    entries = load_results(store, filters).entries
    recipes = {e.recipe.recipe_id for e in entries}
    if by in ("auto", "recipe") and {a, b} <= recipes:
        return (
            "recipe",
            _side(a, [e for e in entries if e.recipe.recipe_id == a], "recipe"),
            _side(b, [e for e in entries if e.recipe.recipe_id == b], "recipe"),
        )
    side_a = [e for e in entries if engine_matches(a, e.engine_name, e.engine_version)]
    side_b = [e for e in entries if engine_matches(b, e.engine_name, e.engine_version)]
    if by == "engine" or (side_a and side_b):
        return "engine", _side(a, side_a, "engine"), _side(b, side_b, "engine")
    unknown = [name for name in (a, b) if name not in recipes and not _is_job(store, name)]
    raise InputError(
        f"cannot tell what to compare: {', '.join(repr(n) for n in unknown or (a, b))} is neither a job id, "
        "a recipe id with results, nor an engine version with results",
        field="by",
    )
