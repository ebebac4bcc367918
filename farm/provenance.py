"""Provenance: the value object attached to every result, what the worker can read of its own host, and how a
run's provenance is captured (its argv and environment through the one secret scrubber, farm.scrubber).
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import farm
from farm.scrubber import scrub_argv, scrub_environment, scrub_json

if TYPE_CHECKING:
    from farm.bench.runner import SweepOutcome
    from farm.engines.base import Engine
    from farm.hardware.probe import HardwareReport
    from farm.recipes.model import Recipe
    from farm.recipes.sweep import SweepPlan


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HostInfo:
    name: str
    cpu: str
    cpu_count: int
    memory_gib: float
    os: str
    kernel: str

    @classmethod
    def read(cls) -> HostInfo:
        return cls(
            name=socket.gethostname(),
            cpu=_cpu_model(),
            cpu_count=os.cpu_count() or 0,
            memory_gib=round(_memory_bytes() / 2**30, 1),
            os=_os_name(),
            kernel=platform.release(),
        )


@dataclass(frozen=True)
class Provenance:
    """Everything needed to tell how a figure was obtained. Serialised whole into the store."""

    captured_at: str
    host: dict[str, Any]
    gpus: dict[str, Any]
    engine: dict[str, Any]
    argv: tuple[str, ...]
    environment: dict[str, str]
    recipe_id: str
    recipe_sha256: str
    """sha256 of the recipe's canonical JSON: the store's key for the recipe row."""
    recipe_source_sha256: str
    """sha256 of the document the recipe was read from (registry JSON or LocalMaxxing page)."""
    model_id: str
    model_revision: str | None
    farm_version: str
    farm_commit: str | None
    method: dict[str, Any]
    prompt_sha256: dict[str, str]
    output_sha256: dict[str, str]
    cache_state: str
    worker_id: str
    attempt: int
    simulated: bool
    recipe_argv: tuple[str, ...] = ()
    """The command as the recipe wrote it (scrubbed); `argv` is the canonical command judged and launched."""
    command_source: str | None = None
    """Which of the recipe's copies of its command was used (e.g. observed_command, tokenized.arguments)."""
    absent_figures: dict[str, str] = field(default_factory=dict)
    """Each figure the sweep could not measure (so it has none), with the reason."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["recipe_argv"] = list(self.recipe_argv)
        return data


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def farm_version() -> str:
    return farm.__version__


def farm_commit() -> str | None:
    """The git commit of the farm's source tree, when it runs from a checkout."""
    root = Path(farm.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def _engine_provenance(engine: Engine, recipe: Recipe, outcome: SweepOutcome) -> dict[str, Any]:
    """The `engine` part: what the farm launched, or, for an engine that describes itself (an endpoint the farm
    did not launch has `provenance()`: kind "endpoint", its URL without credentials), that description."""
    launched: dict[str, Any] = {
        "name": "sim" if engine.simulated else recipe.engine.name,
        "recipe_engine": recipe.engine.name,
        "version": outcome.engine_version or engine.version(),
        "image_digest": recipe.container.digest if recipe.container else None,
    }
    if judged_by := getattr(engine, "argument_spec", None):
        launched["argument_spec"] = judged_by  # an EngineProcess's: which spec version judged its command
    describe = getattr(engine, "provenance", None)
    if not callable(describe):
        return launched
    described = dict(describe())
    if outcome.engine_version:
        described["version"] = outcome.engine_version
    return {**launched, **described, "recipe_engine": recipe.engine.name}


def capture_provenance(
    *,
    host: HostInfo,
    report: HardwareReport,
    gpu_names: tuple[str, ...],
    recipe: Recipe,
    recipe_sha256: str,
    plan: SweepPlan,
    engine: Engine,
    outcome: SweepOutcome,
    started: str,
    worker_id: str,
    attempt: int,
) -> Provenance:
    """The provenance of one run: the host and its cards, the engine, the exact argv and environment (scrubbed),
    the recipe, the method, the prompt and output hashes, and who ran which attempt."""
    return Provenance(
        captured_at=now_utc(),
        host=asdict(host) | {"started_at": started},
        gpus={
            "hardware_id": report.hardware_id,
            "count": report.count,
            "declared": report.declared,
            "names": list(gpu_names),
            "uuids": [g.uuid for g in report.gpus],
            "memory_total_mib": [g.memory_total_mib for g in report.gpus],
            "driver_version": report.driver_version,
            "cuda_version": report.cuda_version,
            "interconnect": report.interconnect,
            "power_limit_w": [g.power_limit_w for g in report.gpus],
        },
        engine=scrub_json(_engine_provenance(engine, recipe, outcome)),  # a server's own version text too
        argv=tuple(scrub_argv(engine.argv)),
        recipe_argv=tuple(scrub_argv(recipe.argv)),
        command_source=recipe.provenance.command_source,
        environment=scrub_environment(engine.environment),
        recipe_id=recipe.id,
        recipe_sha256=recipe_sha256,
        recipe_source_sha256=recipe.provenance.content_sha256,
        model_id=recipe.model_id,
        model_revision=None,
        farm_version=farm_version(),
        farm_commit=farm_commit(),
        method=plan.model_dump(mode="json"),
        prompt_sha256=dict(outcome.prompt_sha256),
        output_sha256=dict(outcome.output_sha256),
        cache_state="prefix cache warmed per workload; prefill prompts carry a unique prefix",
        worker_id=worker_id,
        attempt=attempt,
        simulated=engine.simulated,
        absent_figures=dict(outcome.absent),
        extra={"prompt_sized_by": outcome.prompt_sized_by},
    )
