"""Domain records shared by the store, the queue, the worker, the reports and the CLI (no I/O here).

Jobs (state, phase, failure class, views) and results (a `Figure` with its `Summary`, the figure kinds, the key
`<kind>/<point>/<metric>` and how to split it, the spread, and where a run came from: launched, simulated or an
endpoint the farm did not launch). Every reader of results takes these rules from here, so they are written once.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm.errors import MeasurementError


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


ENGINE_KIND_ENDPOINT = "endpoint"
"""The engine kind of a server the farm did not launch (`farm bench URL`, a profile's `[engine.endpoint]`)."""


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
"""The engine never served: counted against the host (K in a row quarantine it, less those that follow the
recipe), and not charged to the job the first time (farm.store.Store.fail)."""


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


# --- results ---------------------------------------------------------------------------------------------------


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


def spread(low: float, high: float, mean: float) -> float:
    """(max - min) / mean, the seed's own measure of run-to-run noise ("spread ~7%"); 0 for a zero mean.

    The one definition: figures, leaderboard rows, aggregated entries and comparisons all use it.
    """
    return (high - low) / mean if mean else 0.0


def summarize(values: Sequence[float]) -> Summary:
    """n, mean, median, min, max, sample standard deviation (n - 1; 0 for one value) and spread of values; all
    zero for none.

    The one summary: a figure's repeats (farm.bench.metrics.summarize checks them first), and the values an
    entry pools over its runs, whether read from the store or aggregated in memory. Sums are exact (fsum), so
    the order the values come in does not change a figure.
    """
    n = len(values)
    if not n:
        return Summary(n=0, mean=0.0, median=0.0, min=0.0, max=0.0, stdev=0.0, spread=0.0)
    mean = math.fsum(values) / n
    ordered = sorted(values)
    low, high = ordered[0], ordered[-1]
    middle = n // 2
    median = ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    stdev = math.sqrt(math.fsum([(v - mean) * (v - mean) for v in values]) / (n - 1)) if n > 1 else 0.0
    return Summary(n=n, mean=mean, median=median, min=low, max=high, stdev=stdev, spread=spread(low, high, mean))


@dataclass(frozen=True)
class Figure:
    """One figure of a sweep, measured `len(values)` times (once per repeat).

    `key` names the measurement point uniquely within a run, e.g. `decode/code/decode_tok_s`,
    `prefill/107016/prefill_tok_s`, `concurrency/16/ttft_ms_p99`. `params` holds every method parameter that
    produced it.
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
        summary = self.summary  # its fields by name: dataclasses.astuple deep-copies, and a run has ~150 figures
        numbers = (*self.values, summary.mean, summary.median, summary.min, summary.max, summary.stdev, summary.spread)
        if not self.values or not all(math.isfinite(number) for number in numbers):
            raise MeasurementError(f"{self.key}: a figure needs one value or more, all finite, got {self.values}")


# The figure names every stage agrees on. A figure's key is "<kind>/<point>/<metric>", where <point> is the
# workload, the prompt length, the concurrency level or the card: e.g. "decode/code/decode_tok_s",
# "prefill/107016/prefill_tok_s", "concurrency/16/ttft_ms_p99", "memory/gpu0/peak_memory_gib".
KIND_DECODE = "decode"  # metric decode_tok_s, point = workload
KIND_PREFILL = "prefill"  # metrics prefill_tok_s and ttft_ms, point = prompt tokens
KIND_SHORT_TTFT = "short_ttft"  # metric ttft_ms, point = prompt tokens
KIND_PREFIX_CACHE = "prefix_cache"  # metric ttft_ms, point = prompt tokens
KIND_CONCURRENCY = "concurrency"  # point = level; metrics in CONCURRENCY_METRICS
KIND_SPEC_DECODE = "spec_decode"  # metrics acceptance_rate, mean_acceptance_length; point = workload
KIND_MEMORY = "memory"  # metric peak_memory_gib, point = gpu<index>
# Energy over each measurement's windows, GPU-only (farm.bench.energy_figures): point = the measurement's point
# with a dot, e.g. "decode.code", "concurrency.16"; power per card adds the card, "decode.code.gpu0".
KIND_ENERGY = "energy"  # metrics ENERGY_METRICS, all cards together
KIND_POWER = "power"  # metrics POWER_METRICS, per card
KIND_COST = "cost"  # metrics COST_METRICS, at the prices the host profile states (in the figure's params)
ENERGY_METRICS = ("energy_j", "avg_power_w", "j_per_output_token", "j_per_total_token", "output_tokens_per_j")
POWER_METRICS = ("avg_power_w", "peak_power_w")
COST_METRICS = ("per_m_output_tokens", "per_m_total_tokens")
KIND_DEPTH = "depth"  # metrics decode_tok_s, ttft_ms, prefill_tok_s; point = context tokens before the turn
KIND_DATASET = "dataset"  # point = source (sharegpt, trace); metrics of a concurrency point, per-turn figures

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

LOWER_IS_BETTER_UNITS = frozenset({"ms", "s", "GiB", "GB", "J", "W", "J/tok"})
"""Units whose smaller values rank first (latency, memory, energy, power; and costs, `<currency>/Mtok`); every
other unit (tok/s, tok/J, acceptance) ranks larger values first."""
COST_UNIT_SUFFIX = "/Mtok"


def figure_key(kind: str, point: str | int, metric: str) -> str:
    """`<kind>/<point>/<metric>`."""
    return f"{kind}/{point}/{metric}"


def split_key(key: str) -> tuple[str, str, str]:
    """`kind/point/metric` of a figure key (a key of another shape is its own kind with an empty point).

    The one parser of figure keys: the store (its `point` column), the leaderboard and the reports use it.
    """
    parts = key.split("/")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return key, "", parts[-1]


def int_point(point: str) -> int | None:
    """A point that is a number (a prompt length, a concurrency level), else None."""
    try:
        return int(point)
    except ValueError:
        return None


def lower_is_better(unit: str) -> bool:
    return unit in LOWER_IS_BETTER_UNITS or unit.endswith(COST_UNIT_SUFFIX)


class Origin(enum.StrEnum):
    """Where a run's figures were measured. Each is ranked only among its own kind."""

    LAUNCHED = "launched"
    """An engine the farm launched on real hardware."""
    SIMULATED = "simulated"
    """The farm's simulator: never ranked with real hardware."""
    ENDPOINT = "endpoint"
    """A server the farm did not launch (`farm bench URL`): its command and hardware are what it was told."""


def run_origin(provenance: dict[str, Any] | None, simulated_job: bool) -> Origin:
    """The origin of a run: simulated when its job or its provenance says so; an endpoint when its provenance's
    engine kind is `endpoint` (`provenance["engine"]["kind"]`, as `farm bench URL` writes it); else launched."""
    data = provenance or {}
    engine = data.get("engine") or {}
    if simulated_job or data.get("simulated"):
        return Origin.SIMULATED
    if isinstance(engine, dict) and engine.get("kind") == Origin.ENDPOINT.value:
        return Origin.ENDPOINT
    return Origin.LAUNCHED


@dataclass(frozen=True)
class RunSignature:
    """A run's signature, made by the worker's host key where it was measured (farm.signing, docs/signing.md).

    `digest` is the hex sha256 of the run's canonical statement; its parts' sha256 (figures, samples,
    provenance) are kept too, so a check can say which part of a stored run no longer matches."""

    key_id: str
    signature: str
    """Ed25519 signature, base64."""
    digest: str
    figures_sha256: str
    samples_sha256: str
    provenance_sha256: str
    scheme: str = "farm-run/v1"
    artifacts_sha256: str | None = None
    """The sha256 of the run's artifacts (engine log, ...) when it has any; None for a run with none, whose
    statement then has no artifacts part (docs/signing.md)."""


@dataclass(frozen=True)
class RunResult:
    """Everything one attempt of a job produced, written in one transaction.

    `figures` are farm.domain.Figure; `samples` maps a figure key to its raw request samples
    (farm.bench.records.RequestSample.to_json()), one list per repeat; `provenance` is
    farm.provenance.Provenance.to_json().
    """

    figures: tuple[Figure, ...]
    samples: dict[str, list[list[dict[str, Any]]]]
    provenance: dict[str, Any]
    artifacts: tuple[Artifact, ...] = ()
    failed_requests: int = 0
    total_requests: int = 0
    signature: RunSignature | None = None
    """Made by the worker before delivery (so spooled results carry it); None for a run nobody signed."""
