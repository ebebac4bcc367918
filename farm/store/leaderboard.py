"""Leaderboard aggregation: succeeded runs' figures in, one row per recipe × hardware × engine × workload out.

Pure functions over farm.store.records.MeasuredRun (no I/O); the store reads the runs and calls `aggregate`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import fmean

from farm.bench.records import KIND_DECODE, KIND_MEMORY, KIND_PREFILL, KIND_SHORT_TTFT, KIND_SPEC_DECODE
from farm.store.records import LeaderboardRow, MeasuredRun, Stat

LEADERBOARD_KINDS = (KIND_DECODE, KIND_PREFILL, KIND_SHORT_TTFT, KIND_MEMORY, KIND_SPEC_DECODE)
"""The figure kinds a leaderboard row reads; the store loads only these."""

_GroupKey = tuple[str, str, str, str | None, bool, str]


def pooled_stat(values: Sequence[float]) -> Stat:
    """Mean, min, max, count and spread ((max - min) / mean, as the seed's page uses) of pooled values."""
    if not values:
        raise ValueError("no values to summarise")
    mean = fmean(values)
    low, high = min(values), max(values)
    return Stat(n=len(values), mean=mean, min=low, max=high, spread=(high - low) / mean if mean else 0.0)


def _split(key: str) -> tuple[str, str, str] | None:
    parts = key.split("/")
    if len(parts) != 3:
        return None
    return parts[0], parts[1], parts[2]


def _int_point(point: str) -> int | None:
    try:
        return int(point)
    except ValueError:
        return None


def _prefill(runs: Iterable[MeasuredRun]) -> tuple[float | None, int | None]:
    """The mean prefill rate at the largest prompt length any of the runs measured."""
    by_length: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        for key, values in run.values.items():
            parts = _split(key)
            if parts and parts[0] == KIND_PREFILL and parts[2] == "prefill_tok_s":
                length = _int_point(parts[1])
                if length is not None and values:
                    by_length[length].extend(values)
    if not by_length:
        return None, None
    longest = max(by_length)
    return fmean(by_length[longest]), longest


def _short_ttft(runs: Iterable[MeasuredRun]) -> float | None:
    """The mean short-prompt TTFT at the shortest prompt measured (there is normally only one)."""
    by_length: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        for key, values in run.values.items():
            parts = _split(key)
            if parts and parts[0] == KIND_SHORT_TTFT and parts[2] == "ttft_ms":
                length = _int_point(parts[1])
                if length is not None and values:
                    by_length[length].extend(values)
    return fmean(by_length[min(by_length)]) if by_length else None


def _peak_memory(runs: Iterable[MeasuredRun]) -> float | None:
    peaks = [
        value
        for run in runs
        for key, values in run.values.items()
        if (parts := _split(key)) and parts[0] == KIND_MEMORY and parts[1].startswith("gpu")
        if parts[2] == "peak_memory_gib"
        for value in values
    ]
    return max(peaks) if peaks else None


def _acceptance(runs: Iterable[MeasuredRun], workload: str) -> float | None:
    key = f"{KIND_SPEC_DECODE}/{workload}/acceptance_rate"
    rates = [value for run in runs for value in run.values.get(key, ())]
    return fmean(rates) if rates else None


def aggregate(runs: Iterable[MeasuredRun], *, include_simulated: bool = True) -> list[LeaderboardRow]:
    """One row per recipe content × hardware class × engine version × workload × simulated flag.

    A run adds to the row of every workload it has a decode figure for. Real rows come before simulated ones;
    within each, rows are ordered by model and workload, the fastest decode first.
    """
    groups: dict[_GroupKey, list[MeasuredRun]] = defaultdict(list)
    for run in runs:
        if run.simulated and not include_simulated:
            continue
        for key in run.values:
            parts = _split(key)
            if parts and parts[0] == KIND_DECODE and parts[2] == "decode_tok_s":
                group = (
                    run.recipe_sha256,
                    run.hardware_class,
                    run.engine_name,
                    run.engine_version,
                    run.simulated,
                    parts[1],
                )
                groups[group].append(run)
    rows = []
    for (_sha, hardware, engine, version, simulated, workload), members in groups.items():
        first = members[0]
        decode = [v for run in members for v in run.values[f"{KIND_DECODE}/{workload}/decode_tok_s"]]
        if not decode:
            continue
        prefill_rate, prefill_tokens = _prefill(members)
        rows.append(
            LeaderboardRow(
                recipe_id=first.recipe_id,
                recipe_sha256=first.recipe_sha256,
                model_id=first.model_id,
                hardware_class=hardware,
                engine_name=engine,
                engine_version=version,
                workload=workload,
                simulated=simulated,
                runs=len(members),
                decode_tok_s=pooled_stat(decode),
                prefill_tok_s=prefill_rate,
                prefill_prompt_tokens=prefill_tokens,
                short_ttft_ms=_short_ttft(members),
                peak_memory_gib=_peak_memory(members),
                spec_acceptance_rate=_acceptance(members, workload),
                job_ids=tuple(sorted({run.job_id for run in members})),
            )
        )
    rows.sort(key=lambda row: (row.simulated, row.model_id, row.workload, -row.decode_tok_s.mean))
    return rows
