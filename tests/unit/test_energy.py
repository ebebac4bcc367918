"""Energy over a window from a card's readings: the counter, the trapezoid, the edges, gaps, resets, costs.

Every expected value is worked out by hand in the comment beside its case (times in seconds, S = 1e9 ns).
"""

from __future__ import annotations

from typing import Any

import pytest

from farm.bench.energy import (
    MAX_GAP_S,
    SOURCE_COUNTER,
    SOURCE_POWER,
    CardEnergy,
    EnergySample,
    Prices,
    Unmeasured,
    Window,
    card_window_energy,
    cost_per_million,
    window_energy,
    window_of,
)

S = 1_000_000_000


def counter(*points: tuple[float, float]) -> list[EnergySample]:
    """Readings of an energy counter: (t in s, mJ)."""
    return [EnergySample(t_ns=round(t * S), energy_mj=mj) for t, mj in points]


def power(*points: tuple[float, float]) -> list[EnergySample]:
    """Readings of power only: (t in s, mW)."""
    return [EnergySample(t_ns=round(t * S), power_mw=mw) for t, mw in points]


COUNTER_CASES = [
    # 100 W flat: 100 J/s. Readings every second, window [0.5, 4.5]: 4 s → 400 J, 100 W average.
    pytest.param(
        counter((0, 0), (1, 100_000), (2, 200_000), (3, 300_000), (4, 400_000), (5, 500_000)),
        0.5,
        4.5,
        400.0,
        100.0,
        id="flat-100W-edges-interpolated",
    ),
    # 0-2 s at 100 W (counter 0 → 200 J), 2-5 s at 300 W (→ 1100 J). Window [1.5, 4.5]:
    # start interpolates 1..2 at 0.5 → 150 J; end interpolates 4..5 (800..1100 J) at 0.5 → 950 J; 800 J over 3 s.
    pytest.param(
        counter((0, 0), (1, 100_000), (2, 200_000), (3, 500_000), (4, 800_000), (5, 1_100_000)),
        1.5,
        4.5,
        800.0,
        800.0 / 3,
        id="step-100-to-300W",
    ),
    # The window edges fall exactly on readings: the counter's difference, 600 - 100 = 500 J over 4 s.
    pytest.param(
        counter((0, 0), (1, 100_000), (2, 200_000), (3, 400_000), (4, 500_000), (5, 600_000), (6, 600_000)),
        1.0,
        5.0,
        500.0,
        125.0,
        id="edges-on-readings",
    ),
    # An offset counter (mJ since the driver loaded): only differences count. 50 W, 3 s → 150 J.
    pytest.param(
        counter(*((t, 9_000_000_000 + 50_000 * t) for t in range(0, 8))),
        2.0,
        5.0,
        150.0,
        50.0,
        id="large-offset",
    ),
]


@pytest.mark.parametrize(("samples", "start", "end", "joules", "watts"), COUNTER_CASES)
def test_energy_counter_over_a_window(
    samples: list[EnergySample], start: float, end: float, joules: float, watts: float
) -> None:
    """With a counter, the energy is the counter's difference at the window's edges, each interpolated between
    the readings around it."""
    got = card_window_energy(samples, round(start * S), round(end * S), min_inside=2)
    assert isinstance(got, CardEnergy)
    assert got.source == SOURCE_COUNTER
    assert got.energy_j == pytest.approx(joules, rel=1e-12)
    assert got.avg_power_w == pytest.approx(watts, rel=1e-12)


POWER_CASES = [
    # Flat 200 W: 200 W x 3 s = 600 J whatever the trapezoid.
    pytest.param(power(*((t, 200_000) for t in range(6))), 1.0, 4.0, 600.0, 200.0, id="flat-200W"),
    # A ramp 0 → 500 W over 0..5 s (100 W per s): window [1, 3] holds 100..300 W, area (100+300)/2 x 2 = 400 J.
    pytest.param(power(*((t, 100_000 * t) for t in range(6))), 1.0, 3.0, 400.0, 300.0, id="ramp-exact"),
    # A ramp with edges between readings: window [0.5, 4.5]: 50..450 W, area 250 x 4 = 1000 J; peak 450 W.
    pytest.param(power(*((t, 100_000 * t) for t in range(6))), 0.5, 4.5, 1000.0, 450.0, id="ramp-edges"),
    # Readings 100, 300, 100, 300, 100 W at 0..4 s; window [0, 4]: 4 trapezoids of 200 J = 800 J; peak 300 W.
    pytest.param(
        power((0, 100_000), (1, 300_000), (2, 100_000), (3, 300_000), (4, 100_000)),
        0.0,
        4.0,
        800.0,
        300.0,
        id="zigzag",
    ),
]


@pytest.mark.parametrize(("samples", "start", "end", "joules", "peak"), POWER_CASES)
def test_power_samples_integrated_by_trapezoid(
    samples: list[EnergySample], start: float, end: float, joules: float, peak: float
) -> None:
    """Without a counter, the power readings are integrated by the trapezoid rule, the edges interpolated."""
    got = card_window_energy(samples, round(start * S), round(end * S), min_inside=1)
    assert isinstance(got, CardEnergy)
    assert got.source == SOURCE_POWER
    assert got.energy_j == pytest.approx(joules, rel=1e-12)
    assert got.peak_power_w == pytest.approx(peak, rel=1e-12)
    assert got.avg_power_w == pytest.approx(joules / (end - start), rel=1e-12)


def test_the_counter_is_preferred_and_peak_comes_from_power() -> None:
    """With both, the energy comes from the counter (exact) and the peak from the power readings."""
    samples = [
        EnergySample(t_ns=t * S, energy_mj=100_000.0 * t, power_mw=mw)
        for t, mw in enumerate((90_000, 120_000, 95_000, 100_000, 100_000))
    ]
    got = card_window_energy(samples, 0, 4 * S, min_inside=2)
    assert isinstance(got, CardEnergy)
    assert (got.source, got.energy_j, got.peak_power_w) == (SOURCE_COUNTER, 400.0, 120.0)


def test_a_step_at_an_edge_is_carried_from_the_nearer_reading_at_its_power() -> None:
    """Power steps 100 → 500 W at 1.1 s and back to 100 W at 3.9 s, the window's own edges, between readings a
    second apart. From the nearer reading at its own power, both edges are exact: 110 J at the start (100 J + 100
    W x 0.1 s) and 1510 J at the end (1520 J - 100 W x 0.1 s): 1400 J. Linear interpolation would give 1328 J."""
    samples = [
        EnergySample(t_ns=0, energy_mj=0.0, power_mw=100_000.0),
        EnergySample(t_ns=1 * S, energy_mj=100_000.0, power_mw=100_000.0),
        EnergySample(t_ns=2 * S, energy_mj=560_000.0, power_mw=500_000.0),
        EnergySample(t_ns=3 * S, energy_mj=1_060_000.0, power_mw=500_000.0),
        EnergySample(t_ns=4 * S, energy_mj=1_520_000.0, power_mw=100_000.0),
    ]
    got = card_window_energy(samples, round(1.1 * S), round(3.9 * S), min_inside=2)
    assert isinstance(got, CardEnergy)
    assert got.energy_j == pytest.approx(1400.0, rel=1e-12)
    linear = card_window_energy(
        [EnergySample(t_ns=x.t_ns, energy_mj=x.energy_mj) for x in samples],
        round(1.1 * S),
        round(3.9 * S),
        min_inside=2,
    )
    assert isinstance(linear, CardEnergy)
    assert linear.energy_j == pytest.approx(1328.0, rel=1e-12)


def test_peak_from_the_counter_alone_is_its_steepest_interval() -> None:
    """A counter without power readings: the peak is the steepest interval (200 J in the second second)."""
    got = card_window_energy(
        counter((0, 0), (1, 100_000), (2, 300_000), (3, 400_000), (4, 500_000)), 0, 4 * S, min_inside=2
    )
    assert isinstance(got, CardEnergy)
    assert got.peak_power_w == pytest.approx(200.0)


ABSENT_CASES = [
    pytest.param(counter((0, 0), (1, 100_000)), 2.0, 1.0, "the window is empty", id="reversed-window"),
    pytest.param([], 0.0, 1.0, "no telemetry", id="no-readings"),
    pytest.param(counter((1, 0), (2, 1), (3, 2)), 0.5, 2.5, "does not cover", id="starts-before-telemetry"),
    pytest.param(counter((0, 0), (1, 1), (2, 2)), 0.5, 2.5, "does not cover", id="ends-after-telemetry"),
    # 0, 1, 2, then nothing until 5.5 s: 3.5 s between two readings that bound part of the window.
    pytest.param(
        counter((0, 0), (1, 1), (2, 2), (5.5, 5), (6, 6), (7, 7)), 0.5, 6.5, "a gap of 3.50 s", id="gap-over-3s"
    ),
    # The counter reset (driver reload) between 2 and 3 s.
    pytest.param(
        counter((0, 5_000), (1, 6_000), (2, 7_000), (3, 10), (4, 1_010), (5, 2_010)),
        0.5,
        4.5,
        "went backwards",
        id="counter-reset",
    ),
    # Only two readings inside a window that needs five.
    pytest.param(counter((0, 0), (1, 1), (2, 2), (3, 3)), 0.5, 2.5, "holds 2 telemetry reading(s)", id="too-short"),
    # A reading with neither counter nor power inside the window.
    pytest.param(
        [*counter((0, 0), (1, 1)), EnergySample(t_ns=2 * S), *counter((3, 3), (4, 4), (5, 5), (6, 6))],
        0.5,
        5.5,
        "neither an energy counter nor power",
        id="blind-reading",
    ),
]


@pytest.mark.parametrize(("samples", "start", "end", "reason"), ABSENT_CASES)
def test_unmeasurable_windows_say_why(samples: list[EnergySample], start: float, end: float, reason: str) -> None:
    """A window the telemetry cannot measure has no figure, only its reason."""
    got = card_window_energy(samples, round(start * S), round(end * S), min_inside=5 if "holds" in reason else 2)
    assert isinstance(got, Unmeasured)
    assert reason in got.reason


def test_a_gap_outside_the_window_does_not_count() -> None:
    """Only the readings that bound the window matter: a 10 s gap long before it changes nothing."""
    samples = counter((0, 0), (10, 1_000_000), (11, 1_100_000), (12, 1_200_000), (13, 1_300_000), (14, 1_400_000))
    got = card_window_energy(samples, round(11.5 * S), round(13.5 * S), min_inside=2)
    assert isinstance(got, CardEnergy)
    assert got.energy_j == pytest.approx(200.0)
    assert MAX_GAP_S == 3.0


def test_window_of_a_repeat() -> None:
    """A repeat's window runs from its first request's start to the latest stamp; tokens are summed."""
    requests: list[dict[str, Any]] = [
        {"started_ns": 10, "first_token_ns": 20, "last_token_ns": 50, "prompt_tokens": 7, "completion_tokens": 64},
        {"started_ns": 60, "first_token_ns": 70, "last_token_ns": 400, "prompt_tokens": 7, "completion_tokens": 896},
        {"started_ns": 55, "first_token_ns": None, "last_token_ns": None, "prompt_tokens": None, "error": "x"},
    ]
    assert window_of(requests) == Window(start_ns=10, end_ns=400, output_tokens=960, prompt_tokens=14)
    assert window_of([]) is None


def test_window_energy_sums_cards_and_needs_every_card() -> None:
    """The window's energy is the sum over its cards; one card that cannot be measured makes it absent."""
    good = counter(*((t, 100_000 * t) for t in range(8)))
    other = counter(*((t, 50_000 * t) for t in range(8)))
    window = Window(start_ns=1 * S, end_ns=7 * S, output_tokens=600, prompt_tokens=300)
    both = window_energy([good, other], window)
    assert not isinstance(both, Unmeasured)
    # 100 W + 50 W over 6 s = 900 J; 1.5 J per output token, 1.0 per total, 0.667 output tokens per J.
    assert both.energy_j == pytest.approx(900.0)
    assert both.avg_power_w == pytest.approx(150.0)
    assert both.joules_per_output_token() == pytest.approx(1.5)
    assert both.joules_per_total_token() == pytest.approx(1.0)
    assert both.output_tokens_per_joule() == pytest.approx(600 / 900)
    reset = counter(*((t, 100_000 * t) for t in range(4)), (4, 0), (5, 1), (6, 2), (7, 3))
    broken = window_energy([good, reset], window)
    assert isinstance(broken, Unmeasured)
    assert broken.reason.startswith("gpu1: the energy counter went backwards")


COST_CASES = [
    # $3.60 per hour over 10 s = $0.01; 1000 tokens → $10 per million.
    pytest.param(Prices(cost_per_hour=3.6), 0.0, 10.0, 1000, 10.0, id="hourly-only"),
    # 3.6 MJ = 1 kWh at $0.25 → $0.25 over 500,000 tokens → $0.50 per million.
    pytest.param(Prices(electricity_per_kwh=0.25), 3_600_000.0, 10.0, 500_000, 0.5, id="electricity-only"),
    # Both: $0.01 + 36 kJ (0.01 kWh) x $0.30 = $0.013 over 1000 tokens → $13 per million.
    pytest.param(Prices(cost_per_hour=3.6, electricity_per_kwh=0.3), 36_000.0, 10.0, 1000, 13.0, id="both"),
    pytest.param(Prices(), 36_000.0, 10.0, 1000, None, id="no-prices"),
    pytest.param(Prices(cost_per_hour=1.0), 36_000.0, 10.0, 0, None, id="no-tokens"),
]


@pytest.mark.parametrize(("prices", "joules", "seconds", "tokens", "expected"), COST_CASES)
def test_cost_per_million_tokens(
    prices: Prices, joules: float, seconds: float, tokens: int, expected: float | None
) -> None:
    """Cost per million tokens: the hourly cost over the window plus the electricity of its energy."""
    got = cost_per_million(prices, joules, seconds, tokens)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, rel=1e-12)
