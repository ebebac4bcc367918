"""The measurement math: timestamps, token counts and counter values in, figures out.

Pure functions only: no I/O and no clock reads, so every formula is tested with hand-computed tables.
Times inside a `RequestSample` are nanoseconds from `time.perf_counter_ns`; the functions here return
seconds unless their name says milliseconds.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from farm.bench.records import RequestSample, Summary
from farm.domain import summarize as domain_summarize
from farm.errors import MeasurementError

NS_PER_S = 1_000_000_000
MS_PER_S = 1_000.0

SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
SPEC_DECODE_COUNTERS = (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED_TOKENS)
"""vLLM's speculative-decoding counters (vllm/v1/spec_decode/metrics.py, `SpecDecodingProm`)."""

TOKEN_COUNTERS = ("vllm:prompt_tokens", "vllm:generation_tokens")
"""The engine's own token counts, kept beside each measurement to cross-check the `usage` the client read."""

PREFIX_CACHE_COUNTERS = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")
"""The engine's prefix-cache counters under the farm's names (vLLM's; other engines' mapped to them), in tokens."""

PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks, as numpy's default.

    The rank is q/100 * (n - 1) over the sorted values; a fractional rank interpolates between its two
    neighbours. This is numpy's `method="linear"` (type 7 of Hyndman and Fan).
    """
    if not values:
        raise MeasurementError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must lie in [0, 100], got {q}")
    ordered = sorted(values)
    rank = q / 100.0 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize(values: Sequence[float]) -> Summary:
    """The summary of a figure's repeats (farm.domain.summarize), once they are checked: at least one value,
    every one a finite number. An undefined figure is left out of its round (see `RoundFigures`), never carried
    as NaN, which no statistic can summarise and JSON cannot hold.
    """
    if not values:
        raise MeasurementError("summary of no values")
    bad = [value for value in values if not math.isfinite(value)]
    if bad:
        raise MeasurementError(f"summary of non-finite values: {bad[:3]} among {len(values)}")
    return domain_summarize(values)


def two_point_decode_tok_s(n_short: int, t_short_s: float, n_long: int, t_long_s: float) -> float:
    """Decode tok/s from two requests on the same warmed prompt: (n_long - n_short) / (t_long - t_short).

    Both requests pay the same prefill and first-token latency, so the difference leaves decode alone.
    """
    tokens = n_long - n_short
    seconds = t_long_s - t_short_s
    if tokens <= 0:
        raise MeasurementError(f"two-point decode: the long request has no more tokens ({n_long} <= {n_short})")
    if seconds <= 0:
        raise MeasurementError(
            f"two-point decode: the long request took no longer ({t_long_s:.6f} s <= {t_short_s:.6f} s)"
        )
    return tokens / seconds


def prefill_tok_s(prompt_tokens: int, ttft_s: float) -> float:
    """Prefill rate: prompt tokens / time to first token."""
    if prompt_tokens <= 0:
        raise MeasurementError(f"prefill: no prompt tokens ({prompt_tokens})")
    if ttft_s <= 0:
        raise MeasurementError(f"prefill: non-positive time to first token ({ttft_s})")
    return prompt_tokens / ttft_s


def _require_ok(sample: RequestSample) -> tuple[int, int]:
    if not sample.ok or sample.first_token_ns is None or sample.last_token_ns is None:
        raise MeasurementError(f"a failed request has no timing: {sample.error or 'no content'}")
    return sample.first_token_ns, sample.last_token_ns


def ttft_s(sample: RequestSample) -> float:
    """Time to first token: request start to the first chunk with content."""
    first, _ = _require_ok(sample)
    return (first - sample.started_ns) / NS_PER_S


def e2e_s(sample: RequestSample) -> float:
    """End-to-end latency: request start to the last chunk with content."""
    _, last = _require_ok(sample)
    return (last - sample.started_ns) / NS_PER_S


def tpot_s(sample: RequestSample) -> float:
    """Time per output token after the first: (last - first) / (completion_tokens - 1)."""
    first, last = _require_ok(sample)
    tokens = sample.completion_tokens or 0
    if tokens < 2:
        raise MeasurementError(f"time per output token needs two tokens or more, got {tokens}")
    return (last - first) / NS_PER_S / (tokens - 1)


def chunk_itls_s(sample: RequestSample) -> list[float]:
    """Inter-chunk latencies: the gaps between successive content chunks (one may carry several tokens)."""
    return [(later - earlier) / NS_PER_S for earlier, later in itertools.pairwise(sample.chunk_ns)]


@dataclass(frozen=True)
class RoundFigures:
    """The figures of one round of N concurrent streams, and the ones the round could not measure.

    `values` holds finite numbers only, named as `records.CONCURRENCY_METRICS`; `absent` maps each metric that
    had nothing to measure in this round to the reason (for example every stream delivered its tokens in one
    chunk, so there is no gap between chunks to time).
    """

    values: dict[str, float]
    absent: dict[str, str]


def concurrency_figures(samples: Sequence[RequestSample]) -> RoundFigures:
    """The figures of one round of N concurrent streams.

    Only successful samples count. Aggregate tok/s = all completion tokens / (last finish - first start);
    per-stream tok/s = mean over streams of (completion_tokens - 1) / (last - first content chunk);
    TTFT, ITL (chunk gaps, pooled over streams), TPOT and E2E as p50/p90/p99 in milliseconds.
    A figure with no stream to measure it is absent, with its reason: per-stream tok/s and TPOT need a stream
    whose tokens arrived over some time (two tokens or more, in two chunks or more); ITL needs two chunks.
    """
    ok = [sample for sample in samples if sample.ok]
    if not ok:
        raise MeasurementError(f"every one of the {len(samples)} concurrent requests failed")
    values: dict[str, float] = {}
    absent: dict[str, str] = {}
    first_start = min(sample.started_ns for sample in ok)
    last_finish = max(_require_ok(sample)[1] for sample in ok)
    total_tokens = sum(sample.completion_tokens or 0 for sample in ok)
    if last_finish > first_start:
        values["aggregate_tok_s"] = total_tokens / ((last_finish - first_start) / NS_PER_S)
    else:
        absent["aggregate_tok_s"] = "the round had no duration (its last token came at its start)"
    timed = [
        (sample, first, last)
        for sample in ok
        for first, last in [_require_ok(sample)]
        if (sample.completion_tokens or 0) >= 2 and last > first
    ]
    if timed:
        values["per_stream_tok_s"] = statistics.fmean(
            ((sample.completion_tokens or 0) - 1) / ((last - first) / NS_PER_S) for sample, first, last in timed
        )
    else:
        absent["per_stream_tok_s"] = _why_untimed(ok)
    series: dict[str, tuple[list[float], str]] = {
        "ttft_ms": ([ttft_s(sample) * MS_PER_S for sample in ok], ""),
        "itl_ms": (
            [gap * MS_PER_S for sample in ok for gap in chunk_itls_s(sample)],
            f"every stream delivered its content in one chunk ({len(ok)} streams): no gap between chunks",
        ),
        "tpot_ms": ([tpot_s(sample) * MS_PER_S for sample, _, _ in timed], _why_untimed(ok)),
        "e2e_ms": ([e2e_s(sample) * MS_PER_S for sample in ok], ""),
    }
    for name, (measured, reason) in series.items():
        for q in PERCENTILES:
            if measured:
                values[f"{name}_p{q}"] = percentile(measured, q)
            else:
                absent[f"{name}_p{q}"] = reason
    return RoundFigures(values=values, absent=absent)


def _why_untimed(ok: Sequence[RequestSample]) -> str:
    """Why no stream of a round can give a per-token time."""
    if all((sample.completion_tokens or 0) < 2 for sample in ok):
        return f"every stream produced one token ({len(ok)} streams): no time between tokens"
    return f"every stream delivered its tokens in one chunk ({len(ok)} streams): no time between tokens"


def acceptance_rate(accepted_tokens: float, draft_tokens: float) -> float:
    """Draft acceptance rate as vLLM defines it: accepted tokens / draft tokens (a fraction, not percent)."""
    if draft_tokens <= 0:
        raise MeasurementError("acceptance rate: no draft tokens in the interval")
    return accepted_tokens / draft_tokens


def mean_acceptance_length(accepted_tokens: float, drafts: float) -> float:
    """Mean acceptance length as vLLM defines it: 1 + accepted tokens / drafts (the 1 is the bonus token)."""
    if drafts <= 0:
        raise MeasurementError("mean acceptance length: no drafts in the interval")
    return 1.0 + accepted_tokens / drafts


def parse_prometheus_counters(text: str) -> dict[str, float]:
    """Sum every sample of a Prometheus text exposition over its label sets, by sample name.

    `vllm:x_total{engine="0"} 3` and `vllm:x_total{engine="1"} 4` give `{"vllm:x_total": 7.0}`. Comments,
    blank lines and an optional timestamp after the value are skipped; label values may hold spaces, braces
    and escaped quotes. A line that cannot be read raises MeasurementError.
    """
    totals: dict[str, float] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            rest = line[_end_of_labels(line, brace, number) + 1 :]
        else:
            if space == -1:
                raise MeasurementError(f"metrics line {number}: no value: {raw!r}")
            name, rest = line[:space], line[space:]
        fields = rest.split()
        if not name or not fields:
            raise MeasurementError(f"metrics line {number}: no value: {raw!r}")
        try:
            value = float(fields[0])
        except ValueError as error:
            raise MeasurementError(f"metrics line {number}: bad value {fields[0]!r}") from error
        totals[name] = totals.get(name, 0.0) + value
    return totals


def _end_of_labels(line: str, brace: int, number: int) -> int:
    """Index of the `}` closing the label set that opens at `brace`, skipping quoted label values."""
    index = brace + 1
    in_quotes = False
    while index < len(line):
        char = line[index]
        if in_quotes:
            if char == "\\":
                index += 1
            elif char == '"':
                in_quotes = False
        elif char == '"':
            in_quotes = True
        elif char == "}":
            return index
        index += 1
    raise MeasurementError(f"metrics line {number}: unclosed label set: {line!r}")


def counter_value(counters: Mapping[str, float], name: str) -> float | None:
    """A counter by its name, accepting the `_total` suffix that Prometheus clients add to counters."""
    if name in counters:
        return counters[name]
    return counters.get(f"{name}_total")


def canonical_counters(counters: Mapping[str, float], names: Mapping[str, str]) -> dict[str, float]:
    """The counters, with each engine counter also under the farm's name for it (vLLM's names, as
    TOKEN_COUNTERS). `names` maps the farm's name to the engine's (e.g. `vllm:generation_tokens` ->
    `llamacpp:tokens_predicted_total`); a farm name the page already carries keeps its own value."""
    canonical = dict(counters)
    for farm_name, engine_name in names.items():
        if counter_value(canonical, farm_name) is None:
            value = counter_value(counters, engine_name)
            if value is not None:
                canonical[farm_name] = value
    return canonical


def counter_names_for(counters: Iterable[str], families: Mapping[str, Mapping[str, str]]) -> Mapping[str, str] | None:
    """The counter names of the engine whose metric-name prefix (a key of `families`, e.g. `sglang:`) the page
    carries first in `families`' order; None when no known prefix is there (yet)."""
    present = tuple(counters)
    for prefix, names in families.items():
        if any(name.startswith(prefix) for name in present):
            return names
    return None


def counter_deltas(
    before: Mapping[str, float], after: Mapping[str, float], names: Iterable[str]
) -> dict[str, float] | None:
    """after - before for each named counter; None when one is missing (the engine does not count it)."""
    deltas: dict[str, float] = {}
    for name in names:
        start, end = counter_value(before, name), counter_value(after, name)
        if start is None or end is None:
            return None
        deltas[name] = end - start
    return deltas


def spec_decode_figures(deltas: Mapping[str, float]) -> dict[str, float] | None:
    """Acceptance rate and mean acceptance length from counter deltas; None when no draft was made."""
    drafts, draft_tokens = deltas[SPEC_DRAFTS], deltas[SPEC_DRAFT_TOKENS]
    if drafts <= 0 or draft_tokens <= 0:
        return None
    accepted = deltas[SPEC_ACCEPTED_TOKENS]
    return {
        "acceptance_rate": acceptance_rate(accepted, draft_tokens),
        "mean_acceptance_length": mean_acceptance_length(accepted, drafts),
    }


def prefix_cache_hit_rate(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """Prompt tokens served from the prefix cache over prompt tokens queried between two counter readings
    (PREFIX_CACHE_COUNTERS); None when the engine does not count them or nothing was queried."""
    deltas = counter_deltas(before, after, PREFIX_CACHE_COUNTERS)
    if deltas is None:
        return None
    hits, queries = deltas["vllm:prefix_cache_hits"], deltas["vllm:prefix_cache_queries"]
    if queries <= 0:
        return None
    return min(max(hits / queries, 0.0), 1.0)
