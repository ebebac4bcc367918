"""The fault plan: what goes wrong with a simulated engine, and when.

startup_delay_s  the socket listens only after this long (None: the profile's startup_s)
crash_after_s    this long after listening the engine dies: /health answers 503 and completions 500 for
                 crash_linger_s, then the process exits hard (os._exit(CRASH_EXIT_CODE))
hang_after_s     this long after listening the engine stops answering: /health and every request hang, and
                 streams in flight stop mid-way (the socket still accepts, as a hung process's does)
error_rate       this fraction of completion requests is answered HTTP 500, drawn from Random(seed) in
                 arrival order, so a run is repeatable
"""

from __future__ import annotations

import random
from dataclasses import dataclass

CRASH_EXIT_CODE = 1  # what vLLM's API server exits with when its engine core dies


@dataclass(frozen=True)
class FaultPlan:
    startup_delay_s: float | None = None
    crash_after_s: float | None = None
    crash_linger_s: float = 0.0
    hang_after_s: float | None = None
    error_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be within 0..1, got {self.error_rate}")
        for name in ("startup_delay_s", "crash_after_s", "hang_after_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.crash_linger_s < 0:
            raise ValueError("crash_linger_s must not be negative")


class ErrorDraw:
    """Decides, request by request, whether to answer 500 (deterministic for a seed and an arrival order)."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self._rng = random.Random(seed)

    def next_fails(self) -> bool:
        if self.rate <= 0.0:
            return False
        return self._rng.random() < self.rate
