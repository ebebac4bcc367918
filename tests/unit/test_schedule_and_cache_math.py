"""Pure measurement math of issue 24: latency from the schedule, the prefix-cache hit rate, decode at depth."""

from __future__ import annotations

import pytest

from farm.bench import metrics
from farm.bench.load import SLO, e2e_from_schedule_s, load_figures, meets_slo, send_lag_s, ttft_from_schedule_s
from farm.bench.records import RequestSample
from farm.sim import timing

MS = 1_000_000


def sample(started_ms: float, first_ms: float, last_ms: float, tokens: int = 10) -> RequestSample:
    return RequestSample(
        started_ns=int(started_ms * MS),
        first_token_ns=int(first_ms * MS),
        last_token_ns=int(last_ms * MS),
        prompt_tokens=8,
        completion_tokens=tokens,
    )


@pytest.mark.parametrize(
    ("scheduled_ms", "started_ms", "first_ms", "last_ms", "ttft_s", "e2e_s", "lag_s"),
    [
        (0, 0, 20, 70, 0.020, 0.070, 0.0),  # on time: the same as from the send
        (0, 300, 320, 370, 0.320, 0.370, 0.300),  # 300 ms late: the user waited 320 ms for a first token
        (100, 90, 110, 150, 0.020, 0.060, 0.0),  # a send never counts as early: from the send itself
    ],
)
def test_latency_from_the_schedule(
    scheduled_ms: float,
    started_ms: float,
    first_ms: float,
    last_ms: float,
    ttft_s: float,
    e2e_s: float,
    lag_s: float,
) -> None:
    """TTFT and E2E from the scheduled send, and the send lag, by hand."""
    one = sample(started_ms, first_ms, last_ms)
    due = int(scheduled_ms * MS)
    assert ttft_from_schedule_s(one, due) == pytest.approx(ttft_s)
    assert e2e_from_schedule_s(one, due) == pytest.approx(e2e_s)
    assert send_lag_s(one, due) == pytest.approx(lag_s)


def test_goodput_is_judged_from_the_schedule() -> None:
    """A request 300 ms late to send fails a 100 ms TTFT goal from the schedule though its server TTFT is 20 ms;
    the send-judged goodput keeps it."""
    slo = SLO(ttft_ms=100.0)
    late = sample(300, 320, 370)
    assert meets_slo(late, slo)
    assert not meets_slo(late, slo, scheduled_ns=0)
    on_time = sample(10, 30, 80)
    figures = load_figures([on_time, late], 10.0, slo, scheduled_ns=[10 * MS, 0]).as_dict()
    assert figures["good_fraction"] == 0.5
    window_s = 0.370  # first scheduled send (0) to the last token (370 ms)
    assert figures["goodput_rps"] == pytest.approx(1 / window_s)
    assert figures["goodput_from_send_rps"] == pytest.approx(2 / window_s)
    assert figures["send_lag_ms_max"] == pytest.approx(300.0)
    assert figures["ttft_from_schedule_ms_p99"] > figures["ttft_ms_p99"]


def test_scheduled_times_must_match_the_samples() -> None:
    """One scheduled time per sample, or it is a bug in the caller."""
    with pytest.raises(ValueError, match="scheduled times"):
        load_figures([sample(0, 20, 70)], 1.0, SLO(), scheduled_ns=[0, 1])


HITS, QUERIES = "vllm:prefix_cache_hits", "vllm:prefix_cache_queries"


@pytest.mark.parametrize(
    ("before", "after", "rate"),
    [
        ({HITS + "_total": 0, QUERIES + "_total": 0}, {HITS + "_total": 3984, QUERIES + "_total": 4000}, 0.996),
        ({HITS: 100, QUERIES: 1000}, {HITS: 100, QUERIES: 2000}, 0.0),
        ({HITS: 5, QUERIES: 10}, {HITS: 5, QUERIES: 10}, None),  # nothing queried in between
        ({"vllm:prompt_tokens": 1}, {"vllm:prompt_tokens": 2}, None),  # the engine counts no cache hits
    ],
)
def test_prefix_cache_hit_rate(before: dict[str, float], after: dict[str, float], rate: float | None) -> None:
    """Hits over queries between two readings; None when nothing was queried or nothing is counted."""
    got = metrics.prefix_cache_hit_rate(before, after)
    assert got == (pytest.approx(rate) if rate is not None else None)


@pytest.mark.parametrize(
    ("rate", "depth", "k", "expected"),
    [
        (200.0, 0, 1e-7, 200.0),
        (200.0, 32768, 1e-7, 1 / (0.005 + 32768e-7)),  # 8.28 ms a token: 120.8 tok/s
        (200.0, 8192, 0.0, 200.0),  # k = 0: decode does not depend on context
    ],
)
def test_decode_rate_at_depth(rate: float, depth: int, k: float, expected: float) -> None:
    """Each output token takes 1/r + k*d seconds."""
    assert timing.rate_at_depth(rate, depth, k) == pytest.approx(expected)


USAGE = {"prompt_tokens": 100, "completion_tokens": 2}


@pytest.mark.parametrize(
    ("last_chunks", "cached"),
    [
        # OpenAI, SGLang, vLLM with --enable-prompt-tokens-details: the usage chunk says it
        ([{"choices": [], "usage": {**USAGE, "prompt_tokens_details": {"cached_tokens": 64}}}], 64),
        # llama-server: its last chunk carries timings.cache_n beside the usage
        ([{"choices": [], "usage": USAGE, "timings": {"cache_n": 96, "prompt_n": 4}}], 96),
        ([{"choices": [], "usage": USAGE}], None),  # vLLM by default: silent
    ],
)  # fmt: skip
def test_cached_tokens_the_answer_reports(last_chunks: list[dict[str, object]], cached: int | None) -> None:
    """The stream's sample keeps the prompt tokens the server says it served from its cache, when it says so."""
    import json

    from farm.bench.sse import COMPLETION_TEXT_KEYS, StreamAccumulator

    accumulator = StreamAccumulator(COMPLETION_TEXT_KEYS)
    body = b'data: {"choices": [{"text": " a"}]}\n\ndata: {"choices": [{"text": " b"}]}\n\n'
    body += b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in last_chunks) + b"data: [DONE]\n\n"
    accumulator.feed(body, 1_000)
    got = accumulator.sample(0)
    assert got.ok
    assert got.cached_tokens == cached
    assert ("cached_tokens" in got.to_json()) == (cached is not None)


@pytest.mark.parametrize(
    ("hit_rates", "flagged"),
    [([0.0, 0.0], False), ([0.0, 0.05], False), ([0.0, 0.5], True), ([], False)],
)
def test_a_cold_measurement_served_from_the_cache_is_flagged(hit_rates: list[float], flagged: bool) -> None:
    """Above COLD_HIT_RATE_LIMIT in any repeat, a measurement meant cold says cold_but_warm; a warm one never."""
    from farm.bench.methods import CacheWatch

    watch = CacheWatch(reset="POST /reset_prefix_cache", hit_rates=hit_rates)
    assert watch.params(meant_cold=True)["cold_but_warm"] is flagged
    assert "cold_but_warm" not in watch.params(meant_cold=False)
