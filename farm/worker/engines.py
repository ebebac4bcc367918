"""From a worker profile to the things a job needs: the hardware probe, the GPUs, the engine policy, the engine.

The executable, the GPUs, the listening address and the environment all come from the host's profile; the job
contributes only the recipe's arguments, which are checked against vLLM's list and the host's policy.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from farm.domain import FailureClass
from farm.engines.argspec import ArgSpec
from farm.engines.base import Engine, LaunchRequest
from farm.engines.endpoint.adapter import endpoint_engine
from farm.engines.environment import recipe_environment
from farm.engines.judge import DEFAULT_PATH_ROOTS
from farm.engines.policy import EnginePolicy, recipe_command
from farm.engines.process import EngineProcess, host_env
from farm.engines.registry import ENGINES, canonical_engine_name
from farm.engines.sim.adapter import sim_engine
from farm.errors import EngineError, ProfileError
from farm.hardware.detect import probe_from_source
from farm.hardware.probe import DeclaredProbe, HardwareProbe, HardwareReport, SimulatedProbe
from farm.recipes.model import Recipe
from farm.worker.profile import VllmSection, WorkerProfile

CONTAINER_KIND = "-container"
"""A profile's `engine.kind` `<engine>-container`: the recipe's own image of that engine, through docker."""

EngineFactory = Callable[[Recipe, WorkerProfile, int, Path, HardwareProbe], Engine]


PROBE_NAMES = {"nvml": "NVML", "amd": "rocm-smi", "apple": "system_profiler"}
"""What each `hardware.source` asks, as its refusal names it."""


def probe_for(
    profile: WorkerProfile, *, detect: Callable[[str, tuple[int | str, ...]], HardwareProbe] | None = None
) -> HardwareProbe:
    """The probe the profile asks for. A detecting probe (NVML, AMD, Apple) must find what the profile declares.

    A simulator's probe is the simulator's; an endpoint's is what the profile declares (its server is elsewhere,
    so this host's devices say nothing about it, and the worker's GPU-free checks pass at once). `detect` builds
    the detecting probe (default `farm.hardware.detect.probe_from_source`; tests pass fakes of the real tools).
    """
    declared = HardwareReport(hardware_id=profile.hardware.hardware_id, count=profile.hardware.count, declared=True)
    if profile.engine.kind == "sim" or profile.engine.stand_in:
        return SimulatedProbe(declared)
    if profile.engine.kind == "endpoint" or profile.hardware.source == "declared":
        return DeclaredProbe(declared)
    source = profile.hardware.source
    probe = (detect or _detect)(source, profile.hardware.restrict_to)
    found = probe.report()
    if found.hardware_id != declared.hardware_id or found.count < declared.count:
        raise ProfileError(
            f"{PROBE_NAMES.get(source, source)} found {found.count} x {found.hardware_id}; the profile declares "
            f"{declared.count} x {declared.hardware_id}",
            field="hardware",
        )
    return probe


def _detect(source: str, restrict_to: tuple[int | str, ...]) -> HardwareProbe:
    return probe_from_source(source, restrict_to=restrict_to)


def assigned_gpus(profile: WorkerProfile, probe: HardwareProbe, count: int) -> tuple[int, ...] | None:
    """The GPU indices an engine gets (CUDA_VISIBLE_DEVICES); None on the CPU class."""
    if profile.hardware.hardware_id == "cpu":
        return None
    indices = getattr(probe, "indices", None)
    if indices:
        return tuple(indices[:count])
    restricted = [int(i) for i in profile.hardware.restrict_to if isinstance(i, int) or str(i).isdigit()]
    return tuple((restricted or list(range(profile.hardware.count)))[:count])


def engine_policy(profile: WorkerProfile) -> EnginePolicy:
    section = profile.engine.policy
    specs, notes = _version_specs(profile)
    for name, path in section.host_spec_files().items():
        read = ENGINES[name].host_spec
        if read is None:
            raise ProfileError(f"{name} reads no argument list generated on a host", field="engine.policy")
        specs[name] = read(Path(path).expanduser())
        notes[name] = f"{name} {specs[name].version} from {specs[name].source}"
    return EnginePolicy(
        allow_trust_remote_code_models=frozenset(section.allow_trust_remote_code_models),
        allow_local_media=section.allow_local_media,
        allowed_extra_flags=frozenset(section.allowed_extra_flags),
        allowed_risky_flags=frozenset(section.allowed_risky_flags),
        allow_image_tags=section.allow_image_tags,
        allowed_images=frozenset(section.allowed_images),
        allowed_mount_sources=frozenset(section.allowed_mount_sources),
        mount_roots=dict(section.mount_roots),
        path_roots=section.path_roots if section.path_roots is not None else _host_roots(profile),
        specs=specs,
        spec_notes=notes,
    )


def engine_versions(profile: WorkerProfile) -> dict[str, str]:
    """The version of each engine this host runs, where it is known: its profile's `version`, else what its
    executable says when asked at start (the workers' rows carry these: submit judges against them)."""
    versions: dict[str, str] = {}
    engine = profile.engine
    for name in engine.runs():
        kind = ENGINES.get(name)
        if kind is None:
            continue
        try:
            section = engine.process_section(name)
        except ValueError:
            continue  # no process section: no worker of it here
        version = section.version
        if version is None and kind.read_version is not None and engine.kind == name:
            # what the host's executable says (a stand-in answers as the engine would, where it is told to)
            version = _read_version(kind.name, _expand(section.executable))
        if version is not None:
            versions[name] = version
    return versions


def _version_specs(profile: WorkerProfile) -> tuple[dict[str, ArgSpec], dict[str, str]]:
    """For each engine this host runs: the spec of the version it runs (its profile's `version`, else what its
    executable says when asked at start, else the newest shipped), and a line saying which and how it was known
    (for provenance, `engine.argument_spec`)."""
    specs: dict[str, ArgSpec] = {}
    notes: dict[str, str] = {}
    known = engine_versions(profile)
    for name in profile.engine.runs():
        kind = ENGINES.get(name)
        if kind is None:
            continue
        try:
            section = profile.engine.process_section(name)
        except ValueError:
            continue  # no process section: no worker of it here (its spec is the shipped default)
        version = known.get(name)
        specs[name], notes[name] = kind.spec_at(version)
        if version is not None and section.version is None:
            notes[name] += f"; {version} read from the executable at start"
    return specs, notes


@cache
def _read_version(engine: str, executable: tuple[str, ...]) -> str | None:
    """The version the host's executable says it is, asked once per worker process (read at start)."""
    read = ENGINES[engine].read_version
    return read(executable) if read is not None else None


def _host_roots(profile: WorkerProfile) -> tuple[str, ...]:
    """The default roots plus the directories of the models this host maps and its container cache."""
    roots = list(DEFAULT_PATH_ROOTS)
    engine = profile.engine
    sections = [engine.process_section(name) for name, kind in ENGINES.items() if kind.launchable]
    mapped = tuple(path for s in sections for path in s.model_paths.values())
    for path in mapped:
        expanded = os.path.expanduser(path)
        roots.append(expanded if os.path.isdir(expanded) else os.path.dirname(expanded))
    if profile.engine.container.model_cache:
        roots.append(profile.engine.container.model_cache)
    return tuple(dict.fromkeys(roots))


def default_engine_factory(
    recipe: Recipe, profile: WorkerProfile, port: int, log_path: Path, probe: HardwareProbe
) -> Engine:
    """The engine the profile names, for this recipe."""
    engine = profile.engine
    if engine.kind == "sim":
        return sim_engine(
            recipe,
            profile=engine.sim.profile,
            port=port,
            log_path=log_path,
            host=engine.host,
            overrides=engine.sim.overrides,
            faults=engine.sim.faults,
            stop_grace_s=engine.stop_grace_s,
        )
    wanted = canonical_engine_name(recipe.engine.name)
    if engine.kind == "endpoint" and engine.endpoint is not None:
        # Nothing is launched: the recipe's command is not run, only its model is asked for (under the
        # endpoint's name for it). The engines it serves are what the profile says.
        if wanted not in engine.runs():
            raise EngineError(
                f"this endpoint serves {', '.join(engine.runs())}; the recipe wants {recipe.engine.name!r}",
                failure_class=FailureClass.BAD_RECIPE,
            )
        return endpoint_engine(engine.endpoint, recipe.model_id, log_path=log_path)
    if wanted not in engine.runs():
        raise EngineError(
            f"this worker runs {', '.join(engine.runs())}; the recipe wants {recipe.engine.name!r}",
            failure_class=FailureClass.BAD_RECIPE,
        )
    gpus = assigned_gpus(profile, probe, recipe.hardware_count)
    policy = engine_policy(profile)
    if engine.kind.endswith(CONTAINER_KIND):
        # The recipe's own image through docker: the container adapter of the engine the kind names.
        image_kind = ENGINES.get(engine.kind.removesuffix(CONTAINER_KIND))
        if image_kind is None or image_kind.container_adapter is None:
            raise EngineError(f"no container adapter runs {engine.kind!r}", failure_class=FailureClass.BAD_RECIPE)
        if recipe.container is None:
            raise EngineError("the recipe has no container launch", failure_class=FailureClass.BAD_RECIPE)
        launch_container: Callable[..., Engine] = importlib.import_module(image_kind.container_adapter).launch_container
        return launch_container(
            recipe.container,
            name=f"farm-{profile.name}-{port}",
            gpus=gpus or (),
            host_port=port,
            log_path=log_path,
            served_model=recipe.model_id,
            model_cache=engine.container.model_cache,
            policy=policy,
            docker=engine.container.docker,
            stop_grace_s=engine.stop_grace_s,
            probe=probe,
            gpu_free_deadline_s=engine.gpu_free_deadline_s,
            device_count=recipe.hardware_count,
            cache_read_only=not engine.container.model_cache_writable,
        )
    kind = ENGINES.get(engine.kind)
    if kind is None or kind.adapter is None:
        raise EngineError(f"no adapter launches {engine.kind!r}", failure_class=FailureClass.BAD_RECIPE)
    # The engine's adapter (the module the table names) gets the judged command and the host's settings, and
    # renders that command after the host's executable.
    section = engine.process_section(kind.name)
    command = recipe_command(recipe, policy, resolve_links=True)
    model_path = section.model_paths.get(recipe.model_id)
    allowlist = section.env_allowlist if section.env_allowlist is not None else kind.host_env_allowlist
    extra_env = vllm_extra_env(section) if isinstance(section, VllmSection) else section.extra_env
    env = host_env(os.environ, allowlist, gpus, extra_env)
    env = {**recipe_environment(recipe, kind.name), **env}  # the host's settings win
    request = LaunchRequest(
        command=command,
        recipe=recipe,
        executable=_expand(section.executable),
        host=engine.host,
        port=port,
        served_model=recipe.model_id,
        model_path=os.path.expanduser(model_path) if model_path else None,
        log_path=log_path,
        env=env,
        run_dir=log_path.parent,
        extra_args=section.extra_args,
        stop_grace_s=engine.stop_grace_s,
        probe=None if engine.stand_in else probe,
        gpu_free_deadline_s=engine.gpu_free_deadline_s,
        simulated=engine.stand_in,
        # A draft model named by its file name is the host's file for that name.
        draft_paths=section.draft_paths,
    )
    launch: Callable[[LaunchRequest], Engine] = importlib.import_module(kind.adapter).launch
    return _judged_by(launch(request), policy, kind.name)


def vllm_extra_env(section: VllmSection) -> dict[str, str]:
    """The host's own variables for a vLLM process: its `extra_env`, and `VLLM_SERVER_DEV_MODE=1` where the profile
    turns `dev_mode_reset` on (the profile checked that vLLM then listens on loopback; farm/engines/vllm/cache.py)."""
    return {**section.extra_env, **({"VLLM_SERVER_DEV_MODE": "1"} if section.dev_mode_reset else {})}


def _judged_by(engine: Engine, policy: EnginePolicy, name: str) -> Engine:
    """The engine, told which spec judged its command (its provenance says so)."""
    if isinstance(engine, EngineProcess):
        engine.argument_spec = policy.spec_notes.get(name)
    return engine


def _expand(executable: Sequence[str]) -> tuple[str, ...]:
    first, *rest = executable
    return (os.path.expandvars(os.path.expanduser(first)), *rest)
