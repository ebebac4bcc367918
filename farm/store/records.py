"""Records the store hands out besides farm.domain's: runs, workers, leaderboard rows (frozen, no I/O)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm.domain import Figure


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
    broker_ok: bool | None = None
    """Whether the worker's broker answered its last check (None: embedded mode, no broker)."""
    spool_held: int = 0
    """Results the worker holds in memory because its spool's disk refused them."""
    engine_versions: Mapping[str, str] = field(default_factory=dict)
    """The engine versions it runs, by canonical engine name (read at its start)."""


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

    Rows measured on the simulator carry `simulated=True` and are never ranked with real ones; rows measured on
    an endpoint the farm did not launch carry `origin="endpoint"` and are shown apart from launched ones.
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
    j_per_output_token: float | None = None
    """GPU-only energy per output token of the workload's decode measurement (J/tok)."""
    avg_power_w: float | None = None
    """GPU-only average power over the decode measurement's windows, all cards together (W)."""
    peak_power_w: float | None = None
    """The highest power any one card drew in the decode measurement's windows (W)."""
    cost_per_m_output_tokens: float | None = None
    """What a million output tokens of the decode measurement cost at the host's stated prices."""
    cost_unit: str | None = None
    """The cost's unit, `<currency>/Mtok`."""
    job_ids: tuple[str, ...] = field(default=())
    origin: str = "launched"
    """launched, endpoint (a server the farm did not launch) or simulated: each is ranked only among its own."""
    requested: int | None = None
    """Decode samples the sweeps asked for (fewer than `decode_tok_s.n`: the row is incomplete)."""
    rank: int | None = None
    """1 is the fastest decode of its workload among rows of the same origin."""
    verified_runs: int = 0
    """The group's runs signed by a trusted key that matched their signatures at their last check."""
    verified: bool = False
    """Every run of the row is verified (farm.signing): what readers mark, as they mark simulated rows."""
    decode_at_depth_tok_s: tuple[tuple[int, float], ...] = ()
    """(context tokens, pooled mean decode tok/s) of the group's `depth/<d>/decode_tok_s`, shallowest first (in
    JSON a list of [tokens, tok/s] pairs)."""

    @property
    def incomplete(self) -> bool:
        return self.requested is not None and self.decode_tok_s.n < self.requested

    def to_json(self) -> dict[str, Any]:
        """The row as JSON data: every field, `decode_tok_s` as its own object (what `dataclasses.asdict` gives,
        at a tenth of its cost: a leaderboard at farm scale has thousands of rows)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        stat = self.decode_tok_s
        data["decode_tok_s"] = {"n": stat.n, "mean": stat.mean, "min": stat.min, "max": stat.max, "spread": stat.spread}
        data["job_ids"] = list(self.job_ids)
        data["decode_at_depth_tok_s"] = [list(pair) for pair in self.decode_at_depth_tok_s]
        return data


@dataclass(frozen=True)
class GroupStat:
    """One figure key of one leaderboard group, pooled over the group's runs (the store computes it in SQL).

    `total` is the sum of the pooled values, so `total / n` is their mean; `runs` counts the runs that have it.
    """

    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_class: str
    engine_name: str
    engine_version: str | None
    origin: str
    kind: str
    point: str
    metric: str
    n: int
    total: float
    min: float
    max: float
    runs: int
    requested: int | None = None
    unit: str = ""


@dataclass(frozen=True)
class RecipeSummary:
    """What exports need of the recipe behind an entry."""

    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_id: str
    hardware_count: int
    argv: tuple[str, ...]
    tensor_parallel: int | None
    max_context_tokens: int | None


@dataclass(frozen=True)
class ProvenanceSummary:
    """The provenance of one run, in short: enough to tell where and how a figure was measured."""

    job_id: str
    attempt: int
    worker_id: str
    measured_at: str
    host: str | None
    cpu: str | None
    os: str | None
    gpu_names: tuple[str, ...]
    gpu_count: int | None
    driver_version: str | None
    cuda_version: str | None
    engine: str
    engine_version: str | None
    image_digest: str | None
    farm_version: str | None
    farm_commit: str | None
    cache_state: str | None
    simulated: bool


GroupKey = tuple[str, str, str, str, str | None, bool]
"""(recipe_id, recipe_sha256, hardware_class, engine_name, engine_version, simulated): one sweep's identity."""


@dataclass(frozen=True)
class Entry:
    """One measurement of one sweep group, pooled over every repeat of every run in the group."""

    recipe: RecipeSummary
    hardware_class: str
    engine_name: str
    engine_version: str | None
    simulated: bool
    workload: str | None
    key: str
    kind: str
    point: str
    metric: str
    unit: str
    n: int
    mean: float
    median: float
    min: float
    max: float
    stdev: float
    spread: float
    values: tuple[float, ...]
    runs: int
    requested: int
    job_ids: tuple[str, ...]
    first_measured_at: datetime
    measured_at: datetime
    params: dict[str, Any] = field(default_factory=dict)
    provenance: tuple[ProvenanceSummary, ...] = ()
    rank: int | None = None
    origin: str = "launched"
    verified: bool = False
    """Every run the entry pools is signed by a trusted key and matched its signature at its last check."""

    @property
    def incomplete(self) -> bool:
        """Fewer samples than the sweeps asked for."""
        return self.n < self.requested

    @property
    def status(self) -> str:
        """`simulated` or `measured` (on real hardware)."""
        return "simulated" if self.simulated else "measured"

    @property
    def group(self) -> GroupKey:
        return (
            self.recipe.recipe_id,
            self.recipe.recipe_sha256,
            self.hardware_class,
            self.engine_name,
            self.engine_version,
            self.simulated,
        )

    @property
    def gpu_count(self) -> int:
        return self.recipe.hardware_count


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
    origin: str = "launched"
    units: dict[str, str] = field(default_factory=dict)
    """Each figure key's unit, where the caller has it (a cost's currency comes from it)."""


@dataclass(frozen=True)
class RunMeasurements:
    """One succeeded run: who and what it measured, how many repeats its plan asked for, and every figure.

    `engine_name` and `engine_version` are what the run's provenance read from the engine (the simulator says
    `sim`), falling back to the recipe's. `simulated` is set when the job or its provenance says so.
    """

    job_id: str
    attempt: int
    worker_id: str
    sweep_name: str
    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_id: str
    hardware_count: int
    hardware_class: str
    engine_name: str
    engine_version: str | None
    simulated: bool
    measured_at: datetime
    requested_repeats: int | None
    recipe_argv: tuple[str, ...]
    tensor_parallel: int | None
    max_context_tokens: int | None
    provenance: dict[str, Any]
    figures: tuple[Figure, ...]
    origin: str = "launched"
