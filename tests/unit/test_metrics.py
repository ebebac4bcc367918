"""The measurement math against hand-computed cases (farm.bench.metrics)."""

from __future__ import annotations

import math

import pytest

from farm.bench import metrics
from farm.bench.records import CONCURRENCY_METRICS, RequestSample
from farm.errors import MeasurementError

MS = 1_000_000  # nanoseconds per millisecond


def sample(
    started_ms: float,
    chunks_ms: tuple[float, ...],
    completion_tokens: int | None,
    *,
    prompt_tokens: int = 10,
    error: str | None = None,
) -> RequestSample:
    """A sample whose times are given in milliseconds from an arbitrary origin."""
    stamps = tuple(int(t * MS) for t in chunks_ms)
    return RequestSample(
        started_ns=int(started_ms * MS),
        first_token_ns=stamps[0] if stamps else None,
        last_token_ns=stamps[-1] if stamps else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        chunk_ns=stamps,
        error=error,
    )


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 50, 5.0),
        ([5.0], 99, 5.0),
        ([1.0, 2.0], 50, 1.5),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 90, 3.7),  # rank 0.9 * 3 = 2.7 → 3 + 0.7 * (4 - 3)
        ([4.0, 1.0, 3.0, 2.0], 90, 3.7),  # order does not matter
        ([10.0, 20.0, 30.0, 40.0, 50.0], 0, 10.0),
        ([10.0, 20.0, 30.0, 40.0, 50.0], 100, 50.0),
        ([10.0, 20.0, 30.0, 40.0, 50.0], 25, 20.0),
        ([10.0, 20.0, 30.0, 40.0, 50.0], 99, 49.6),  # rank 3.96 → 40 + 0.96 * 10
        (list(map(float, range(1, 101))), 99, 99.01),  # rank 98.01 → 99 + 0.01
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    """Percentiles match numpy's default linear interpolation on hand-computed cases."""
    assert metrics.percentile(values, q) == pytest.approx(expected)


@pytest.mark.parametrize(("values", "q"), [([], 50), ([1.0], -1), ([1.0], 101)])
def test_percentile_rejects_bad_input(values: list[float], q: float) -> None:
    """No values, or a q outside [0, 100], is an error rather than a made-up number."""
    with pytest.raises((MeasurementError, ValueError)):
        metrics.percentile(values, q)


@pytest.mark.parametrize(
    ("values", "n", "mean", "median", "low", "high", "stdev", "spread"),
    [
        ([276.0], 1, 276.0, 276.0, 276.0, 276.0, 0.0, 0.0),
        ([1.0, 2.0, 3.0], 3, 2.0, 2.0, 1.0, 3.0, 1.0, 1.0),
        ([2.0, 4.0], 2, 3.0, 3.0, 2.0, 4.0, math.sqrt(2.0), 2.0 / 3.0),
        ([270.0, 280.0, 278.0], 3, 276.0, 278.0, 270.0, 280.0, math.sqrt(28.0), 10.0 / 276.0),
    ],
)
def test_summarize(
    values: list[float],
    n: int,
    mean: float,
    median: float,
    low: float,
    high: float,
    stdev: float,
    spread: float,
) -> None:
    """Summary: n, mean, median, min, max, sample stdev (0 for one value), spread = (max - min) / mean."""
    summary = metrics.summarize(values)
    assert summary.n == n
    assert summary.mean == pytest.approx(mean)
    assert summary.median == pytest.approx(median)
    assert summary.min == low
    assert summary.max == high
    assert summary.stdev == pytest.approx(stdev)
    assert summary.spread == pytest.approx(spread)


def test_summarize_of_nothing_is_an_error() -> None:
    """A figure with no values cannot be summarised."""
    with pytest.raises(MeasurementError):
        metrics.summarize([])


@pytest.mark.parametrize(
    ("n_short", "t_short", "n_long", "t_long", "expected"),
    [
        (64, 0.5, 896, 3.5, 832 / 3.0),
        (64, 0.32, 896, 4.48, 200.0),  # 5 ms per token after the same prefill
        (10, 1.0, 20, 1.1, 100.0),
    ],
)
def test_two_point_decode(n_short: int, t_short: float, n_long: int, t_long: float, expected: float) -> None:
    """Decode rate = (n_long - n_short) / (t_long - t_short): the shared prefill cancels."""
    assert metrics.two_point_decode_tok_s(n_short, t_short, n_long, t_long) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n_short", "t_short", "n_long", "t_long"),
    [(64, 0.5, 64, 3.5), (64, 0.5, 32, 3.5), (64, 0.5, 896, 0.5), (64, 0.5, 896, 0.4)],
)
def test_two_point_decode_rejects_non_positive_differences(
    n_short: int, t_short: float, n_long: int, t_long: float
) -> None:
    """No more tokens, or no more time, in the long request is a measurement error."""
    with pytest.raises(MeasurementError):
        metrics.two_point_decode_tok_s(n_short, t_short, n_long, t_long)


@pytest.mark.parametrize(
    ("tokens", "ttft", "expected"), [(107_016, 10.29, 107_016 / 10.29), (1000, 0.1, 10_000.0), (1, 1.0, 1.0)]
)
def test_prefill_rate(tokens: int, ttft: float, expected: float) -> None:
    """Prefill rate = prompt tokens / time to first token."""
    assert metrics.prefill_tok_s(tokens, ttft) == pytest.approx(expected)


@pytest.mark.parametrize(("tokens", "ttft"), [(0, 1.0), (100, 0.0), (100, -1.0)])
def test_prefill_rate_rejects_nonsense(tokens: int, ttft: float) -> None:
    """No tokens or no time is an error."""
    with pytest.raises(MeasurementError):
        metrics.prefill_tok_s(tokens, ttft)


@pytest.mark.parametrize(
    ("record", "ttft", "e2e", "tpot", "itls"),
    [
        (sample(100, (120, 125, 130, 135), 4), 0.020, 0.035, 0.005, [0.005, 0.005, 0.005]),
        # Two chunks of three tokens each (speculative decoding): TPOT counts tokens, ITL counts chunks.
        (sample(0, (50, 65), 6), 0.050, 0.065, 0.003, [0.015]),
        (sample(10, (30, 31, 41), 3), 0.020, 0.031, 0.0055, [0.001, 0.010]),
    ],
)
def test_request_timings(record: RequestSample, ttft: float, e2e: float, tpot: float, itls: list[float]) -> None:
    """TTFT, E2E, TPOT = (last - first) / (tokens - 1), and the gaps between content chunks."""
    assert metrics.ttft_s(record) == pytest.approx(ttft)
    assert metrics.e2e_s(record) == pytest.approx(e2e)
    assert metrics.tpot_s(record) == pytest.approx(tpot)
    assert metrics.chunk_itls_s(record) == pytest.approx(itls)


@pytest.mark.parametrize(
    "record",
    [
        sample(0, (), None, error="HTTP 500: boom"),
        sample(0, (5,), 1, error="no usage"),
        sample(0, (), 0),
    ],
)
def test_failed_samples_have_no_timing(record: RequestSample) -> None:
    """A failed sample gives no TTFT, rather than a wrong one."""
    with pytest.raises(MeasurementError):
        metrics.ttft_s(record)


def test_tpot_needs_two_tokens() -> None:
    """TPOT is undefined for a one-token answer."""
    with pytest.raises(MeasurementError):
        metrics.tpot_s(sample(0, (10,), 1))


def test_concurrency_figures_by_hand() -> None:
    """Two streams, hand-computed: aggregate, per-stream, and the TTFT/ITL/TPOT/E2E percentiles."""
    streams = [
        # start 0, first 10, tokens every 10 ms: 5 tokens, last 50
        sample(0, (10, 20, 30, 40, 50), 5),
        # start 2, first 22, 2 chunks of 2 tokens: 4 tokens, last 42
        sample(2, (22, 42), 4),
    ]
    measured = metrics.concurrency_figures(streams)
    figures = measured.values
    assert set(figures) == set(CONCURRENCY_METRICS)
    assert measured.absent == {}
    assert figures["aggregate_tok_s"] == pytest.approx(9 / 0.050)  # 9 tokens from 0 to 50 ms
    # stream rates: 4 / 0.040 = 100 and 3 / 0.020 = 150
    assert figures["per_stream_tok_s"] == pytest.approx(125.0)
    assert figures["ttft_ms_p50"] == pytest.approx(15.0)  # (10 + 20) / 2
    assert figures["ttft_ms_p90"] == pytest.approx(19.0)
    assert figures["ttft_ms_p99"] == pytest.approx(19.9)
    # gaps: 10, 10, 10, 10 and 20 → p50 10, p90 rank 3.6 → 10 + 0.6 * 10
    assert figures["itl_ms_p50"] == pytest.approx(10.0)
    assert figures["itl_ms_p90"] == pytest.approx(16.0)
    # TPOT: 40 / 4 = 10 and 20 / 3
    assert figures["tpot_ms_p50"] == pytest.approx((10.0 + 20.0 / 3.0) / 2)
    # E2E: 50 and 40
    assert figures["e2e_ms_p50"] == pytest.approx(45.0)
    assert figures["e2e_ms_p99"] == pytest.approx(40.0 + 0.99 * 10.0)


def test_concurrency_figures_skip_failures() -> None:
    """Failed streams are left out of the figures (they are counted elsewhere)."""
    streams = [sample(0, (10, 20), 2), sample(0, (), None, error="timeout after 1.0 s")]
    figures = metrics.concurrency_figures(streams).values
    assert figures["aggregate_tok_s"] == pytest.approx(2 / 0.020)
    assert figures["ttft_ms_p99"] == pytest.approx(10.0)


SINGLE_CHUNK_METRICS = {f"{name}_p{q}" for name in ("itl_ms", "tpot_ms") for q in metrics.PERCENTILES} | {
    "per_stream_tok_s"
}


@pytest.mark.parametrize(
    ("streams", "reason"),
    [
        # every stream's tokens arrive in one chunk, as a loaded server or a large stream interval sends them
        ([sample(0, (30,), 8), sample(1, (41,), 8)], "one chunk"),
        # one-token answers: no time between tokens, and no gap between chunks
        ([sample(0, (12,), 1), sample(0, (15,), 1), sample(2, (16,), 1)], "one token"),
    ],
)
def test_concurrency_figures_leave_out_what_a_round_cannot_measure(streams: list[RequestSample], reason: str) -> None:
    """Per-stream rate, ITL and TPOT are absent with a reason, never NaN; TTFT, E2E and aggregate stay."""
    measured = metrics.concurrency_figures(streams)
    assert set(measured.absent) == SINGLE_CHUNK_METRICS
    assert set(measured.values) == set(CONCURRENCY_METRICS) - SINGLE_CHUNK_METRICS
    assert all(math.isfinite(value) for value in measured.values.values())
    assert reason in measured.absent["per_stream_tok_s"] or reason in measured.absent["tpot_ms_p50"]
    assert "one chunk" in measured.absent["itl_ms_p99"]
    last = max(s.last_token_ns or 0 for s in streams)
    tokens = sum(s.completion_tokens or 0 for s in streams)
    assert measured.values["aggregate_tok_s"] == pytest.approx(tokens / (last / 1e9))


def test_a_round_of_no_duration_has_no_aggregate_rate() -> None:
    """First token at the very start of a one-chunk round: the aggregate rate is absent, not infinite."""
    measured = metrics.concurrency_figures([sample(5, (5,), 3), sample(5, (5,), 3)])
    assert "aggregate_tok_s" in measured.absent
    assert "no duration" in measured.absent["aggregate_tok_s"]
    assert measured.values["ttft_ms_p50"] == 0.0
    assert all(math.isfinite(value) for value in measured.values.values())


def test_per_stream_figures_come_from_the_streams_that_have_them() -> None:
    """A round where one stream arrived in one chunk and one in two: the figures use the timed stream only."""
    measured = metrics.concurrency_figures([sample(0, (10,), 4), sample(0, (10, 30), 3)])
    assert measured.absent == {}
    assert measured.values["per_stream_tok_s"] == pytest.approx(2 / 0.020)
    assert measured.values["tpot_ms_p50"] == pytest.approx(10.0)
    assert measured.values["itl_ms_p50"] == pytest.approx(20.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_summarize_refuses_non_finite_values(bad: float) -> None:
    """A NaN or infinity is the farm's own MeasurementError, not statistics' AttributeError."""
    with pytest.raises(MeasurementError, match="non-finite"):
        metrics.summarize([1.0, bad, 2.0])


def test_a_figure_cannot_hold_a_non_finite_value() -> None:
    """The record itself refuses NaN, so no store, export or API can carry one."""
    from farm.bench.records import Figure, Summary

    with pytest.raises(MeasurementError, match="finite"):
        Figure(
            "concurrency", "concurrency/4/tpot_ms_p50", "tpot_ms_p50", "ms", (math.nan,), Summary(1, 0, 0, 0, 0, 0, 0)
        )
    with pytest.raises(MeasurementError, match="finite"):
        Figure("decode", "decode/code/decode_tok_s", "decode_tok_s", "tok/s", (), Summary(0, 0, 0, 0, 0, 0, 0))


def test_concurrency_figures_when_all_failed() -> None:
    """A round where every stream failed is a measurement error."""
    with pytest.raises(MeasurementError, match="every one of the 2"):
        metrics.concurrency_figures([sample(0, (), None, error="x"), sample(0, (), None, error="y")])


@pytest.mark.parametrize(
    ("accepted", "draft_tokens", "drafts", "rate", "length"),
    [
        (486, 1000, 250, 0.486, 1 + 486 / 250),  # the seed's 48.6% with 4 drafts per step
        (0, 300, 100, 0.0, 1.0),
        (300, 300, 100, 1.0, 4.0),
    ],
)
def test_spec_decode_definitions(
    accepted: float, draft_tokens: float, drafts: float, rate: float, length: float
) -> None:
    """vLLM's definitions: acceptance rate = accepted / draft tokens; mean length = 1 + accepted / drafts."""
    assert metrics.acceptance_rate(accepted, draft_tokens) == pytest.approx(rate)
    assert metrics.mean_acceptance_length(accepted, drafts) == pytest.approx(length)
    deltas = {
        metrics.SPEC_DRAFTS: drafts,
        metrics.SPEC_DRAFT_TOKENS: draft_tokens,
        metrics.SPEC_ACCEPTED_TOKENS: accepted,
    }
    assert metrics.spec_decode_figures(deltas) == pytest.approx(
        {"acceptance_rate": rate, "mean_acceptance_length": length}
    )


def test_spec_decode_without_drafts() -> None:
    """No draft in the interval: no figure, and the two ratios refuse to divide by zero."""
    deltas = {metrics.SPEC_DRAFTS: 0.0, metrics.SPEC_DRAFT_TOKENS: 0.0, metrics.SPEC_ACCEPTED_TOKENS: 0.0}
    assert metrics.spec_decode_figures(deltas) is None
    with pytest.raises(MeasurementError):
        metrics.acceptance_rate(1, 0)
    with pytest.raises(MeasurementError):
        metrics.mean_acceptance_length(1, 0)


PROMETHEUS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:prompt_tokens_total{model_name="a } b",engine="0"} 7 1700000000000
vllm:request_success_total{finished_reason="say \\"hi\\"",engine="0"} 2
vllm:request_success_total{finished_reason="length",engine="0"} 3

process_open_fds 12
vllm:gpu_cache_usage_perc{engine="0"} NaN
"""


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("vllm:spec_decode_num_drafts_total", 150.0),
        ("vllm:spec_decode_num_drafts_created", 1.7e9),
        ("vllm:prompt_tokens_total", 7.0),  # a brace inside a label value, and a timestamp
        ("vllm:request_success_total", 5.0),  # an escaped quote inside a label value
        ("process_open_fds", 12.0),
    ],
)
def test_prometheus_counters_sum_over_labels(name: str, expected: float) -> None:
    """Each sample name's values are summed over its label sets; comments and blank lines are skipped."""
    assert metrics.parse_prometheus_counters(PROMETHEUS)[name] == pytest.approx(expected)


def test_prometheus_counter_lookup_and_deltas() -> None:
    """A counter is found with or without `_total`; a missing counter makes the deltas None."""
    before = metrics.parse_prometheus_counters(PROMETHEUS)
    after = {**before, "vllm:spec_decode_num_drafts_total": 175.0}
    assert metrics.counter_value(before, "vllm:spec_decode_num_drafts") == 150.0
    assert metrics.counter_deltas(before, after, ["vllm:spec_decode_num_drafts"]) == {
        "vllm:spec_decode_num_drafts": 25.0
    }
    assert metrics.counter_deltas(before, after, metrics.SPEC_DECODE_COUNTERS) is None
    assert math.isnan(before["vllm:gpu_cache_usage_perc"])


@pytest.mark.parametrize("text", ['vllm:x{engine="0" 1', "vllm:x", 'vllm:x{engine="0"}', "vllm:x not-a-number"])
def test_prometheus_rejects_unreadable_lines(text: str) -> None:
    """A line that cannot be read is an error naming the line."""
    with pytest.raises(MeasurementError, match="line 1"):
        metrics.parse_prometheus_counters(text)
