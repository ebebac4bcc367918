"""Open-loop load on the simulator: the rate sweep finds the highest rate under a TTFT SLO that the timing model
predicts, and goodput falls once the offered rate passes it.

The simulator serves at most `max_num_seqs` requests at once; the rest wait for a slot. At a constant arrival
rate below `farm.sim.timing.saturation_rate_rps` nobody waits, so TTFT is the model's; above it the queue grows
with every request. A TTFT goal 40 ms above the model's TTFT is therefore met up to (just past) that rate.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import aiohttp
import pytest

from farm.bench.load import SLO, OpenLoopPlan, RateSearch
from farm.bench.methods import MeasureContext, Measurement
from farm.bench.multiproc import timed_placement
from farm.bench.openloop import KIND_OPEN_LOOP, KIND_RATE_SWEEP, measure_open_loop
from farm.engines.process import EngineProcess
from farm.recipes.sweep import SweepPlan
from farm.sim import timing
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

MODEL = "sim-test"
SLOTS = 8
PROMPT_TOKENS = 64
OUTPUT_TOKENS = 32
SLACK_MS = 40.0
BASE_LATENCY_S = 0.020
DECODE_TOK_S = 200.0


@pytest.fixture(scope="module")
def sim() -> Iterator[EngineProcess]:
    """A simulator with 8 slots on the second quietest CPU; this test process on the quietest."""
    placement = timed_placement()
    before = os.sched_getaffinity(0) if placement else None
    overrides = (f"max_num_seqs={SLOTS}", f"base_latency_s={BASE_LATENCY_S}", "contention=0")
    with running_sim(
        model=MODEL,
        overrides=overrides,
        faults=("--fault-startup-delay", "0"),
        cpus={placement[1]} if placement else None,
    ) as process:
        if placement:
            os.sched_setaffinity(0, {placement[0]})
        try:
            yield process
        finally:
            if before is not None:
                os.sched_setaffinity(0, before)


def model_ttft_s() -> float:
    return timing.ttft_s(
        PROMPT_TOKENS,
        0,
        base_latency_s=BASE_LATENCY_S,
        linear_s_per_token=1.0e-6,
        quadratic_s_per_token2=0.0,
        cached_s_per_token=1.0e-7,
    )


def predicted_rate_rps() -> float:
    """The timing model's saturation rate for this profile and request shape."""
    return timing.saturation_rate_rps(
        slots=SLOTS,
        ttft_s_=model_ttft_s(),
        completion_tokens=OUTPUT_TOKENS,
        one_stream_tok_s=DECODE_TOK_S,
        contention=0.0,
    )


def plan(**changes: object) -> OpenLoopPlan:
    base = OpenLoopPlan(
        process="constant",
        rates_rps=(),
        requests=150,
        prompt_tokens=PROMPT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        slo=SLO(ttft_ms=model_ttft_s() * 1000 + SLACK_MS, min_good_fraction=0.95),
        find_max_rate=RateSearch(low_rps=10.0, high_rps=120.0, precision=0.02),
    )
    return base.model_copy(update=changes)


async def measured(base_url: str, open_loop: OpenLoopPlan, repeats: int = 1) -> Measurement:
    sweep = SweepPlan(repeats=repeats, time_budget_s=300, request_timeout_s=60, api="completions")
    async with aiohttp.ClientSession() as control:
        ctx = MeasureContext(base_url, MODEL, sweep, control, deadline_ns=time.monotonic_ns() + 300 * 10**9)
        return await measure_open_loop(ctx, open_loop, repeats)


def test_rate_sweep_finds_the_models_saturation_rate_within_5_percent(sim: EngineProcess) -> None:
    """The highest rate that meets the TTFT SLO is within 5% of slots / (TTFT + (n-1)/r) from farm.sim.timing."""
    result = asyncio.run(measured(sim.base_url, plan()))
    figures = {figure.key: figure for figure in result.figures}
    found = figures[f"{KIND_RATE_SWEEP}/max/max_rate_rps"]
    predicted = predicted_rate_rps()
    assert found.params["converged"] is True
    assert abs(found.values[0] - predicted) / predicted < 0.05, (found.values[0], predicted, found.params["points"])
    assert found.params["high_rps"] / found.values[0] - 1 <= 0.02 + 1e-9


def test_goodput_holds_below_the_saturation_rate_and_falls_above(sim: EngineProcess) -> None:
    """At 70% of the predicted rate every request is good and throughput follows the rate; at 150% goodput
    falls below the offered rate while the server still completes requests at about its capacity."""
    predicted = predicted_rate_rps()
    low, high = round(predicted * 0.7, 2), round(predicted * 1.5, 2)
    result = asyncio.run(measured(sim.base_url, plan(rates_rps=(low, high), find_max_rate=None)))
    figures = {figure.key: figure for figure in result.figures}

    def value(rate: float, metric: str) -> float:
        return figures[f"{KIND_OPEN_LOOP}/{rate:.4g}rps/{metric}"].summary.mean

    assert value(low, "good_fraction") == 1.0
    assert abs(value(low, "achieved_rps") - low) / low < 0.1
    assert value(high, "good_fraction") < 0.95
    assert value(high, "goodput_rps") < value(high, "achieved_rps")
    assert value(high, "achieved_rps") < predicted * 1.1
