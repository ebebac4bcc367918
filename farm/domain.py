"""Job-level domain records shared by the store, the queue, the worker and the CLI (no I/O here)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class JobState(enum.StrEnum):
    """Where a job is. The database row is the only truth about it."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class Phase(enum.StrEnum):
    """What a running job's worker is doing, reported with every heartbeat."""

    CLAIMED = "claimed"
    LAUNCHING = "launching"
    WARMING = "warming"
    MEASURING = "measuring"
    STOPPING = "stopping"


class FailureClass(enum.StrEnum):
    """Why a job failed. Classes in NOT_RETRIED fail the same way again, so they are not retried."""

    BAD_RECIPE = "bad_recipe"
    BAD_ARGUMENT = "bad_argument"
    ENGINE_START_FAILED = "engine_start_failed"
    OUT_OF_MEMORY = "out_of_memory"
    CUDA_ERROR = "cuda_error"
    PORT_IN_USE = "port_in_use"
    ENGINE_CRASHED = "engine_crashed"
    STARTUP_TIMEOUT = "startup_timeout"
    HOST_LOST = "host_lost"
    MEASUREMENT_ERROR = "measurement_error"
    GPU_BUSY = "gpu_busy"
    CONTEXT_TOO_LONG = "context_too_long"
    UNKNOWN_MODEL = "unknown_model"
    REQUEST_REFUSED = "request_refused"


NOT_RETRIED = frozenset(
    {
        FailureClass.BAD_RECIPE,
        FailureClass.BAD_ARGUMENT,
        FailureClass.OUT_OF_MEMORY,
        FailureClass.CONTEXT_TOO_LONG,
        FailureClass.UNKNOWN_MODEL,
        FailureClass.REQUEST_REFUSED,
    }
)
"""Failures that repeat on any host: the job fails at once (docs/failure-classes.md)."""

START_FAILURES = frozenset(
    {
        FailureClass.ENGINE_START_FAILED,
        FailureClass.STARTUP_TIMEOUT,
        FailureClass.PORT_IN_USE,
        FailureClass.GPU_BUSY,
    }
)
"""The engine never served: counted against the host (K in a row quarantine it), and not charged to the job
the first time (farm.store.Store.fail)."""


def hardware_class(hardware_id: str, count: int) -> str:
    """The queue/claim key of a job or a worker: `<hardware_id> x <count>`."""
    return f"{hardware_id} x {count}"


@dataclass(frozen=True)
class JobView:
    """A job as the CLI and reports see it."""

    id: str
    state: JobState
    recipe_id: str
    sweep_name: str
    hardware_class: str
    attempt: int
    max_attempts: int
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    phase: str | None = None
    progress: float | None = None
    lease_expires_at: datetime | None = None
    failure_class: str | None = None
    failure_message: str | None = None
    simulated: bool = False


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker gets when it wins a claim: enough to run the job without another read."""

    id: str
    attempt: int
    owner: str
    hardware_class: str
    recipe: dict[str, Any]
    plan: dict[str, Any]
    lease_expires_at: datetime
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Artifact:
    """A file kept with a run, such as the engine log."""

    name: str
    content: str
    media_type: str = "text/plain"


@dataclass(frozen=True)
class RunResult:
    """Everything one attempt of a job produced, written in one transaction.

    `figures` are farm.bench.records.Figure; `samples` maps a figure key to its raw request samples
    (farm.bench.records.RequestSample.to_json()), one list per repeat; `provenance` is
    farm.provenance.Provenance.to_json().
    """

    figures: tuple[Any, ...]
    samples: dict[str, list[list[dict[str, Any]]]]
    provenance: dict[str, Any]
    artifacts: tuple[Artifact, ...] = ()
    failed_requests: int = 0
    total_requests: int = 0
