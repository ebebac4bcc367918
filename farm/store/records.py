"""Records the store hands out besides farm.domain's: runs, workers, leaderboard rows (frozen, no I/O)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class RunState(enum.StrEnum):
    """How one attempt of a job ended (or that it is still running)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RELEASED = "released"
    """Handed back by a worker that shut down gracefully; the attempt does not count against the budget."""


@dataclass(frozen=True)
class RunView:
    """One attempt of a job."""

    job_id: str
    attempt: int
    worker_id: str
    state: RunState
    started_at: datetime
    finished_at: datetime | None = None
    failure_class: str | None = None
    failure_message: str | None = None
    provenance: dict[str, Any] | None = None
    failed_requests: int | None = None
    total_requests: int | None = None
    artifacts: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerView:
    """A worker daemon as the hosts table knows it."""

    worker_id: str
    host_name: str
    hardware_classes: tuple[str, ...]
    version: str | None
    started_at: datetime
    last_heartbeat: datetime
    current_job_id: str | None = None
    phase: str | None = None
    start_failures: int = 0
    """Failed engine starts in a row."""
    quarantined_at: datetime | None = None
    quarantine_reason: str | None = None


@dataclass(frozen=True)
class Stat:
    """Mean, range and count of a figure pooled over every repeat of every run in a leaderboard row."""

    n: int
    mean: float
    min: float
    max: float
    spread: float


@dataclass(frozen=True)
class LeaderboardRow:
    """One recipe × hardware class × engine version × workload, aggregated from succeeded runs.

    Rows measured on the simulator carry `simulated=True` and are never ranked with real ones.
    """

    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_class: str
    engine_name: str
    engine_version: str | None
    workload: str
    simulated: bool
    runs: int
    decode_tok_s: Stat
    prefill_tok_s: float | None = None
    prefill_prompt_tokens: int | None = None
    short_ttft_ms: float | None = None
    peak_memory_gib: float | None = None
    spec_acceptance_rate: float | None = None
    job_ids: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class MeasuredRun:
    """What the leaderboard needs of one succeeded run: its identity and its figures' values by key."""

    job_id: str
    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_class: str
    engine_name: str
    engine_version: str | None
    simulated: bool
    values: dict[str, tuple[float, ...]]
