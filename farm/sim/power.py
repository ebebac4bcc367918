"""The simulator's power model and its exact energy meter (no I/O; the clock is handed in).

Each simulated card draws, with p requests in prefill and d streams decoding:
    P = min(limit, max(idle, prefill if p > 0, decode + per_stream * (d - 1) if d > 0))
the same on every card (tensor parallel splits the work evenly). The power changes only when a request starts
prefill, starts decoding or ends, so between those events it is constant and the meter's energy is exact:
its timeline of (time, energy so far, power since) is the truth the farm's measured energy is checked against
(`energy_between`), and its running counter is what `/sim/gpu` reports, as NVML's total-energy counter does.
"""

from __future__ import annotations

import bisect
from array import array

NS_PER_S = 1_000_000_000
MAX_TIMELINE = 1_000_000
"""Change points kept (three per request); the oldest half is dropped past it, and truth before it is unknown."""


def card_power_w(
    *,
    idle_w: float,
    prefill_w: float,
    decode_w: float,
    per_stream_w: float,
    limit_w: float,
    prefilling: int,
    decoding: int,
) -> float:
    """One card's power with `prefilling` requests in prefill and `decoding` streams decoding (see above)."""
    watts = idle_w
    if prefilling > 0:
        watts = max(watts, prefill_w)
    if decoding > 0:
        watts = max(watts, decode_w + per_stream_w * (decoding - 1))
    return min(limit_w, watts)


class EnergyMeter:
    """Energy of one card (all cards draw alike) as an exact integral of a piecewise-constant power."""

    def __init__(self, watts: float, start_ns: int) -> None:
        self.watts = watts
        self._since_ns = start_ns
        self._joules = 0.0
        self._t = array("q", [start_ns])
        self._e = array("d", [0.0])
        self._w = array("d", [watts])

    def set_power(self, now_ns: int, watts: float) -> None:
        """The power is `watts` from `now_ns` on (a time before the last change counts as that change's)."""
        if watts == self.watts:
            return
        now_ns = max(now_ns, self._since_ns)
        self._joules += self.watts * (now_ns - self._since_ns) / NS_PER_S
        self._since_ns = now_ns
        self.watts = watts
        if len(self._t) >= MAX_TIMELINE:
            half = MAX_TIMELINE // 2
            self._t, self._e, self._w = self._t[half:], self._e[half:], self._w[half:]
        self._t.append(now_ns)
        self._e.append(self._joules)
        self._w.append(watts)

    def energy_j(self, now_ns: int) -> float:
        """Energy since the meter started, at `now_ns` (not before the last change)."""
        return self._joules + self.watts * (max(now_ns, self._since_ns) - self._since_ns) / NS_PER_S

    def energy_at(self, t_ns: int) -> float | None:
        """Energy at any time the timeline still covers (None before it)."""
        index = bisect.bisect_right(self._t, t_ns) - 1
        if index < 0:
            return None
        return self._e[index] + self._w[index] * (t_ns - self._t[index]) / NS_PER_S

    def energy_between(self, start_ns: int, end_ns: int) -> float | None:
        """The exact energy of one card over [start_ns, end_ns]; None where the timeline does not reach back."""
        start, end = self.energy_at(start_ns), self.energy_at(end_ns)
        if start is None or end is None:
            return None
        return end - start
