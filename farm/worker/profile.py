"""Worker host profiles (TOML in workers/): the hardware a host offers and the engine policy it enforces."""

from __future__ import annotations

import ipaddress
import socket
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from farm import hardware
from farm.bench.energy import Prices
from farm.domain import hardware_class
from farm.engines.endpoint.adapter import EndpointSection
from farm.errors import ProfileError


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkerSection(_Section):
    id: str | None = Field(None, description="unset: <hostname>-<profile name>, the same across restarts")
    lease_s: float | None = Field(None, gt=0, description="this host's lease; unset: FARM_LEASE_S (farm.settings)")
    poll_interval_s: float | None = Field(
        None, gt=0, description="this host's idle poll (embedded mode); unset: FARM_POLL_INTERVAL_S (farm.settings)"
    )
    on_sigterm: Literal["finish", "release"] = Field(
        "finish", description="on SIGTERM: finish the job in hand, or hand it back to the queue (farm mode)"
    )


class HardwareSection(_Section):
    source: Literal["declared", "nvml", "amd", "apple"] = Field(
        "declared",
        description="declared: trust this file; nvml, amd (rocm-smi), apple (sysctl/system_profiler): detect the "
        "devices and check they match it",
    )
    hardware_id: str
    count: int = Field(ge=1)
    restrict_to: tuple[int | str, ...] = Field(
        (), description="GPU indices or UUIDs this worker may use (several workers can share a host)"
    )
    also_serve_counts: tuple[int, ...] = Field(
        (), description="smaller GPU counts this host also takes jobs for (a 2-GPU host taking 1-GPU jobs)"
    )
    gpu_names: tuple[str, ...] = ()

    @field_validator("hardware_id")
    @classmethod
    def _known(cls, value: str) -> str:
        if not hardware.is_known(value):
            raise ValueError(f"unknown hardware id {value!r}; known: {', '.join(sorted(hardware.catalogue()))}")
        return value


class CostSection(_Section):
    """What this host costs, for the cost-per-million-tokens figures (farm.bench.energy.Prices)."""

    per_hour: float | None = Field(
        None, ge=0, description="the host's cost per hour of use: rental, or the hardware amortised"
    )
    electricity_per_kwh: float | None = Field(
        None, ge=0, description="the electricity price per kWh, charged on the cards' measured energy (GPU-only)"
    )
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code of both prices")

    def prices(self) -> Prices:
        return Prices(cost_per_hour=self.per_hour, electricity_per_kwh=self.electricity_per_kwh, currency=self.currency)


class SimEngineSection(_Section):
    profile: str = Field("seed-rtx-pro-6000-tp2", description="a profile in farm/sim/profiles")
    overrides: dict[str, str] = Field(default_factory=dict, description="profile fields to override")
    faults: tuple[str, ...] = Field((), description="fault flags passed to `farm sim serve` (tests)")


class ContainerSection(_Section):
    docker: str = Field("docker", description="the docker client executable")
    model_cache: str | None = Field(None, description="host directory mounted as the container's HF cache")
    model_cache_writable: bool = Field(
        False, description="mount the model cache read-write (the engine downloads into it); default read-only"
    )


class ProcessEngineSection(_Section):
    """How this host runs one engine as a process (`[engine.<name without dots>]`). The executable is the
    host's, never a job's: it replaces the recipe's own executable and subcommand."""

    executable: tuple[str, ...] = Field(min_length=1, description="the host's executable; `~` is expanded")
    extra_args: tuple[str, ...] = Field((), description="host-specific options appended (e.g. --threads 2)")
    env_allowlist: tuple[str, ...] | None = Field(
        None,
        description="names passed from the worker's environment (an entry ending in `*` is a prefix); unset: the "
        "engine's own list (its line in farm.engines.registry, `host_env_allowlist`)",
    )
    extra_env: dict[str, str] = Field(default_factory=dict, description="set for every engine on this host")
    model_paths: dict[str, str] = Field(
        default_factory=dict,
        description="model id -> local file or directory; served under the id",
    )
    draft_paths: dict[str, str] = Field(
        default_factory=dict,
        description="a draft model's file name, as a recipe names it (`-md NAME.gguf`) -> this host's file",
    )
    version: str | None = Field(
        None,
        description="the engine version this host runs (a release, e.g. 0.3.36): commands are judged against its "
        "spec, or the nearest older one shipped; unset: read from the executable at start (each engine's "
        "adapter asks it: `--version` or its package), else the newest shipped",
    )


class VllmSection(ProcessEngineSection):
    """How this host runs vLLM."""

    executable: tuple[str, ...] = Field(
        ("vllm", "serve"), min_length=1, description="replaces the recipe's `vllm serve`; `~` is expanded"
    )
    extra_args: tuple[str, ...] = Field((), description="host-specific flags appended (e.g. --dtype on the CPU)")
    gpu_free_deadline_s: float = Field(30.0, ge=0, description="after stop: time for the cards to empty (every engine)")
    dev_mode_reset: bool = Field(
        False,
        description="serve vLLM with VLLM_SERVER_DEV_MODE=1, so its prefix cache is reset before each cold "
        "measurement; that also opens /collective_rpc and vLLM's other development endpoints to every process on "
        "this host (docs/cache-state.md): only for a host that runs nobody else's processes, kind = 'vllm', on a "
        "loopback address",
    )

    @field_validator("extra_env")
    @classmethod
    def _dev_mode_by_its_switch(cls, value: dict[str, str]) -> dict[str, str]:
        if "VLLM_SERVER_DEV_MODE" in value:
            raise ValueError(
                "[engine.vllm] extra_env sets VLLM_SERVER_DEV_MODE: use dev_mode_reset = true, the one switch the "
                "worker checks and records (docs/cache-state.md)"
            )
        return value


class LlamaCppSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(("llama-server",), min_length=1, description="`~` is expanded")


class SglangSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(
        ("python3", "-m", "sglang.launch_server"), min_length=1, description="`~` is expanded"
    )


class OllamaSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(("ollama",), min_length=1, description="`~` is expanded; `serve` follows")


class LmStudioSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(
        ("lms",), min_length=1, description="`~` is expanded; `server start`, `load`, `unload`, `server stop` follow"
    )


class TabbyApiSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(
        ("python3", "main.py"), min_length=1, description="TabbyAPI's main.py (absolute on a host); `~` is expanded"
    )


class MlxSection(ProcessEngineSection):
    executable: tuple[str, ...] = Field(("mlx_lm.server",), min_length=1, description="`~` is expanded")


class PolicySection(_Section):
    """What this host allows beyond vLLM's own argument list (farm.engines.policy.EnginePolicy)."""

    allow_trust_remote_code_models: tuple[str, ...] = Field(
        (),
        description="repositories trusted with remote code, each with the revision trusted: "
        "'org/model@<40-hex commit>' (or @<tag>); a bare repository or a pull-request ref is refused "
        "(farm.engines.trust says why)",
    )
    allow_local_media: bool = False
    allowed_extra_flags: tuple[str, ...] = ()
    allowed_risky_flags: tuple[str, ...] = ()
    allow_image_tags: bool = False
    allowed_images: tuple[str, ...] = Field(
        (), description="image repositories this host runs beside each engine's official ones (still digest-pinned)"
    )
    allowed_mount_sources: tuple[str, ...] = ()
    mount_roots: dict[str, str] = Field(
        default_factory=dict,
        description="what the registry's mount placeholders stand for on this host: MODEL_ROOT (mounted read-only), "
        "e.g. {MODEL_ROOT = '/srv/models'}; CACHE_ROOT mounts are never mounted",
    )
    serve_args_file: str | None = Field(None, description="a vLLM argument list generated on this host")
    llamacpp_args_file: str | None = Field(
        None, description="a llama-server argument list generated on this host (deploy/gen_llama_server_args.py)"
    )
    path_roots: tuple[str, ...] | None = Field(
        None, description="the host's model and cache roots: every path an engine gets lies under one (unset: default)"
    )

    def host_spec_files(self) -> dict[str, str]:
        """The argument lists generated on this host, by canonical engine name (read by its `host_spec`)."""
        files = {"vllm": self.serve_args_file, "llama.cpp": self.llamacpp_args_file}
        return {engine: path for engine, path in files.items() if path is not None}

    @field_validator("allow_trust_remote_code_models")
    @classmethod
    def _pinned(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from farm.engines.trust import parse_trust_list

        return tuple(sorted(parse_trust_list(value)))


class EngineSection(_Section):
    kind: Literal[
        "sim", "vllm", "vllm-container", "llama.cpp", "sglang", "ollama", "lmstudio", "tabbyapi", "mlx", "endpoint"
    ] = Field(
        "sim",
        description="sim: the simulator; vllm: a process; vllm-container: the recipe's image via docker; "
        "llama.cpp, sglang, ollama, lmstudio, tabbyapi, mlx: that engine as a process "
        "([engine.<name without dots>]); "
        "endpoint: a server the farm does not launch ([engine.endpoint])",
    )
    stand_in: bool = Field(
        False,
        description="the engine's executable is the simulator standing in for it (python -m farm.sim.standin "
        "ENGINE): its results are marked simulated (`farm demo --engine ollama`)",
    )
    engines: tuple[str, ...] | None = Field(
        None, description="the engines this host runs (canonical names); unset: the one its kind launches"
    )
    host: str = Field("127.0.0.1", description="engines listen on loopback: the worker is their only client")
    port: int = Field(0, ge=0, le=65535, description="0: a free port for every run")
    ready_timeout_s: float = Field(1200.0, gt=0, description="sized for 20-minute loads of the largest models")
    stop_grace_s: float = Field(30.0, ge=0, description="between SIGTERM and SIGKILL of the engine's group")
    sim: SimEngineSection = SimEngineSection()
    vllm: VllmSection = VllmSection()
    container: ContainerSection = ContainerSection()
    llamacpp: LlamaCppSection = LlamaCppSection()
    sglang: SglangSection = SglangSection()
    ollama: OllamaSection = OllamaSection()
    lmstudio: LmStudioSection = LmStudioSection()
    tabbyapi: TabbyApiSection = TabbyApiSection()
    mlx: MlxSection = MlxSection()
    policy: PolicySection = PolicySection()
    endpoint: EndpointSection | None = Field(None, description="the server an `endpoint` kind measures")

    @model_validator(mode="after")
    def _dev_mode_on_loopback(self) -> EngineSection:
        if not self.vllm.dev_mode_reset:
            return self
        if self.kind != "vllm":
            raise ValueError(
                f"[engine.vllm] dev_mode_reset applies to kind = 'vllm' (a vLLM process), not {self.kind!r}"
            )
        if not _is_loopback(self.host):
            raise ValueError(
                f"[engine.vllm] dev_mode_reset needs engines on a loopback address (engine.host is {self.host!r}): "
                "its development endpoints must not listen beyond this host"
            )
        return self

    @model_validator(mode="after")
    def _endpoint_named(self) -> EngineSection:
        if self.kind == "endpoint" and self.endpoint is None:
            raise ValueError("kind 'endpoint' needs an [engine.endpoint] section with its url")
        return self

    @field_validator("engines")
    @classmethod
    def _known_engines(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        from farm.engines.registry import ENGINES, canonical_engine_name

        names = tuple(canonical_engine_name(v) for v in value)
        unknown = [v for v, n in zip(value, names, strict=True) if n not in ENGINES]
        if unknown:
            raise ValueError(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINES)}")
        return names

    def runs(self) -> tuple[str, ...]:
        """The engines this host has (a simulator plays any recipe's engine)."""
        if self.engines is not None:
            return self.engines
        if self.kind in ("sim", "vllm-container", "endpoint"):
            return ("vllm",)
        return (self.kind,)

    @property
    def gpu_free_deadline_s(self) -> float:
        """After stop: the time the cards have to empty, for every engine this host runs."""
        return self.vllm.gpu_free_deadline_s

    def process_section(self, engine: str) -> ProcessEngineSection:
        """How this host runs `engine` (a table name) as a process: its `[engine.<name without dots>]` section."""
        section = getattr(self, engine.replace(".", ""), None)
        if not isinstance(section, ProcessEngineSection):
            raise ValueError(f"no [engine] section runs {engine!r} as a process")
        return section


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WorkerProfile(_Section):
    """A worker profile file."""

    name: str
    worker: WorkerSection = WorkerSection()
    hardware: HardwareSection
    engine: EngineSection = EngineSection()
    cost: CostSection = CostSection()

    @model_validator(mode="after")
    def _endpoint_hardware_declared(self) -> WorkerProfile:
        # An endpoint's server is elsewhere: this host's devices say nothing about it.
        if self.engine.kind == "endpoint" and self.hardware.source != "declared":
            raise ValueError(
                f"hardware.source {self.hardware.source!r} probes this host, but an endpoint's server is elsewhere: "
                "use source = 'declared'"
            )
        return self

    @property
    def simulated(self) -> bool:
        """A simulator, launched here or measured as an endpoint (`[engine.endpoint] simulated = true`)."""
        if self.engine.kind == "endpoint":
            return self.engine.endpoint is not None and self.engine.endpoint.simulated
        return self.engine.kind == "sim" or self.engine.stand_in

    def worker_id(self) -> str:
        """The worker's id: stable across restarts on one host, so its quarantine and its failed attempts follow
        it (two workers of one profile on one host need `[worker] id` or `--worker-id`)."""
        return self.worker.id or f"{socket.gethostname()}-{self.name}"

    def hardware_classes(self) -> tuple[str, ...]:
        """The claim keys this worker serves; a simulator serves only simulated jobs."""
        counts = (self.hardware.count, *sorted(set(self.hardware.also_serve_counts), reverse=True))
        classes = [hardware_class(self.hardware.hardware_id, n) for n in counts if n <= self.hardware.count]
        return tuple(simulated_class(c) if self.simulated else c for c in dict.fromkeys(classes))


def simulated_class(hardware_class_: str) -> str:
    """The claim key of a job that asks for simulated hardware: never claimed by a real GPU worker."""
    return f"sim:{hardware_class_}"


def load_profile(path: Path) -> WorkerProfile:
    """Read and validate a worker profile; errors name the file and the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ProfileError("no such file", source=path) from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"not valid TOML: {exc}", source=path) from exc
    data.setdefault("name", path.stem)
    try:
        return WorkerProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ProfileError(first["msg"], source=path, field=field) from exc
