"""Each card's energy counter and power, sampled in a thread while a sweep runs (the probe's `power()`).

Every reading is stamped on `time.perf_counter_ns`, the clock of the request samples, at the middle of the read
(a read through a tool or over HTTP takes time; its midpoint is the best estimate of when the card was read).
The model load is never sampled: the sampler starts once the engine serves. farm.bench.energy turns the series
into energy per measurement window.

Besides the periodic readings, `edge()` takes one as timed requests start and end (the sweep calls it:
`run_sweep(on_window_edge=...)`), so a window's edges lie within a read's time of a reading, and the linear
interpolation there does not smear a step of power (idle to prefill as the first request arrives, back to idle
after the last token) across a whole interval. It reads at once, in the caller's thread, where a read is quick
(NVML: microseconds; the simulator: a loopback request), before anything of the window is sent or after all of
it came back; a slow tool (rocm-smi takes a good part of a second) is only asked for a reading in the sampler's
own thread instead, so the sweep never waits on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from farm.bench.energy import EnergySample
from farm.hardware.probe import PowerSnapshot

ENERGY_SAMPLE_INTERVAL_S = 0.05
"""Readings every 50 ms: the counter's only error is the power's change inside the two intervals at a window's
edges (at most a quarter of the jump times the interval), under 1% for windows of a few seconds; NVML's reads
cost microseconds and the simulator's a loopback request."""
QUICK_READ_NS = 5_000_000
"""A read this fast (5 ms) is taken in the caller's thread at a window's edge; a slower one in the sampler's."""
MAX_SAMPLES = 2_000_000
"""Readings kept per card at most (about 28 hours at the interval): a bounded buffer for any sweep."""


class EnergySampler:
    """Calls `read` every interval and keeps each card's stamped readings. `read` may report no cards, with the
    reason, when it cannot see them; a read that raises is counted in `errors` (a gap the figures will notice)."""

    def __init__(
        self,
        read: Callable[[], PowerSnapshot],
        interval_s: float = ENERGY_SAMPLE_INTERVAL_S,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._read = read
        self._interval_s = interval_s
        self._clock = clock
        self._series: list[list[EnergySample]] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="energy", daemon=True)
        self._lock = threading.Lock()
        self.errors = 0
        self._last_read_ns: int | None = None
        self.source = ""
        self.unavailable: str | None = None

    def __enter__(self) -> EnergySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self.sample()

    def nudge(self) -> None:
        """Take a reading now, in the sampler's thread (returns at once)."""
        self._wake.set()

    def edge(self) -> None:
        """A window starts or ends: a reading now, in this thread when reads are quick, else in the sampler's."""
        if self._last_read_ns is not None and self._last_read_ns <= QUICK_READ_NS:
            self.sample()
        else:
            self.nudge()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.sample()

    def sample(self) -> None:
        """One reading of every card, stamped (the loop calls it; tests step it on a fake clock)."""
        before = self._clock()
        try:
            snapshot = self._read()
        except Exception as exc:
            self.errors += 1
            self.unavailable = self.unavailable or f"reading power failed: {type(exc).__name__}: {exc}"
            return
        after = self._clock()
        stamp = (before + after) // 2
        self._last_read_ns = after - before
        with self._lock:
            if not snapshot.cards:
                self.unavailable = snapshot.unavailable or "the probe reports no card"
                return
            self.source = snapshot.source
            if len(self._series) < len(snapshot.cards):
                self._series += [[] for _ in range(len(snapshot.cards) - len(self._series))]
            for series, card in zip(self._series, snapshot.cards, strict=False):
                if len(series) < MAX_SAMPLES:
                    series.append(EnergySample(t_ns=stamp, energy_mj=card.energy_mj, power_mw=card.power_mw))

    @property
    def series(self) -> tuple[tuple[EnergySample, ...], ...]:
        """Each card's readings, in time order (two threads read, so they can arrive out of it)."""
        with self._lock:
            return tuple(tuple(sorted(series, key=lambda s: s.t_ns)) for series in self._series)
