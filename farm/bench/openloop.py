"""The timed path of open-loop load: requests sent on a schedule, whatever the server's answers are doing.

One round at one rate: the prompts are sized first (untimed, each with a unique prefix, so no prefix-cache
hit), then each request is sent at its scheduled time (`farm.bench.load.arrival_offsets_s`) from one event
loop, without waiting for earlier ones. A request's TTFT is timed from when it was really sent (the server's
latency) and from when it was scheduled (what a user arriving on schedule waits: `ttft_from_schedule_ms_*`,
`e2e_from_schedule_ms_*`), both stored; the client's lateness is measured apart (`send_lag_ms_*`, actual minus
scheduled send), goodput is judged from the schedule, and a round where the client fell behind its schedule is
flagged `client_bound`.

Where the server is on loopback and a packet capture can run (`farm.bench.capture.KernelStamps`), the round's samples
are moved onto the kernel's receive stamps (the actual send is the kernel's stamp of the request's last byte), so the
client's own lag bends no latency; a round is flagged client-bound when its sends fell behind the schedule (another
offered load than asked, which no stamp undoes) or the capture shows the client throttled the server (its receive
window closed), not because its loop read late.

`measure_open_loop` measures every rate of an `OpenLoopPlan` (and the rate sweep, when asked) and returns a
`farm.bench.methods.Measurement` with the figures of kinds `open_loop` and `rate_sweep`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from farm.bench import metrics
from farm.bench.capture import KernelStamps
from farm.bench.load import (
    OpenLoopPlan,
    RatePoint,
    RateSearch,
    RateSearchResult,
    arrival_offsets_s,
    find_max_rate,
    load_figures,
)
from farm.bench.methods import MeasureContext, Measurement, concurrency_prompts
from farm.bench.multiproc import monotonic_offset_ns
from farm.bench.records import Figure, RequestSample, figure_key
from farm.bench.stream import StreamRequest
from farm.recipes.sweep import ConcurrencyPlan

KIND_OPEN_LOOP = "open_loop"  # point = "<rate>rps"; metrics of farm.bench.load.LoadFigures, send_lag_ms_p99
KIND_RATE_SWEEP = "rate_sweep"  # point = "max"; metric max_rate_rps

START_LEAD_NS = 20_000_000
"""The schedule starts 20 ms after the tasks are set up, so the first sends are not late by set-up work."""

CLIENT_BOUND_LAG_MS = 5.0
"""A round whose p99 send lag exceeds this measured the client as much as the server: it is flagged."""


@dataclass(frozen=True)
class OpenLoopRound:
    """One round at one rate: the samples, each request's send lag, and the round's figures."""

    rate_rps: float
    samples: list[RequestSample]
    send_lag_ms: list[float]
    scheduled_ns: list[int]
    """Each request's scheduled send time (perf_counter_ns, the samples' clock)."""
    timestamps: str = "user"
    """`kernel` (the capture's receive stamps) or `user` (`timestamps_reason` says why)."""
    timestamps_reason: str | None = None
    client_lag: dict[str, float] | None = None
    """With kernel stamps: the client's lag in reading (ms, p50 / p99 / max over the content chunks)."""
    throttled: tuple[str, ...] = ()
    """With kernel stamps: why the client throttled the server (its receive window closed); empty when it did not."""

    @property
    def send_lag_ms_p99(self) -> float:
        return metrics.percentile(self.send_lag_ms, 99) if self.send_lag_ms else 0.0

    @property
    def client_bound(self) -> bool:
        # A schedule the client did not keep is a different offered load, which no time stamp undoes: flagged with
        # either stamps. With kernel stamps a loop that read late bends nothing, unless it throttled the server.
        return self.send_lag_ms_p99 > CLIENT_BOUND_LAG_MS or bool(self.throttled)


async def run_round(ctx: MeasureContext, plan: OpenLoopPlan, rate_rps: float, seed: int) -> OpenLoopRound:
    """Size `plan.requests` prompts, then send them at `rate_rps` on the plan's arrival process."""
    shape = ConcurrencyPlan(
        levels=(plan.requests,),
        prompt_tokens=plan.prompt_tokens,
        output_tokens=max(plan.output_tokens, 2),
        workload=plan.workload,
    )
    sized = await concurrency_prompts(ctx, plan.requests, shape)
    requests = [
        StreamRequest(
            prompt=prompt.text,
            max_tokens=plan.output_tokens,
            api=ctx.plan.api,
            temperature=ctx.plan.temperature,
            thinking=ctx.plan.thinking,
        )
        for prompt in sized
    ]
    offsets = arrival_offsets_s(plan.process, rate_rps, plan.requests, seed=seed, burst_size=plan.burst_size)
    ctx.check()
    timeout = ctx.timeout_s()
    lags: list[float] = []
    scheduled: list[int] = []
    clock = time.perf_counter_ns
    with KernelStamps(ctx.base_url) as stamps:
        async with ctx.client(concurrency=plan.max_in_flight) as client:
            tasks: list[asyncio.Task[RequestSample]] = []
            start = clock() + START_LEAD_NS
            for offset, request in zip(offsets, requests, strict=True):
                due = start + round(offset * metrics.NS_PER_S)
                scheduled.append(due)
                wait = due - clock()
                if wait > 0:
                    await asyncio.sleep(wait / metrics.NS_PER_S)
                lags.append(max(0, clock() - due) / 1e6)
                tasks.append(asyncio.create_task(client.stream(request, timeout_s=timeout)))
            samples = list(await asyncio.gather(*tasks))
    restamped = stamps.restamp(samples, monotonic_to_sample_ns=monotonic_offset_ns())
    ctx.record(restamped.samples)
    return OpenLoopRound(
        rate_rps,
        restamped.samples,
        lags,
        scheduled,
        timestamps=restamped.timestamps,
        timestamps_reason=restamped.reason,
        client_lag=restamped.lag_summary() or None,
        throttled=tuple(restamped.throttled),
    )


def _point(rate_rps: float) -> str:
    return f"{rate_rps:.4g}rps"


def _figure(kind: str, point: str, metric: str, values: list[float], params: dict[str, Any], repeats: int) -> Figure:
    unit = (
        "ms" if "_ms" in metric else "tok/s" if metric.endswith("tok_s") else "req/s" if metric.endswith("rps") else ""
    )
    if metric in ("good_fraction",):
        unit = "fraction"
    if metric == "failed_requests":
        unit = "requests"
    return Figure(
        kind=kind,
        key=figure_key(kind, point, metric),
        metric=metric,
        unit=unit,
        values=tuple(values),
        summary=metrics.summarize(values),
        params=dict(params),
        requested_repeats=repeats,
    )


def _round_figures(
    plan: OpenLoopPlan, rate: float, rounds: list[OpenLoopRound], common: dict[str, Any]
) -> list[Figure]:
    per_metric: dict[str, list[float]] = {}
    for one in rounds:
        values = load_figures(one.samples, rate, plan.slo, one.scheduled_ns).as_dict()
        for name, value in values.items():
            per_metric.setdefault(name, []).append(value)
    params = {
        **common,
        "rate_rps": rate,
        "client_bound": any(one.client_bound for one in rounds),
        "client_bound_rule": f"send lag p99 above {CLIENT_BOUND_LAG_MS:g} ms, or (kernel stamps) the client's "
        "receive window closed",
        "timestamps": sorted({one.timestamps for one in rounds}),
        "timestamps_reason": next((one.timestamps_reason for one in rounds if one.timestamps_reason), None),
        "client_lag": [one.client_lag for one in rounds],
        "client_bound_reasons": [reason for one in rounds for reason in one.throttled],
    }
    point = _point(rate)
    return [
        _figure(KIND_OPEN_LOOP, point, name, values, params, len(rounds))
        for name, values in per_metric.items()
        if len(values) == len(rounds)  # a percentile no round could give (TPOT of 1-token outputs) is absent
    ]


async def measure_open_loop(ctx: MeasureContext, plan: OpenLoopPlan, repeats: int) -> Measurement:
    """Every rate of the plan, `repeats` rounds each (seeds seed, seed+1, ...); then the rate sweep if asked."""
    common: dict[str, Any] = {
        "process": plan.process,
        "requests": plan.requests,
        "burst_size": plan.burst_size,
        "seed": plan.seed,
        "prompt_tokens": plan.prompt_tokens,
        "output_tokens": plan.output_tokens,
        "workload": plan.workload,
        "api": ctx.plan.api,
        "slo": plan.slo.model_dump(mode="json"),
        "goodput": "requests meeting every SLO goal, TTFT and E2E from the scheduled send, per second of the "
        "window (first scheduled send to last token); goodput_from_send_rps judges them from the actual send",
        "latency_from": "ttft_ms and e2e_ms from the actual send; *_from_schedule_ms from the scheduled send",
        "unique_prefix": True,
    }
    figures: list[Figure] = []
    samples: dict[str, list[list[RequestSample]]] = {}
    for rate in plan.rates_rps:
        rounds = []
        for repeat in range(repeats):
            rounds.append(await run_round(ctx, plan, rate, plan.seed + repeat))
            ctx.on_step(f"open loop {rate:g} req/s: repeat {repeat + 1} of {repeats}")
        figures += _round_figures(plan, rate, rounds, common)
        samples[f"{KIND_OPEN_LOOP}/{_point(rate)}"] = [one.samples for one in rounds]
    if plan.find_max_rate is not None:
        result, searched = await _search(ctx, plan, plan.find_max_rate)
        figures += searched
        if result.low_rps is not None:
            params = {
                **common,
                "search": plan.find_max_rate.model_dump(mode="json"),
                "high_rps": result.high_rps,
                "converged": result.converged,
                "points": [point.__dict__ for point in result.points],
                "meaning": "the highest rate measured whose good fraction met slo.min_good_fraction; "
                "the truth lies in [value, high_rps)",
            }
            figures.append(_figure(KIND_RATE_SWEEP, "max", "max_rate_rps", [result.low_rps], params, 1))
    return Measurement(figures=tuple(figures), samples=samples)


async def _search(ctx: MeasureContext, plan: OpenLoopPlan, search: RateSearch) -> tuple[RateSearchResult, list[Figure]]:
    figures: list[Figure] = []
    common = {
        "process": plan.process,
        "requests": plan.requests,
        "seed": plan.seed,
        "search_point": True,
        "slo": plan.slo.model_dump(mode="json"),
    }

    async def measure(rate: float) -> RatePoint:
        one = await run_round(ctx, plan, rate, plan.seed)
        ctx.on_step(f"rate sweep: {rate:.4g} req/s")
        answered = any(s.ok for s in one.samples)
        figured = load_figures(one.samples, rate, plan.slo, one.scheduled_ns) if answered else None
        good = figured.good_fraction if figured is not None else 0.0
        if figured is not None:
            figures.extend(
                _figure(f"{KIND_RATE_SWEEP}", _point(rate), name, [value], {**common, "rate_rps": rate}, 1)
                for name, value in figured.as_dict().items()
            )
        return RatePoint(rate, good, good >= plan.slo.min_good_fraction)

    return await find_max_rate(measure, search), figures
