"""Peak memory per card, sampled in a thread while a run goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable

SAMPLE_INTERVAL_S = 0.5
"""Often enough to catch the plateau of a loaded model; cheap for NVML and for the simulator alike."""


class PeakMemorySampler:
    """Calls `read` every interval and keeps each card's peak (MiB). `read` may return () when blind."""

    def __init__(self, read: Callable[[], tuple[int, ...]], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._read = read
        self._interval_s = interval_s
        self._peaks: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peak-memory", daemon=True)
        self.errors = 0

    def __enter__(self) -> PeakMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def _sample(self) -> None:
        try:
            values = self._read()
        except Exception:
            self.errors += 1
            return
        if len(self._peaks) < len(values):
            self._peaks += [0] * (len(values) - len(self._peaks))
        for i, value in enumerate(values):
            self._peaks[i] = max(self._peaks[i], value)

    @property
    def peaks_mib(self) -> tuple[int, ...]:
        return tuple(self._peaks)
