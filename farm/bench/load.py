"""Open-loop load as pure functions: arrival schedules, goodput under SLOs, and the bisection of the highest rate.

No I/O here (the timed path is `farm.bench.openloop`).

Arrivals. A `constant` process sends one request every 1/rate seconds; a `poisson` process draws the gaps
from an exponential distribution of mean 1/rate with a seeded `random.Random`, so the same seed gives the same
schedule. With `burst_size` b > 1, requests come b at a time, the bursts at rate/b, so the mean request rate
stays `rate`.

Goodput (as vLLM's `--goodput`): a request is good when it succeeded and meets every SLO given (TTFT, TPOT,
E2E, each a per-request threshold in milliseconds); goodput is good requests per second of the measured
window (the first send to the last finish).

Time from the schedule: a client that falls behind its schedule sends late, and latency timed from the actual
send hides that wait, which a user arriving on schedule still has. Given each request's scheduled send time,
TTFT and E2E are also figured from it (`ttft_from_schedule_ms_*`, `e2e_from_schedule_ms_*`), goodput is judged
on those, and the client's lag (actual minus scheduled send) is figured per round (`send_lag_ms_*`).

The rate sweep: the highest rate whose good fraction is at least `min_good_fraction`, by bisection between a
rate that passes and one that fails, until hi/lo - 1 <= precision. The answer is the last passing rate `lo`;
the truth lies in [lo, hi).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from farm.bench import metrics
from farm.bench.records import RequestSample
from farm.errors import MeasurementError

ArrivalProcess = Literal["constant", "poisson"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SLO(_Section):
    """Per-request latency goals; a goal left out is not judged."""

    ttft_ms: float | None = Field(None, gt=0, description="time to first token")
    tpot_ms: float | None = Field(None, gt=0, description="time per output token after the first")
    e2e_ms: float | None = Field(None, gt=0, description="request start to last token")
    min_good_fraction: float = Field(
        0.99, gt=0, le=1, description="a rate meets the SLOs when at least this fraction of its requests do"
    )

    @property
    def any_goal(self) -> bool:
        return any(goal is not None for goal in (self.ttft_ms, self.tpot_ms, self.e2e_ms))


class RateSearch(_Section):
    """Where to look for the highest rate that meets the SLOs, and how closely."""

    low_rps: float = Field(gt=0, description="a rate expected to pass (checked first)")
    high_rps: float = Field(gt=0, description="a rate expected to fail (checked second)")
    precision: float = Field(0.02, gt=0, lt=1, description="stop when high/low - 1 is at most this")
    max_points: int = Field(20, ge=2, le=100, description="rates measured at most")

    @model_validator(mode="after")
    def _ordered(self) -> RateSearch:
        if self.high_rps <= self.low_rps:
            raise ValueError(f"high_rps ({self.high_rps:g}) must be above low_rps ({self.low_rps:g})")
        return self


class OpenLoopPlan(_Section):
    """The `[open_loop]` section of a `farm bench` spec: requests that arrive at a rate, not a fixed concurrency.

    Each rate in `rates_rps` is measured `repeats` times (seeds `seed`, `seed + 1`, ...); with `find_max_rate`
    the rate sweep runs too, and needs an SLO with at least one goal.
    """

    process: ArrivalProcess = "poisson"
    rates_rps: tuple[float, ...] = Field((), description="request rates to measure, requests per second")
    requests: int = Field(100, ge=1, le=100_000, description="requests sent at each rate")
    seed: int = 0
    burst_size: int = Field(1, ge=1, description="requests that arrive together")
    prompt_tokens: int = Field(256, ge=1)
    output_tokens: int = Field(128, ge=1)
    workload: Literal["code", "prose", "math"] = "code"
    max_in_flight: int = Field(4096, ge=1, description="connections open at once (the client's own limit)")
    slo: SLO = SLO()
    find_max_rate: RateSearch | None = None

    @model_validator(mode="after")
    def _goals_for_search(self) -> OpenLoopPlan:
        if self.find_max_rate is not None and not self.slo.any_goal:
            raise ValueError("find_max_rate needs an SLO: set slo.ttft_ms, slo.tpot_ms or slo.e2e_ms")
        if not self.rates_rps and self.find_max_rate is None:
            raise ValueError("measures nothing: give rates_rps or find_max_rate")
        if any(rate <= 0 for rate in self.rates_rps):
            raise ValueError("every rate in rates_rps must be above 0")
        return self


def arrival_offsets_s(
    process: ArrivalProcess, rate_rps: float, count: int, *, seed: int = 0, burst_size: int = 1
) -> list[float]:
    """When each of `count` requests is sent, in seconds after the first; bursts of `burst_size` at once."""
    if rate_rps <= 0:
        raise ValueError(f"the rate must be above 0, not {rate_rps}")
    if count < 0 or burst_size < 1:
        raise ValueError("count must be >= 0 and burst_size >= 1")
    burst_rate = rate_rps / burst_size
    rng = random.Random(seed)
    offsets: list[float] = []
    now = 0.0
    while len(offsets) < count:
        offsets.extend([now] * min(burst_size, count - len(offsets)))
        now += 1.0 / burst_rate if process == "constant" else rng.expovariate(burst_rate)
    return offsets


def ttft_from_schedule_s(sample: RequestSample, scheduled_ns: int) -> float:
    """First token minus the scheduled send (never less than from the actual send: a send is never early)."""
    first = sample.first_token_ns if sample.first_token_ns is not None else sample.started_ns
    return max(first - min(scheduled_ns, sample.started_ns), 0) / metrics.NS_PER_S


def e2e_from_schedule_s(sample: RequestSample, scheduled_ns: int) -> float:
    """Last token minus the scheduled send."""
    last = sample.last_token_ns if sample.last_token_ns is not None else sample.started_ns
    return max(last - min(scheduled_ns, sample.started_ns), 0) / metrics.NS_PER_S


def send_lag_s(sample: RequestSample, scheduled_ns: int) -> float:
    """How late the client sent the request: actual send minus scheduled, 0 when on time."""
    return max(sample.started_ns - scheduled_ns, 0) / metrics.NS_PER_S


def meets_slo(sample: RequestSample, slo: SLO, scheduled_ns: int | None = None) -> bool:
    """Whether one request succeeded and met every goal of `slo` (TPOT is judged only with 2 tokens or more);
    with `scheduled_ns`, TTFT and E2E are judged from the scheduled send, as a user on schedule waits."""
    if not sample.ok:
        return False
    ttft = metrics.ttft_s(sample) if scheduled_ns is None else ttft_from_schedule_s(sample, scheduled_ns)
    e2e = metrics.e2e_s(sample) if scheduled_ns is None else e2e_from_schedule_s(sample, scheduled_ns)
    if slo.ttft_ms is not None and ttft * metrics.MS_PER_S > slo.ttft_ms:
        return False
    if slo.e2e_ms is not None and e2e * metrics.MS_PER_S > slo.e2e_ms:
        return False
    return not (
        slo.tpot_ms is not None
        and (sample.completion_tokens or 0) >= 2
        and metrics.tpot_s(sample) * metrics.MS_PER_S > slo.tpot_ms
    )


@dataclass(frozen=True)
class LoadFigures:
    """One open-loop round: what was offered, what came back, and how much of it was good."""

    offered_rps: float
    achieved_rps: float
    throughput_tok_s: float
    goodput_rps: float
    good_fraction: float
    failed: int
    window_s: float
    latency_ms: dict[str, float]

    def as_dict(self) -> dict[str, float]:
        return {
            "offered_rps": self.offered_rps,
            "achieved_rps": self.achieved_rps,
            "throughput_tok_s": self.throughput_tok_s,
            "goodput_rps": self.goodput_rps,
            "good_fraction": self.good_fraction,
            "failed_requests": float(self.failed),
            **self.latency_ms,
        }


LATENCY_PERCENTILES = (50, 90, 99)


def load_figures(
    samples: Sequence[RequestSample], offered_rps: float, slo: SLO, scheduled_ns: Sequence[int] | None = None
) -> LoadFigures:
    """The figures of one open-loop round; MeasurementError when every request failed.

    `scheduled_ns` (one per sample, the same clock) adds latency from the schedule and the client's send lag,
    and judges goodput from the schedule (the send-judged goodput stays, as `goodput_from_send_rps`).
    """
    ok = [sample for sample in samples if sample.ok]
    if not ok:
        errors = sorted({sample.error or "no content" for sample in samples})
        raise MeasurementError(f"every one of the {len(samples)} requests failed ({'; '.join(errors)[:300]})")
    if scheduled_ns is not None and len(scheduled_ns) != len(samples):
        raise ValueError(f"{len(scheduled_ns)} scheduled times for {len(samples)} samples")
    start = min(sample.started_ns for sample in samples)
    if scheduled_ns is not None:
        start = min(start, *scheduled_ns)
    end = max(sample.last_token_ns or sample.started_ns for sample in ok)
    window_s = max((end - start) / metrics.NS_PER_S, 1e-9)
    schedule = list(scheduled_ns) if scheduled_ns is not None else [None] * len(samples)
    good = sum(1 for sample, due in zip(samples, schedule, strict=True) if meets_slo(sample, slo, due))
    series = {
        "ttft_ms": [metrics.ttft_s(sample) * metrics.MS_PER_S for sample in ok],
        "tpot_ms": [metrics.tpot_s(sample) * metrics.MS_PER_S for sample in ok if (sample.completion_tokens or 0) >= 2],
        "e2e_ms": [metrics.e2e_s(sample) * metrics.MS_PER_S for sample in ok],
    }
    extra: dict[str, float] = {}
    if scheduled_ns is not None:
        timed = [(sample, due) for sample, due in zip(samples, scheduled_ns, strict=True) if sample.ok]
        series["ttft_from_schedule_ms"] = [ttft_from_schedule_s(s, due) * metrics.MS_PER_S for s, due in timed]
        series["e2e_from_schedule_ms"] = [e2e_from_schedule_s(s, due) * metrics.MS_PER_S for s, due in timed]
        lags = [send_lag_s(s, due) * metrics.MS_PER_S for s, due in zip(samples, scheduled_ns, strict=True)]
        series["send_lag_ms"] = lags
        extra["send_lag_ms_max"] = max(lags)
        extra["goodput_from_send_rps"] = sum(1 for sample in samples if meets_slo(sample, slo)) / window_s
    latency = {
        f"{name}_p{q}": metrics.percentile(values, q)
        for name, values in series.items()
        if values
        for q in LATENCY_PERCENTILES
    } | extra
    return LoadFigures(
        offered_rps=offered_rps,
        achieved_rps=len(ok) / window_s,
        throughput_tok_s=sum(sample.completion_tokens or 0 for sample in ok) / window_s,
        goodput_rps=good / window_s,
        good_fraction=good / len(samples),
        failed=len(samples) - len(ok),
        window_s=window_s,
        latency_ms=latency,
    )


@dataclass(frozen=True)
class RatePoint:
    """One rate the search measured and whether it met the SLOs."""

    rate_rps: float
    good_fraction: float
    passed: bool


@dataclass(frozen=True)
class RateSearchResult:
    """The highest passing rate found (`low_rps`; None when even the lowest failed) and the first failing
    rate above it (`high_rps`; None when even the highest passed); every point in the order measured."""

    low_rps: float | None
    high_rps: float | None
    precision: float
    points: tuple[RatePoint, ...]

    @property
    def converged(self) -> bool:
        return (
            self.low_rps is not None
            and self.high_rps is not None
            and self.high_rps / self.low_rps - 1 <= self.precision
        )


async def find_max_rate(measure: Callable[[float], Awaitable[RatePoint]], search: RateSearch) -> RateSearchResult:
    """Bisect (geometric midpoint) between a passing and a failing rate until hi/lo - 1 <= precision."""
    points: list[RatePoint] = []

    async def probe(rate: float) -> bool:
        point = await measure(rate)
        points.append(point)
        return point.passed

    low, high = search.low_rps, search.high_rps
    if not await probe(low):
        return RateSearchResult(None, low, search.precision, tuple(points))
    if await probe(high):
        return RateSearchResult(high, None, search.precision, tuple(points))
    while high / low - 1 > search.precision and len(points) < search.max_points:
        middle = (low * high) ** 0.5
        if await probe(middle):
            low = middle
        else:
            high = middle
    return RateSearchResult(low, high, search.precision, tuple(points))
