"""Raw samples and figures as plain frozen records (no I/O)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from farm.errors import MeasurementError


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

    def __post_init__(self) -> None:
        # An undefined figure is left out with its reason, never stored as NaN or infinity: the store, the
        # exports and the API then cannot carry one (JSON has no such numbers, and no mean survives one).
        numbers = (*self.values, *(getattr(self.summary, name) for name in self.summary.__slots__))
        if not self.values or not all(math.isfinite(number) for number in numbers):
            raise MeasurementError(f"{self.key}: a figure needs one value or more, all finite, got {self.values}")


# The figure names every stage agrees on. A figure's key is "<kind>/<point>/<metric>", where <point> is the
# workload, the prompt length, the concurrency level or the card: e.g. "decode/code/decode_tok_s",
# "prefill/107016/prefill_tok_s", "concurrency/16/ttft_ms_p99", "memory/gpu0/peak_memory_gib".
KIND_DECODE = "decode"  # metric decode_tok_s, point = workload
KIND_PREFILL = "prefill"  # metrics prefill_tok_s and ttft_ms, point = prompt tokens
KIND_SHORT_TTFT = "short_ttft"  # metric ttft_ms, point = prompt tokens
KIND_PREFIX_CACHE = "prefix_cache"  # metric ttft_ms, point = prompt tokens
KIND_CONCURRENCY = "concurrency"  # point = level; metrics below
KIND_SPEC_DECODE = "spec_decode"  # metrics acceptance_rate, mean_acceptance_length; point = workload
KIND_MEMORY = "memory"  # metric peak_memory_gib, point = gpu<index>

CONCURRENCY_METRICS = (
    "aggregate_tok_s",
    "per_stream_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p90",
    "itl_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p90",
    "tpot_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p90",
    "e2e_ms_p99",
)


def figure_key(kind: str, point: str | int, metric: str) -> str:
    return f"{kind}/{point}/{metric}"


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
