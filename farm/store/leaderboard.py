"""The leaderboard rules, written once: pooled figure statistics in, one row per recipe × hardware class × engine
version × workload × origin out (pure functions, no I/O).

The store computes the statistics in SQL over the run summaries (farm.store.reads.leaderboard); `aggregate`
computes the same statistics from runs in memory for callers that hold them. Both hand them to `rows`:
- decode: the workload's `decode_tok_s` values of every run, pooled (n, mean, min, max, spread);
- prefill: the mean rate at the longest prompt any run measured; short TTFT: the mean at the shortest prompt;
- peak memory: the largest card's peak; acceptance: the mean acceptance rate of the workload;
- energy (GPU-only), at the workload's decode measurement: the mean J per output token and average power (all
  cards), the highest power of any card, and the mean cost per million output tokens where prices were stated.
- decode at depth: the mean `depth/<d>/decode_tok_s` at each context depth measured (`[plan.context_depth]`).
Launched rows come first, then endpoint rows, then simulated ones; within each, by model and workload, the
fastest decode first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from farm.domain import (
    KIND_COST,
    KIND_DECODE,
    KIND_DEPTH,
    KIND_ENERGY,
    KIND_MEMORY,
    KIND_POWER,
    KIND_PREFILL,
    KIND_SHORT_TTFT,
    KIND_SPEC_DECODE,
    Origin,
    int_point,
    split_key,
    spread,
)
from farm.store.records import GroupStat, LeaderboardRow, MeasuredRun, Stat

LEADERBOARD_KINDS = (
    KIND_DECODE,
    KIND_PREFILL,
    KIND_SHORT_TTFT,
    KIND_MEMORY,
    KIND_SPEC_DECODE,
    KIND_ENERGY,
    KIND_POWER,
    KIND_COST,
    KIND_DEPTH,
)
"""The figure kinds a leaderboard row reads; the store reads only these."""

ORIGIN_ORDER = {Origin.LAUNCHED.value: 0, Origin.ENDPOINT.value: 1, Origin.SIMULATED.value: 2}
"""Launched rows first, then endpoints, then the simulator."""

_Group = tuple[str, str, str, str | None, str]


def pooled_stat(n: int, total: float, low: float, high: float) -> Stat:
    """Mean, min, max, count and spread of pooled values given their count, sum, min and max."""
    if n <= 0:
        raise ValueError("no values to summarise")
    mean = total / n
    return Stat(n=n, mean=mean, min=low, max=high, spread=spread(low, high, mean))


def group_key(stat: GroupStat) -> _Group:
    """(recipe sha256, hardware class, engine, engine version, origin): the group a statistic pools."""
    return (stat.recipe_sha256, stat.hardware_class, stat.engine_name, stat.engine_version, stat.origin)


def rows(
    stats: Iterable[GroupStat],
    job_ids: dict[_Group, list[str]] | None = None,
    verified: dict[_Group, int] | None = None,
) -> list[LeaderboardRow]:
    """The leaderboard from pooled statistics per group and figure key (see the module docstring); `verified`:
    how many of each group's runs are verified (signed by a trusted key, matching their signatures)."""
    by_group: dict[_Group, list[GroupStat]] = defaultdict(list)
    for stat in stats:
        by_group[group_key(stat)].append(stat)
    out = []
    for group, members in by_group.items():
        prefill = [
            (length, s)
            for s in members
            if s.kind == KIND_PREFILL and s.metric == "prefill_tok_s"
            if (length := int_point(s.point)) is not None
        ]
        short = [
            (length, s)
            for s in members
            if s.kind == KIND_SHORT_TTFT and s.metric == "ttft_ms"
            if (length := int_point(s.point)) is not None
        ]
        memory = [
            s.max
            for s in members
            if s.kind == KIND_MEMORY and s.point.startswith("gpu") and s.metric == "peak_memory_gib"
        ]
        longest = max(prefill, key=lambda pair: pair[0], default=None)
        shortest = min(short, key=lambda pair: pair[0], default=None)
        accept = {s.point: s for s in members if s.kind == KIND_SPEC_DECODE and s.metric == "acceptance_rate"}
        energy = {(s.point, s.metric): s for s in members if s.kind in (KIND_ENERGY, KIND_COST)}
        peaks: dict[str, float] = {}
        for s in members:
            if s.kind == KIND_POWER and s.metric == "peak_power_w" and s.n:
                measurement = s.point.rsplit(".gpu", 1)[0]
                peaks[measurement] = max(peaks.get(measurement, s.max), s.max)
        at_depth = tuple(
            sorted(
                (depth, s.total / s.n)
                for s in members
                if s.kind == KIND_DEPTH and s.metric == "decode_tok_s" and s.n
                if (depth := int_point(s.point)) is not None
            )
        )
        for decode in members:
            if decode.kind != KIND_DECODE or decode.metric != "decode_tok_s" or decode.n == 0:
                continue
            rate = accept.get(decode.point)
            at = f"{KIND_DECODE}.{decode.point}"
            cost = energy.get((at, "per_m_output_tokens"))
            out.append(
                LeaderboardRow(
                    recipe_id=decode.recipe_id,
                    recipe_sha256=decode.recipe_sha256,
                    model_id=decode.model_id,
                    hardware_class=decode.hardware_class,
                    engine_name=decode.engine_name,
                    engine_version=decode.engine_version,
                    workload=decode.point,
                    simulated=decode.origin == Origin.SIMULATED.value,
                    runs=decode.runs,
                    decode_tok_s=pooled_stat(decode.n, decode.total, decode.min, decode.max),
                    prefill_tok_s=longest[1].total / longest[1].n if longest else None,
                    prefill_prompt_tokens=longest[0] if longest else None,
                    short_ttft_ms=shortest[1].total / shortest[1].n if shortest else None,
                    peak_memory_gib=max(memory) if memory else None,
                    spec_acceptance_rate=rate.total / rate.n if rate and rate.n else None,
                    j_per_output_token=_mean(energy.get((at, "j_per_output_token"))),
                    avg_power_w=_mean(energy.get((at, "avg_power_w"))),
                    peak_power_w=peaks.get(at),
                    cost_per_m_output_tokens=_mean(cost),
                    cost_unit=(cost.unit or None) if cost is not None and cost.n else None,
                    job_ids=tuple(sorted((job_ids or {}).get(group, ()))),
                    origin=decode.origin,
                    requested=decode.requested,
                    verified_runs=(count := (verified or {}).get(group, 0)),
                    verified=count > 0 and count >= len((job_ids or {}).get(group, ())),
                    decode_at_depth_tok_s=at_depth,
                )
            )
    out.sort(key=lambda row: (ORIGIN_ORDER.get(row.origin, 9), row.model_id, row.workload, -row.decode_tok_s.mean))
    return _ranked(out)


def _mean(stat: GroupStat | None) -> float | None:
    return stat.total / stat.n if stat is not None and stat.n else None


def _ranked(board: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """Rank 1 is the fastest decode of a workload among rows of the same origin."""
    pools: dict[tuple[str, str], list[LeaderboardRow]] = defaultdict(list)
    for row in board:
        pools[(row.origin, row.workload)].append(row)
    ranks: dict[int, int] = {}
    for pool in pools.values():
        for position, row in enumerate(sorted(pool, key=lambda r: -r.decode_tok_s.mean), start=1):
            ranks[id(row)] = position
    return [replace(row, rank=ranks[id(row)]) for row in board]


def leaderboard_from_runs(runs: Iterable[MeasuredRun], *, include_simulated: bool = True) -> list[LeaderboardRow]:
    """The leaderboard of runs held in memory, by the same rules (`rows`) as the store's SQL."""
    pooled: dict[tuple[_Group, str], list[float]] = defaultdict(list)
    identity: dict[_Group, MeasuredRun] = {}
    units: dict[tuple[_Group, str], str] = {}
    counts: dict[tuple[_Group, str], int] = defaultdict(int)
    job_ids: dict[_Group, list[str]] = defaultdict(list)
    for run in runs:
        if run.simulated and not include_simulated:
            continue
        origin = Origin.SIMULATED.value if run.simulated else run.origin
        group = (run.recipe_sha256, run.hardware_class, run.engine_name, run.engine_version, origin)
        identity.setdefault(group, run)
        has_decode = False
        for key, values in run.values.items():
            if values and split_key(key)[0] in LEADERBOARD_KINDS:
                pooled[(group, key)].extend(values)
                units.setdefault((group, key), run.units.get(key, ""))
                counts[(group, key)] += 1
                has_decode = has_decode or split_key(key)[0] == KIND_DECODE
        if has_decode:
            job_ids[group].append(run.job_id)
    stats = []
    for (group, key), pooled_values in pooled.items():
        run = identity[group]
        kind, point, metric = split_key(key)
        stats.append(
            GroupStat(
                recipe_id=run.recipe_id,
                recipe_sha256=run.recipe_sha256,
                model_id=run.model_id,
                hardware_class=run.hardware_class,
                engine_name=run.engine_name,
                engine_version=run.engine_version,
                origin=group[4],
                kind=kind,
                point=point,
                metric=metric,
                n=len(pooled_values),
                total=sum(pooled_values),
                min=min(pooled_values),
                max=max(pooled_values),
                runs=counts[(group, key)],
                unit=units.get((group, key), ""),
            )
        )
    return rows(stats, job_ids)
