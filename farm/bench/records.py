"""Raw samples and figures as plain frozen records (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestSample:
    """One request's raw timing, from a monotonic clock in the client (nanoseconds, `time.perf_counter_ns`).

    Token counts come from the server's `usage`, never from counting chunks. A failed request is a sample
    with `error` set: failures are data, not exceptions.
    """

    started_ns: int
    first_token_ns: int | None
    last_token_ns: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    chunk_ns: tuple[int, ...] = ()
    error: str | None = None
    text_sha256: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_token_ns is not None and bool(self.completion_tokens)

    def to_json(self) -> dict[str, Any]:
        return {
            "started_ns": self.started_ns,
            "first_token_ns": self.first_token_ns,
            "last_token_ns": self.last_token_ns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "chunk_ns": list(self.chunk_ns),
            "error": self.error,
            "text_sha256": self.text_sha256,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """The spread of repeated values of one figure. `spread` is (max - min) / mean, as the seed's page uses."""

    n: int
    mean: float
    median: float
    min: float
    max: float
    stdev: float
    spread: float


@dataclass(frozen=True)
class Figure:
    """One figure of a sweep, measured `len(values)` times (once per repeat).

    `key` names the measurement point uniquely within a run, e.g. `decode/code`, `prefill/107016`,
    `concurrency/16`. `params` holds every method parameter that produced it.
    """

    kind: str
    key: str
    metric: str
    unit: str
    values: tuple[float, ...]
    summary: Summary
    workload: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    requested_repeats: int | None = None
