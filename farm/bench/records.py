"""Raw request samples as plain frozen records (no I/O), and the JSON form of a figure.

`Figure`, `Summary`, the figure kinds and keys live in farm.domain (the store and the reports read them without
importing the measurement package); they are re-exported here for the measurement code that names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.domain import (
    CONCURRENCY_METRICS,
    KIND_CONCURRENCY,
    KIND_DATASET,
    KIND_DECODE,
    KIND_DEPTH,
    KIND_MEMORY,
    KIND_PREFILL,
    KIND_PREFIX_CACHE,
    KIND_SHORT_TTFT,
    KIND_SPEC_DECODE,
    Figure,
    Summary,
    figure_key,
)

__all__ = [
    "CONCURRENCY_METRICS",
    "KIND_CONCURRENCY",
    "KIND_DATASET",
    "KIND_DECODE",
    "KIND_DEPTH",
    "KIND_MEMORY",
    "KIND_PREFILL",
    "KIND_PREFIX_CACHE",
    "KIND_SHORT_TTFT",
    "KIND_SPEC_DECODE",
    "Figure",
    "RequestSample",
    "Summary",
    "figure_from_json",
    "figure_key",
    "figure_to_json",
]


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
    cached_tokens: int | None = None
    """Prompt tokens the server says it served from its prefix cache (in its answer); None: it did not say."""
    connection: tuple[int, int] | None = None
    """(the client's local port, which response on that connection) for matching a packet capture; None: unknown."""
    timestamps: str = "user"
    """Where the time stamps come from: `user` (the client's clock when its loop read the bytes) or `kernel` (the
    kernel's receive stamps of the packets that carried them, `farm.bench.kstamps`)."""
    user_started_ns: int | None = None
    """With kernel stamps: the client's own send stamp, kept beside the kernel's (None otherwise)."""
    user_chunk_ns: tuple[int, ...] = ()
    """With kernel stamps: the client's own stamp of each content chunk; minus `chunk_ns`, its lag in reading."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_token_ns is not None and bool(self.completion_tokens)

    def to_json(self) -> dict[str, Any]:
        """The sample as JSON; `cached_tokens`, `connection` and the user-space stamps beside kernel ones only where
        set (the store's packed codec keeps the other fields, and a repeat with these is kept whole as compressed
        JSON)."""
        data: dict[str, Any] = {
            "started_ns": self.started_ns,
            "first_token_ns": self.first_token_ns,
            "last_token_ns": self.last_token_ns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "chunk_ns": list(self.chunk_ns),
            "error": self.error,
            "text_sha256": self.text_sha256,
        }
        if self.cached_tokens is not None:
            data["cached_tokens"] = self.cached_tokens
        if self.connection is not None:
            data["connection"] = list(self.connection)
        if self.timestamps != "user":
            data["timestamps"] = self.timestamps
            data["user_started_ns"] = self.user_started_ns
            data["user_chunk_ns"] = list(self.user_chunk_ns)
        return data


def figure_to_json(figure: Figure) -> dict[str, Any]:
    """A figure as plain JSON (the worker's spool and exports use it)."""
    from dataclasses import asdict

    data = asdict(figure)
    data["values"] = list(figure.values)
    return data


def figure_from_json(data: dict[str, Any]) -> Figure:
    return Figure(
        kind=data["kind"],
        key=data["key"],
        metric=data["metric"],
        unit=data["unit"],
        values=tuple(float(v) for v in data["values"]),
        summary=Summary(**data["summary"]),
        workload=data.get("workload"),
        params=dict(data.get("params") or {}),
        requested_repeats=data.get("requested_repeats"),
    )
