"""Open-loop load math (farm.bench.load): arrival schedules, SLO judgement, goodput, and the rate bisection."""

from __future__ import annotations

import asyncio
import itertools
import statistics

import pytest
from pydantic import ValidationError

from farm.bench.load import (
    SLO,
    OpenLoopPlan,
    RatePoint,
    RateSearch,
    arrival_offsets_s,
    find_max_rate,
    load_figures,
    meets_slo,
)
from farm.bench.records import RequestSample

MS = 1_000_000


def sample(start_ms: float, first_ms: float, last_ms: float, tokens: int, error: str | None = None) -> RequestSample:
    return RequestSample(
        started_ns=int(start_ms * MS),
        first_token_ns=int(first_ms * MS),
        last_token_ns=int(last_ms * MS),
        prompt_tokens=10,
        completion_tokens=tokens,
        error=error,
    )


def test_constant_arrivals_are_evenly_spaced() -> None:
    """A constant process at 4 req/s sends at 0, 0.25, 0.5, 0.75 s."""
    assert arrival_offsets_s("constant", 4.0, 4) == pytest.approx([0.0, 0.25, 0.5, 0.75])


def test_bursts_keep_the_mean_rate() -> None:
    """Bursts of 3 at 6 req/s arrive together every 0.5 s; the last burst is cut to the count."""
    assert arrival_offsets_s("constant", 6.0, 7, burst_size=3) == pytest.approx([0, 0, 0, 0.5, 0.5, 0.5, 1.0])


def test_poisson_arrivals_are_seeded_and_have_the_asked_mean_gap() -> None:
    """The same seed gives the same schedule, another seed another; the mean gap is 1/rate within 5% over 20k."""
    first = arrival_offsets_s("poisson", 50.0, 20_000, seed=3)
    assert first == arrival_offsets_s("poisson", 50.0, 20_000, seed=3)
    assert first[:50] != arrival_offsets_s("poisson", 50.0, 50, seed=4)
    gaps = [b - a for a, b in itertools.pairwise(first)]
    assert statistics.fmean(gaps) == pytest.approx(1 / 50.0, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 50.0, rel=0.05)  # exponential: stdev = mean


@pytest.mark.parametrize(
    ("slo", "record", "good"),
    [
        (SLO(ttft_ms=100), sample(0, 100, 500, 5), True),
        (SLO(ttft_ms=100), sample(0, 101, 500, 5), False),
        (SLO(e2e_ms=400), sample(0, 50, 450, 5), False),
        (SLO(tpot_ms=100), sample(0, 50, 450, 5), True),  # (450 - 50) / 4 = 100 ms
        (SLO(tpot_ms=99), sample(0, 50, 450, 5), False),
        (SLO(tpot_ms=1), sample(0, 50, 50, 1), True),  # one token: no TPOT to judge
        (SLO(ttft_ms=1000), sample(0, 50, 450, 5, error="HTTP 500"), False),
    ],
)
def test_meets_slo(slo: SLO, record: RequestSample, good: bool) -> None:
    """Each goal is a per-request threshold; a failed request is never good."""
    assert meets_slo(record, slo) is good


def test_load_figures_by_hand() -> None:
    """Three requests over 1 s, one too slow and one failed: goodput 1 req/s, good fraction 1/3, 2 completed."""
    samples = [
        sample(0, 50, 500, 10),
        sample(100, 400, 1000, 10),
        sample(200, 300, 300, 0, error="timeout"),
    ]
    figures = load_figures(samples, offered_rps=3.0, slo=SLO(ttft_ms=100))
    assert figures.window_s == pytest.approx(1.0)
    assert figures.achieved_rps == pytest.approx(2.0)
    assert figures.throughput_tok_s == pytest.approx(20.0)
    assert figures.goodput_rps == pytest.approx(1.0)
    assert figures.good_fraction == pytest.approx(1 / 3)
    assert figures.failed == 1
    assert figures.latency_ms["ttft_ms_p50"] == pytest.approx(175.0)


@pytest.mark.parametrize("truth", [7.3, 42.0, 99.0])
def test_bisection_brackets_the_threshold_within_the_precision(truth: float) -> None:
    """Against a server that passes exactly below `truth`, the answer lies in [lo, hi) with hi/lo - 1 <= 2%."""

    async def measure(rate: float) -> RatePoint:
        return RatePoint(rate, 1.0 if rate < truth else 0.5, rate < truth)

    result = asyncio.run(find_max_rate(measure, RateSearch(low_rps=1.0, high_rps=200.0, precision=0.02)))
    assert result.converged
    assert result.low_rps is not None
    assert result.high_rps is not None
    assert result.low_rps < truth <= result.high_rps
    assert result.high_rps / result.low_rps - 1 <= 0.02


def test_bisection_reports_when_even_the_lowest_rate_fails() -> None:
    """No passing rate: low is None and the search stops after one point."""

    async def measure(rate: float) -> RatePoint:
        return RatePoint(rate, 0.0, False)

    result = asyncio.run(find_max_rate(measure, RateSearch(low_rps=1.0, high_rps=2.0)))
    assert result.low_rps is None
    assert len(result.points) == 1


def test_plan_refuses_a_search_without_goals_and_a_plan_without_rates() -> None:
    """find_max_rate needs at least one SLO goal; an open-loop section must measure something."""
    with pytest.raises(ValidationError, match="needs an SLO"):
        OpenLoopPlan(find_max_rate=RateSearch(low_rps=1, high_rps=2))
    with pytest.raises(ValidationError, match="measures nothing"):
        OpenLoopPlan()
    with pytest.raises(ValidationError, match="must be above low_rps"):
        RateSearch(low_rps=3, high_rps=2)


def test_planned_steps_count_open_loop_rates_and_the_search() -> None:
    """Progress counts each open-loop rate per repeat, and the rate sweep by its most points."""
    from farm.bench.runner import planned_steps
    from farm.recipes.sweep import SweepPlan

    plan = SweepPlan(repeats=2)
    rates = OpenLoopPlan(rates_rps=(1.0, 2.0, 4.0))
    assert planned_steps(plan) == 0
    assert planned_steps(plan, rates) == 3 * 2
    search = OpenLoopPlan(slo=SLO(ttft_ms=100), find_max_rate=RateSearch(low_rps=1, high_rps=9, max_points=10))
    assert planned_steps(plan, search) == 10
