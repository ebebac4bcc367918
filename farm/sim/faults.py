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

import asyncio
import os
import random
from dataclasses import dataclass
from typing import Protocol

from farm.logs import get_logger

log = get_logger("farm.sim")

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


class FaultTarget(Protocol):
    """What the faults act on: the simulated engine's state (farm.sim.engine.SimState)."""

    @property
    def faults(self) -> FaultPlan: ...

    def kill_engine(self) -> None: ...

    def hang(self) -> None: ...


def _crash(state: FaultTarget, linger_s: float, exit_process: bool) -> None:
    log.warning("injected crash: engine dead", linger_s=linger_s)
    state.kill_engine()
    if exit_process:
        asyncio.get_running_loop().call_later(linger_s, _exit_hard)


def _exit_hard() -> None:
    log.warning("injected crash: exiting", exit_code=CRASH_EXIT_CODE)
    os._exit(CRASH_EXIT_CODE)


def _hang(state: FaultTarget) -> None:
    log.warning("injected hang: no more answers")
    state.hang()


def arm_faults(state: FaultTarget, *, exit_process: bool = True) -> None:
    """Start the crash and hang timers (from now, i.e. from when the socket listens)."""
    loop = asyncio.get_running_loop()
    faults = state.faults
    if faults.crash_after_s is not None:
        loop.call_later(faults.crash_after_s, _crash, state, faults.crash_linger_s, exit_process)
    if faults.hang_after_s is not None:
        loop.call_later(faults.hang_after_s, _hang, state)
