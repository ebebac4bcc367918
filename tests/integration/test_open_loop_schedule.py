"""Open loop at a rate the client cannot hold: latency from the schedule is reported, and is the larger.

The client is slowed on purpose: each send first blocks its event loop for SLOW_SEND_S (as a client busy with
something else would), so at RATE_RPS it falls further behind its schedule with every request. Timed from the
actual send, the simulator's TTFT looks as fast as ever; timed from the schedule, it carries the client's lag,
which is what a user arriving on schedule waits. Goodput is judged from the schedule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from farm.bench.load import SLO, OpenLoopPlan
from farm.bench.records import RequestSample
from farm.bench.runner import run_sweep
from farm.bench.stream import StreamClient, StreamRequest
from farm.engines.process import EngineProcess
from farm.recipes.sweep import SweepPlan
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

RATE_RPS = 100.0
"""One request every 10 ms..."""
SLOW_SEND_S = 0.03
"""...from a client that needs 30 ms per send: it holds 33 requests/s, and lags ~20 ms more per request."""
REQUESTS = 20


@pytest.fixture(scope="module")
def sim() -> Iterator[EngineProcess]:
    with running_sim(faults=("--fault-startup-delay", "0")) as process:
        yield process


def run(sim: EngineProcess, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    original = StreamClient.stream

    async def slow_stream(self: StreamClient, request: StreamRequest, *, timeout_s: float) -> RequestSample:
        time.sleep(SLOW_SEND_S)  # noqa: ASYNC251 - blocks the loop on purpose: the next sends go out late
        return await original(self, request, timeout_s=timeout_s)

    monkeypatch.setattr(StreamClient, "stream", slow_stream)
    plan = SweepPlan(
        repeats=1,
        warmup_requests=0,
        time_budget_s=60.0,
        request_timeout_s=30.0,
        api="completions",
        open_loop=OpenLoopPlan(
            process="constant",
            rates_rps=(RATE_RPS,),
            requests=REQUESTS,
            prompt_tokens=64,
            output_tokens=8,
            slo=SLO(ttft_ms=100.0),
        ),
    )
    outcome = asyncio.run(run_sweep(sim.base_url, "sim-test", plan))
    return {figure.metric: figure for figure in outcome.figures}


def test_latency_from_the_schedule_is_reported_and_larger(sim: EngineProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """TTFT and E2E from the schedule exceed those from the send by about the client's lag (the last request
    goes out about 19 x 20 ms late); the lag is figured per rate and the round flagged client-bound; goodput
    judged from the schedule fails the 100 ms TTFT goal that the send-timed one meets."""
    figures = run(sim, monkeypatch)
    ttft_send = figures["ttft_ms_p50"].values[0]
    ttft_schedule = figures["ttft_from_schedule_ms_p50"].values[0]
    e2e_send = figures["e2e_ms_p99"].values[0]
    e2e_schedule = figures["e2e_from_schedule_ms_p99"].values[0]
    lag_p99 = figures["send_lag_ms_p99"].values[0]
    assert ttft_send < 60.0, ttft_send  # the simulator's 20 ms TTFT, plus this machine's noise
    expected_lag_ms = (REQUESTS - 1) * (SLOW_SEND_S - 1 / RATE_RPS) * 1000  # 380 ms for the last request
    assert lag_p99 > 0.7 * expected_lag_ms, lag_p99
    assert ttft_schedule > ttft_send + 0.3 * expected_lag_ms, (ttft_schedule, ttft_send)
    assert e2e_schedule > e2e_send + 0.7 * expected_lag_ms, (e2e_schedule, e2e_send)
    assert figures["send_lag_ms_max"].values[0] >= lag_p99
    assert figures["ttft_ms_p50"].params["client_bound"] is True
    assert figures["goodput_from_send_rps"].values[0] > figures["goodput_rps"].values[0]
    assert figures["good_fraction"].values[0] < 0.9
