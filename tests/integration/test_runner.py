"""A whole sweep plan against the simulator: every figure the plan asks for, with sane values, and the stops.

One simulator for the module (test profile: 20 ms base latency, 1 µs per prompt token, 200 tok/s, with
speculative decoding of 3 drafts at acceptance 0.6 so that the spec-decode figures exist).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator

import pytest
from buffering_proxy import BufferingProxy

from farm.bench.records import CONCURRENCY_METRICS, figure_key
from farm.bench.runner import SweepOutcome, run_sweep
from farm.errors import MeasurementError
from farm.recipes.sweep import (
    ConcurrencyPlan,
    DecodePlan,
    PrefillPlan,
    PrefixCachePlan,
    ShortTTFTPlan,
    SweepPlan,
)
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

MODEL = "sim-test"
PREFILL_TOKENS = 10_000
FULL_PLAN = SweepPlan(
    repeats=2,
    warmup_requests=1,
    time_budget_s=120,
    request_timeout_s=30,
    decode=DecodePlan(short_output_tokens=16, long_output_tokens=96),
    prefill=PrefillPlan(prompt_tokens=(PREFILL_TOKENS,)),
    short_ttft=ShortTTFTPlan(prompt_tokens=32),
    prefix_cache=PrefixCachePlan(),
    concurrency=ConcurrencyPlan(levels=(1, 4), prompt_tokens=128, output_tokens=32),
)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """One simulator with speculative decoding for the module."""
    faults = ("--fault-startup-delay", "0")
    with running_sim(model=MODEL, overrides=("num_speculative_tokens=3", "acceptance_rate=0.6"), faults=faults) as sim:
        yield sim.base_url


@pytest.fixture(scope="module")
def full_run(sim_url: str) -> tuple[SweepOutcome, list[str], list[tuple[float, str]]]:
    """The full plan, run once for the module's checks, with the phases and progress it reported."""
    phases: list[str] = []
    progress: list[tuple[float, str]] = []
    outcome = asyncio.run(
        run_sweep(
            sim_url,
            MODEL,
            FULL_PLAN,
            on_phase=phases.append,
            on_progress=lambda fraction, message: progress.append((fraction, message)),
        )
    )
    return outcome, phases, progress


def expected_keys() -> set[str]:
    keys = set()
    for workload in ("code", "prose", "math"):
        keys.add(figure_key("decode", workload, "decode_tok_s"))
        keys.add(figure_key("spec_decode", workload, "acceptance_rate"))
        keys.add(figure_key("spec_decode", workload, "mean_acceptance_length"))
    keys.add(figure_key("prefill", PREFILL_TOKENS, "prefill_tok_s"))
    keys.add(figure_key("prefill", PREFILL_TOKENS, "ttft_ms"))
    keys.add(figure_key("short_ttft", 32, "ttft_ms"))
    keys.add(figure_key("prefix_cache", PREFILL_TOKENS, "ttft_ms"))
    # The simulator counts prefix-cache hits, so each prefill-like measurement carries its hit rate.
    keys.add(figure_key("prefill", PREFILL_TOKENS, "prefix_cache_hit_rate"))
    keys.add(figure_key("short_ttft", 32, "prefix_cache_hit_rate"))
    keys.add(figure_key("prefix_cache", PREFILL_TOKENS, "prefix_cache_hit_rate"))
    for level in (1, 4):
        keys.update(figure_key("concurrency", level, metric) for metric in CONCURRENCY_METRICS)
    return keys


def test_every_figure_is_there(full_run: tuple[SweepOutcome, list[str], list[tuple[float, str]]]) -> None:
    """The full plan yields exactly the expected figure keys, one value per repeat, and their samples."""
    outcome, _, _ = full_run
    assert {figure.key for figure in outcome.figures} == expected_keys()
    for figure in outcome.figures:
        assert len(figure.values) == FULL_PLAN.repeats, figure.key
        assert figure.requested_repeats == FULL_PLAN.repeats
        assert figure.summary.n == FULL_PLAN.repeats
        assert figure.params["repeats"] == FULL_PLAN.repeats
        assert len(outcome.samples_for(figure.key)) == FULL_PLAN.repeats, figure.key
    assert outcome.figure("concurrency/4/aggregate_tok_s").params["concurrency"] == 4
    assert outcome.figure("decode/code/decode_tok_s").params["long_output_tokens"] == 96


def test_values_are_sane(full_run: tuple[SweepOutcome, list[str], list[tuple[float, str]]]) -> None:
    """Decode near 200 tok/s, TTFTs near the timing model, the cache faster, spec decode as vLLM has it."""
    outcome, _, _ = full_run

    def mean(key: str) -> float:
        return outcome.figure(key).summary.mean

    for workload in ("code", "prose", "math"):
        assert mean(f"decode/{workload}/decode_tok_s") == pytest.approx(200.0, rel=0.05)
        rate = mean(f"spec_decode/{workload}/acceptance_rate")
        assert 0.3 < rate < 0.9
        # 3 draft tokens per draft: mean length = 1 + accepted / drafts = 1 + 3 * rate, repeat by repeat.
        lengths = outcome.figure(f"spec_decode/{workload}/mean_acceptance_length").values
        rates = outcome.figure(f"spec_decode/{workload}/acceptance_rate").values
        assert lengths == pytest.approx([1 + 3 * value for value in rates])
    # TTFTs run from the client's send: never below the timing model, and a loaded machine adds only a little.
    prefill_truth_ms = 20.0 + PREFILL_TOKENS * 1e-3  # 20 ms + 1 µs per token
    prefill_ms = mean(f"prefill/{PREFILL_TOKENS}/ttft_ms")
    assert prefill_truth_ms * 0.99 <= prefill_ms <= prefill_truth_ms * 1.5
    prefill_rate = mean(f"prefill/{PREFILL_TOKENS}/prefill_tok_s")
    assert (
        PREFILL_TOKENS / prefill_truth_ms * 1e3 / 1.5 <= prefill_rate <= PREFILL_TOKENS / prefill_truth_ms * 1e3 / 0.99
    )
    assert mean(f"prefix_cache/{PREFILL_TOKENS}/ttft_ms") < prefill_ms
    assert 20.0 * 0.99 <= mean("short_ttft/32/ttft_ms") <= 20.0 * 1.5
    for level in (1, 4):
        assert mean(f"concurrency/{level}/per_stream_tok_s") == pytest.approx(200.0, rel=0.05)
        assert mean(f"concurrency/{level}/tpot_ms_p50") == pytest.approx(5.0, rel=0.05)
        assert mean(f"concurrency/{level}/ttft_ms_p50") <= mean(f"concurrency/{level}/ttft_ms_p99")
        assert mean(f"concurrency/{level}/e2e_ms_p50") > mean(f"concurrency/{level}/ttft_ms_p50")


def test_provenance_and_counts(full_run: tuple[SweepOutcome, list[str], list[tuple[float, str]]]) -> None:
    """Version, hashes, request counts, counters, phases and progress are all reported."""
    outcome, phases, progress = full_run
    assert outcome.engine_version == "0.0.0+sim"
    assert outcome.failed_requests == 0
    # warm-up 1; decode 3 x (1 + 2 x 2); prefill, short TTFT 2 each; prefix cache 1 + 2; concurrency 2 x (1 + 4)
    assert outcome.total_requests == 1 + 3 * 5 + 2 + 2 + 1 + 2 + 2 * 5
    assert set(outcome.prompt_sha256) >= {"decode/code", f"prefill/{PREFILL_TOKENS}#0", "concurrency/4#1"}
    assert all(len(digest) == 64 for digest in [*outcome.prompt_sha256.values(), *outcome.output_sha256.values()])
    assert (
        outcome.prompt_sha256[f"prefix_cache/{PREFILL_TOKENS}"] == outcome.prompt_sha256[f"prefill/{PREFILL_TOKENS}#0"]
    )
    assert outcome.metrics_before is not None
    assert outcome.metrics_after is not None
    assert phases == ["warming", "measuring"]
    fractions = [fraction for fraction, _ in progress]
    assert fractions == sorted(fractions)
    assert fractions[-1] == pytest.approx(1.0)
    sample = outcome.samples["concurrency/4"][0][0]
    assert sample["completion_tokens"] == 32
    assert sample["error"] is None


def test_stop_request_ends_the_sweep(sim_url: str) -> None:
    """should_stop() turning true stops the sweep before its next request with MeasurementError("stopped")."""
    calls = 0

    def stop_after_a_while() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    with pytest.raises(MeasurementError, match="stopped"):
        asyncio.run(run_sweep(sim_url, MODEL, FULL_PLAN, should_stop=stop_after_a_while))


def test_time_budget_ends_the_sweep(sim_url: str) -> None:
    """A budget shorter than the plan ends it with MeasurementError naming the budget."""
    plan = FULL_PLAN.model_copy(update={"time_budget_s": 0.5})
    started = time.monotonic()
    with pytest.raises(MeasurementError, match="time budget"):
        asyncio.run(run_sweep(sim_url, MODEL, plan))
    assert time.monotonic() - started < 5.0


def test_every_request_failing_is_a_measurement_error(sim_url: str) -> None:
    """When every request of a measurement fails (here: a 1 ms request timeout), the sweep raises."""
    plan = FULL_PLAN.model_copy(update={"request_timeout_s": 0.001})
    with pytest.raises(MeasurementError, match=r"decode/code: every request failed \(timeout"):
        asyncio.run(run_sweep(sim_url, MODEL, plan))


def test_unknown_model_is_refused(sim_url: str) -> None:
    """A model the server does not list is refused before anything is measured."""
    with pytest.raises(MeasurementError, match="does not serve"):
        asyncio.run(run_sweep(sim_url, "no-such-model", FULL_PLAN))


def test_streams_that_arrive_in_one_chunk_leave_out_only_what_they_cannot_measure(sim_url: str) -> None:
    """Every method through a buffering proxy, so that each answer reaches the client in one read (as behind
    nginx's proxy buffering, or from a loaded engine that merges its outputs): the sweep succeeds; per-stream
    rate and TPOT are absent, each with its reason; every other figure is there and finite."""
    port = int(sim_url.rsplit(":", 1)[1])
    plan = FULL_PLAN.model_copy(update={"decode": DecodePlan(short_output_tokens=8, long_output_tokens=40)})
    with BufferingProxy(port) as proxy:
        outcome = asyncio.run(run_sweep(proxy.url, MODEL, plan))
    unmeasurable = {
        figure_key("concurrency", level, metric)
        for level in (1, 4)
        for metric in CONCURRENCY_METRICS
        if metric.startswith(("tpot_", "per_stream"))
    }
    assert set(outcome.absent) == unmeasurable
    assert all("one chunk" in reason for reason in outcome.absent.values()), outcome.absent
    assert {figure.key for figure in outcome.figures} == expected_keys() - unmeasurable
    for figure in outcome.figures:
        assert all(math.isfinite(value) for value in figure.values), figure
    for group in outcome.samples["concurrency/4"]:
        for sample in group:
            assert len(set(sample["chunk_ns"])) == 1, "every content chunk of an answer arrived in one read"
    # Two-point decode holds on one read per answer: the long answer ends later by its decode time alone.
    decode = outcome.figure(figure_key("decode", "code", "decode_tok_s"))
    # Tolerance 10%: each answer ends when the proxy's 50 ms quiet timer fires, whose jitter of a few ms lands
    # on a 160 ms difference.
    assert decode.summary.mean == pytest.approx(200.0, rel=0.10)
