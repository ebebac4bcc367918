"""The worker's check that an engine died, made before a failed sweep is classified (farm.worker.daemon)."""

from __future__ import annotations

import time

from farm.worker.daemon import _engine_died


class DyingEngine:
    """An engine whose process is reaped `dies_after_s` after the check starts: a crash whose connections
    dropped (failing the request) before the process was gone, the order a loaded host sees."""

    def __init__(self, dies_after_s: float | None) -> None:
        self.dies_at = None if dies_after_s is None else time.monotonic() + dies_after_s
        self.polls = 0

    def alive(self) -> bool:
        self.polls += 1
        return self.dies_at is None or time.monotonic() < self.dies_at


def test_an_engine_that_dies_within_the_grace_counts_as_dead() -> None:
    """The request failed first, the process went 0.3 s later: still a dead engine (so engine_crashed)."""
    engine = DyingEngine(0.3)
    assert _engine_died(engine, grace_s=3.0)
    assert engine.polls > 1


def test_a_live_engine_is_alive_after_the_grace() -> None:
    """An engine that stays up is not dead: the failure is the measurement's. The wait ends at the grace."""
    engine = DyingEngine(None)
    started = time.monotonic()
    assert not _engine_died(engine, grace_s=0.2)
    assert time.monotonic() - started >= 0.2


def test_an_engine_already_gone_is_dead_at_once() -> None:
    """No wait when the process is already gone."""
    engine = DyingEngine(0.0)
    assert _engine_died(engine, grace_s=30.0)
    assert engine.polls == 1
