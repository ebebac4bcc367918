"""Energy and power over measurement windows, and what they cost (pure: telemetry samples and windows in, figures out).

Every card's telemetry is a series of `EnergySample`s stamped on the client's clock (`time.perf_counter_ns`, the
clock of the request samples). A window is one repeat of one measurement: from the first request's start to the
last token of its last request (`window_of`); the model load and the gaps between measurements are never in one.

One card over one window (`card_window_energy`):
- with the card's cumulative energy counter (NVML's total-energy counter, amdsmi's energy accumulator, the
  simulator's), energy = counter(end) - counter(start): exact for the energy between readings, the only error is
  at the two edges. There the counter is carried from the reading nearer the edge at that reading's own power
  (kept between the two readings' counts), so a step of power inside the edge's interval (the engine idle until
  the first request arrives, idle again after the last token) costs only the step times the distance to that
  reading; the worker takes a reading at each edge (farm.worker.energy), so that distance is a read's time.
  Without power readings the edge is linearly interpolated between the two readings around it;
- else the power samples, integrated by the trapezoid rule, the power at each edge interpolated likewise.
The figure is absent, with its reason, when the telemetry does not cover the window, when two readings that
bound part of the window lie more than `MAX_GAP_S` apart (InferenceX's rule: a gap over 3 s invalidates a
device), when the counter goes backwards (a reset or a wrap: the energy across it is unknown), or when fewer than
`MIN_SAMPLES_IN_WINDOW` readings fall inside the window (too short for the sampling to resolve).

Every figure here is GPU-only: the cards' own board power, not the CPU, memory, fans or the power supply.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NS_PER_S = 1_000_000_000
MAX_GAP_S = 3.0
"""Two readings further apart than this leave the energy between them unknown (InferenceX invalidates a device
on a telemetry gap over 3 s)."""
MIN_SAMPLES_IN_WINDOW = 5
"""A window must hold at least this many readings inside it (a quarter of a second at the worker's 50 ms): a
shorter one, such as a single short-prompt TTFT request of 60 ms, is mostly interpolation, not measurement."""
SECONDS_PER_HOUR = 3600.0
J_PER_KWH = 3_600_000.0
TOKENS_PER_MILLION = 1_000_000

SOURCE_COUNTER = "energy counter"
SOURCE_POWER = "power samples (trapezoid)"
GPU_ONLY = "GPU only: the cards' board power, not the CPU, memory, fans or power supply"


@dataclass(frozen=True, slots=True)
class EnergySample:
    """One reading of one card: when (ns, the client's perf_counter clock), its cumulative energy counter (mJ) and
    its power (mW); either may be None where the card does not report it."""

    t_ns: int
    energy_mj: float | None = None
    power_mw: float | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """One repeat of one measurement: its span on the client's clock and the tokens it moved (from `usage`)."""

    start_ns: int
    end_ns: int
    output_tokens: int
    prompt_tokens: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S

    @property
    def total_tokens(self) -> int:
        return self.output_tokens + self.prompt_tokens


@dataclass(frozen=True, slots=True)
class CardEnergy:
    """One card over one window: energy (J), average power (W), the highest power seen (W) and how it was read."""

    energy_j: float
    avg_power_w: float
    peak_power_w: float
    source: str


@dataclass(frozen=True, slots=True)
class Unmeasured:
    """Why a card's (or a window's) energy is absent."""

    reason: str


@dataclass(frozen=True, slots=True)
class Prices:
    """What a host costs: per hour of use (hardware amortised, or rental) and per kWh of electricity. Either may
    be unset; `currency` names the unit of both."""

    cost_per_hour: float | None = None
    electricity_per_kwh: float | None = None
    currency: str = "USD"

    @property
    def stated(self) -> bool:
        return self.cost_per_hour is not None or self.electricity_per_kwh is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "cost_per_hour": self.cost_per_hour,
            "electricity_per_kwh": self.electricity_per_kwh,
            "currency": self.currency,
        }


def window_of(requests: Sequence[Mapping[str, Any]]) -> Window | None:
    """The window of one repeat from its request samples (`RequestSample.to_json()`): first start to the latest
    stamp any request has (its last token, else its first, else its start); tokens summed from `usage`. None for
    a repeat without requests."""
    if not requests:
        return None
    start = min(int(r["started_ns"]) for r in requests)
    end = max(int(r.get("last_token_ns") or r.get("first_token_ns") or r["started_ns"]) for r in requests)
    output = sum(int(r.get("completion_tokens") or 0) for r in requests)
    prompt = sum(int(r.get("prompt_tokens") or 0) for r in requests)
    return Window(start_ns=start, end_ns=end, output_tokens=output, prompt_tokens=prompt)


def _time(sample: EnergySample) -> int:
    return sample.t_ns


def _interpolate(t0: int, v0: float, t1: int, v1: float, t: int) -> float:
    if t1 == t0:
        return v1
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def card_window_energy(
    samples: Sequence[EnergySample],
    start_ns: int,
    end_ns: int,
    *,
    max_gap_s: float = MAX_GAP_S,
    min_inside: int = MIN_SAMPLES_IN_WINDOW,
) -> CardEnergy | Unmeasured:
    """One card's energy over [start_ns, end_ns] from its readings, which must be in time order (the sampler's
    `series` is); see the module docstring."""
    if end_ns <= start_ns:
        return Unmeasured("the window is empty")
    if not samples:
        return Unmeasured("no telemetry")
    first_after = bisect.bisect_left(samples, end_ns, key=_time)
    last_before = bisect.bisect_right(samples, start_ns, key=_time) - 1
    if last_before < 0 or first_after >= len(samples):
        return Unmeasured("the telemetry does not cover the window (no reading before its start or after its end)")
    span = samples[last_before : first_after + 1]
    inside = sum(1 for s in span if start_ns < s.t_ns < end_ns)
    if inside < min_inside:
        return Unmeasured(
            f"the window ({(end_ns - start_ns) / NS_PER_S:.3f} s) holds {inside} telemetry reading(s), fewer than "
            f"{min_inside}: too short to measure"
        )
    for a, b in itertools.pairwise(span):
        gap_s = (b.t_ns - a.t_ns) / NS_PER_S
        if gap_s > max_gap_s:
            return Unmeasured(f"a gap of {gap_s:.2f} s in the telemetry (over {max_gap_s:g} s)")
    duration_s = (end_ns - start_ns) / NS_PER_S
    powered = all(s.power_mw is not None for s in span)
    if all(s.energy_mj is not None for s in span):
        return _from_counter(span, start_ns, end_ns, duration_s, powered)
    if powered:
        return _from_power(span, start_ns, end_ns, duration_s)
    return Unmeasured("neither an energy counter nor power readings throughout the window")


def _from_counter(
    span: Sequence[EnergySample], start_ns: int, end_ns: int, duration_s: float, powered: bool
) -> CardEnergy | Unmeasured:
    for a, b in itertools.pairwise(span):
        assert a.energy_mj is not None
        assert b.energy_mj is not None
        if b.energy_mj < a.energy_mj:
            return Unmeasured(
                f"the energy counter went backwards ({a.energy_mj:g} to {b.energy_mj:g} mJ): reset or wrapped"
            )
    at_start = _counter_at(span[0], span[1], start_ns)
    at_end = _counter_at(span[-2], span[-1], end_ns)
    energy_j = (at_end - at_start) / 1000
    if powered:
        peak_w = _peak_power_w(span, start_ns, end_ns)
    else:  # the counter's own slope between readings, over the intervals that overlap the window
        slopes = []
        for a, b in itertools.pairwise(span):
            assert a.energy_mj is not None
            assert b.energy_mj is not None
            if b.t_ns > a.t_ns:
                slopes.append((b.energy_mj - a.energy_mj) / 1000 / ((b.t_ns - a.t_ns) / NS_PER_S))
        peak_w = max(slopes, default=energy_j / duration_s)
    return CardEnergy(energy_j=energy_j, avg_power_w=energy_j / duration_s, peak_power_w=peak_w, source=SOURCE_COUNTER)


def _counter_at(a: EnergySample, b: EnergySample, t_ns: int) -> float:
    """The counter at `t_ns` between readings `a` and `b`: from the nearer one at its own power when both have
    power (clamped between their counts), else linearly interpolated."""
    assert a.energy_mj is not None
    assert b.energy_mj is not None
    if a.power_mw is None or b.power_mw is None or b.t_ns <= a.t_ns:
        return _interpolate(a.t_ns, a.energy_mj, b.t_ns, b.energy_mj, t_ns)
    if t_ns - a.t_ns <= b.t_ns - t_ns:
        value = a.energy_mj + a.power_mw * (t_ns - a.t_ns) / NS_PER_S  # mW x s = mJ
    else:
        value = b.energy_mj - b.power_mw * (b.t_ns - t_ns) / NS_PER_S
    return min(max(value, a.energy_mj), b.energy_mj)


def _edge_powers(span: Sequence[EnergySample], start_ns: int, end_ns: int) -> list[tuple[int, float]]:
    """(t, W) at the window's start, every reading inside it, and its end (edges interpolated)."""
    first, second, last, penultimate = span[0], span[1], span[-1], span[-2]
    assert first.power_mw is not None
    assert second.power_mw is not None
    assert last.power_mw is not None
    assert penultimate.power_mw is not None
    points = [(start_ns, _interpolate(first.t_ns, first.power_mw, second.t_ns, second.power_mw, start_ns) / 1000)]
    for s in span:
        if start_ns < s.t_ns < end_ns:
            assert s.power_mw is not None
            points.append((s.t_ns, s.power_mw / 1000))
    points.append(
        (end_ns, _interpolate(penultimate.t_ns, penultimate.power_mw, last.t_ns, last.power_mw, end_ns) / 1000)
    )
    return points


def _peak_power_w(span: Sequence[EnergySample], start_ns: int, end_ns: int) -> float:
    return max(watts for _, watts in _edge_powers(span, start_ns, end_ns))


def _from_power(span: Sequence[EnergySample], start_ns: int, end_ns: int, duration_s: float) -> CardEnergy:
    points = _edge_powers(span, start_ns, end_ns)
    energy_j = math.fsum((w0 + w1) / 2 * (t1 - t0) / NS_PER_S for (t0, w0), (t1, w1) in itertools.pairwise(points))
    return CardEnergy(
        energy_j=energy_j,
        avg_power_w=energy_j / duration_s,
        peak_power_w=max(watts for _, watts in points),
        source=SOURCE_POWER,
    )


@dataclass(frozen=True, slots=True)
class WindowEnergy:
    """Every card over one window, and the window's figures: energy summed over the cards."""

    window: Window
    cards: tuple[CardEnergy, ...]

    @property
    def energy_j(self) -> float:
        return math.fsum(card.energy_j for card in self.cards)

    @property
    def avg_power_w(self) -> float:
        return self.energy_j / self.window.duration_s

    def joules_per_output_token(self) -> float | None:
        return self.energy_j / self.window.output_tokens if self.window.output_tokens else None

    def joules_per_total_token(self) -> float | None:
        return self.energy_j / self.window.total_tokens if self.window.total_tokens else None

    def output_tokens_per_joule(self) -> float | None:
        return self.window.output_tokens / self.energy_j if self.energy_j > 0 else None


def window_energy(series: Sequence[Sequence[EnergySample]], window: Window) -> WindowEnergy | Unmeasured:
    """Every card's energy over one window; absent (with the first card's reason) when any card's is, since a
    total missing a card would undercount."""
    if not series:
        return Unmeasured("no card reports energy or power")
    cards = []
    for index, samples in enumerate(series):
        card = card_window_energy(samples, window.start_ns, window.end_ns)
        if isinstance(card, Unmeasured):
            return Unmeasured(f"gpu{index}: {card.reason}")
        cards.append(card)
    return WindowEnergy(window=window, cards=tuple(cards))


def cost_per_million(prices: Prices, energy_j: float, duration_s: float, tokens: int) -> float | None:
    """What a million tokens cost at these prices: the host's hourly cost over the window's duration plus the
    electricity of the cards' energy (GPU-only), per token, times a million. None without prices or tokens."""
    if not prices.stated or tokens <= 0:
        return None
    cost = 0.0
    if prices.cost_per_hour is not None:
        cost += prices.cost_per_hour * duration_s / SECONDS_PER_HOUR
    if prices.electricity_per_kwh is not None:
        cost += prices.electricity_per_kwh * energy_j / J_PER_KWH
    return cost / tokens * TOKENS_PER_MILLION
