"""The operators' view of the fleet: which workers are live, and which queued jobs have nobody to run them.

Pure functions over what the store returns (queue depth per class, the workers table), so `farm workers` and
`farm status` print the same judgement, and tests check it without a database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from farm.settings import LIVE_WITHIN_S
from farm.store import WorkerView

SILENT_AFTER_S = LIVE_WITHIN_S
"""A worker not heard from for this long is not counted as live (farm.settings.LIVE_WITHIN_S says why)."""


@dataclass(frozen=True)
class WorkerLine:
    """One worker as an operator sees it."""

    worker_id: str
    host: str
    hardware_classes: tuple[str, ...]
    heartbeat_age_s: float
    live: bool
    current_job: str | None
    phase: str | None
    quarantine_reason: str | None = None
    """Why the host stopped claiming (its engine keeps failing to start); None while it is in rotation."""
    broker_ok: bool | None = None
    """Whether its broker answered its last check (None: embedded mode, no broker)."""
    spool_held: int = 0
    """Results it holds in memory because its spool's disk refused them."""

    @property
    def receives(self) -> bool:
        """Live, and its broker answers: it can receive a job's message (embedded workers poll, so they do)."""
        return self.live and self.broker_ok is not False

    @property
    def state(self) -> str:
        """quarantined, silent (no heartbeat within the limit), broker-down (alive but receiving no messages),
        or live."""
        if self.quarantine_reason is not None:
            return "quarantined"
        if not self.live:
            return "silent"
        return "live" if self.receives else "broker-down"


@dataclass(frozen=True)
class ClassLine:
    """One hardware class with queued jobs: how many, and which live workers serve it (none: nobody will run
    them until such a worker starts)."""

    hardware_class: str
    queued: int
    live_workers: tuple[str, ...]

    @property
    def unserved(self) -> bool:
        return not self.live_workers


def worker_lines(
    workers: Sequence[WorkerView], now: datetime, silent_after_s: float = SILENT_AFTER_S
) -> list[WorkerLine]:
    """Every worker with the age of its last heartbeat and whether it counts as live; live ones first."""
    lines = [
        WorkerLine(
            worker_id=w.worker_id,
            host=w.host_name,
            hardware_classes=tuple(w.hardware_classes),
            heartbeat_age_s=max(0.0, (now - w.last_heartbeat).total_seconds()),
            live=(now - w.last_heartbeat).total_seconds() <= silent_after_s,
            current_job=w.current_job_id,
            phase=w.phase,
            quarantine_reason=w.quarantine_reason if w.quarantined_at is not None else None,
            broker_ok=w.broker_ok,
            spool_held=w.spool_held,
        )
        for w in workers
    ]
    return sorted(lines, key=lambda line: (not line.live, line.worker_id))


def class_lines(queue_depth: Mapping[str, int], workers: Sequence[WorkerLine]) -> list[ClassLine]:
    """The queue depth of every class with queued jobs, and the live workers that take them (a worker whose broker
    does not answer takes nothing)."""
    return [
        ClassLine(
            hardware_class=klass,
            queued=count,
            live_workers=tuple(
                w.worker_id
                for w in workers
                if w.receives and w.quarantine_reason is None and klass in w.hardware_classes
            ),
        )
        for klass, count in sorted(queue_depth.items())
        if count > 0
    ]
