"""vLLM in the recipe's digest-pinned container: the exact `docker run`, and its lifecycle as an Engine.

`docker run` runs in the foreground as the supervised process (an EngineProcess: its own process group, its
output is the engine log, its exit ends the readiness wait). Stopping asks Docker first (`docker stop -t
GRACE`, then `docker rm -f`), because signalling the client alone may leave the container running; a stale
container of the same name (a worker that died) is removed before the start.

The recipe's environment is an allowlist (farm.engines.environment) and goes to the container only, as
`-e NAME=value`: the docker client itself runs with the worker's own DOCKER_* settings and PATH/HOME, never with
a recipe's variables (a recipe's DOCKER_HOST, LD_AUDIT or HTTPS_PROXY would steer the client). The host's own
secrets (the profile's extra_env) go by name only (`-e HF_TOKEN`): Docker reads the value from the client's
environment, so no secret is ever in the argv that provenance stores. The published port is bound to 127.0.0.1.
The only mount is the model cache, read-only unless the host's profile makes it writable; the engine arguments
are the canonical command of the recipe's engine, judged like a process launch.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from farm.engines.environment import check_recipe_environment
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, canonical_command, check_token
from farm.engines.process import GPU_FREE_DEADLINE_S
from farm.engines.reparse import check_launch
from farm.engines.vllm.process import VllmEngineProcess
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import HardwareProbe
from farm.logs import get_logger
from farm.private_files import open_private
from farm.recipes.model import ENGINE_LAUNCHERS, ContainerLaunch

log = get_logger(__name__)

DEFAULT_CONTAINER_PORT = 8000
"""vllm/vllm-openai listens here unless the recipe says otherwise."""

CONTAINER_HF_CACHE = "/root/.cache/huggingface"
"""Where the vllm/vllm-openai image looks for the Hugging Face cache."""

DOCKER_CLIENT_ENV = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "XDG_RUNTIME_DIR")
"""What the docker client itself needs from the worker's environment."""

DOCKER_COMMAND_TIMEOUT_S = 60.0
"""`docker rm -f` and friends: seconds, unless the daemon hangs."""

IMAGE_ENTRYPOINTS = (None, "vllm")
"""What a recipe may say the image's entrypoint is: the image's own (`vllm`, whose `serve` the image runs)."""

ENGINE_IMAGE_ENTRYPOINTS: dict[str, tuple[str | None, ...]] = {
    "vllm": IMAGE_ENTRYPOINTS,
    "llama.cpp": (None, "/app/llama-server", "llama-server"),
    "tabbyapi": (None, "python3", "/opt/venv/bin/python3"),
}
"""Per engine, the entrypoints a recipe may name: the engine's official image's own (ghcr.io/ggml-org/llama.cpp
`:server` images start `/app/llama-server`). The farm never passes `--entrypoint`: the image runs its own, and the
recipe's arguments are judged as that server's. TabbyAPI's images (theroyallab/tabbyAPI docker/Dockerfile) run
`python3` from their venv, and their arguments start with `main.py` (IMAGE_RUNS)."""

IMAGE_RUNS: dict[str, tuple[str, ...]] = {"tabbyapi": ("python",)}
"""The part of an engine's launcher its image's entrypoint is, where that is not the whole launcher: the rest of
the launcher (TabbyAPI's `main.py`) leads the container's arguments. A TabbyAPI container is judged at submit
only: no worker runs TabbyAPI, and a launcher for it must write the judged config document to a file it mounts,
with its own listen address in it (TabbyAPI ignores its command line once it has a config)."""

ALLOWED_IPC = frozenset({"host", "private", "shareable"})
"""IPC modes a recipe may ask for (vLLM's tensor-parallel workers want `host`); never another container's."""

_DIGEST_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[\w.-]+)?@sha256:[0-9a-f]{64}$")
_TAGGED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*$")
_CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHM_SIZE = re.compile(r"^\d+[bkmgBKMG]?$")


def _refuse(what: str, why: str) -> ArgumentPolicyError:
    return ArgumentPolicyError(f"{what}: {why}", field="container")


_REFERENCE = re.compile(r"^(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[\w.-]+))?(?:@sha256:[0-9a-f]{64})?$")
_DOCKER_HUB = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def official_images(engine: str) -> tuple[tuple[str, ...], str]:
    """The engine's own image repositories (its home holds them), and the tag prefix an image from them needs."""
    if engine == "vllm":
        from farm.engines.vllm.spec import OFFICIAL_IMAGES as VLLM

        return VLLM, ""
    if engine == "sglang":
        from farm.engines.sglang.spec import OFFICIAL_IMAGES as SGLANG

        return SGLANG, ""
    if engine == "llama.cpp":
        from farm.engines.llamacpp.adapter import IMAGE_TAG_PREFIX
        from farm.engines.llamacpp.adapter import OFFICIAL_IMAGES as LLAMACPP

        return LLAMACPP, IMAGE_TAG_PREFIX
    if engine == "tabbyapi":
        from farm.engines.tabbyapi.spec import OFFICIAL_IMAGES as TABBYAPI

        return TABBYAPI, ""
    if engine == "ollama":
        from farm.engines.ollama.spec import OFFICIAL_IMAGES as OLLAMA

        return OLLAMA, ""
    return (), ""


def image_repository(image: str) -> tuple[str, str | None]:
    """An image reference's repository (Docker Hub's spellings as one) and its tag; ArgumentPolicyError when it
    is no image reference."""
    match = _REFERENCE.match(image)
    if match is None:
        raise _refuse(repr(image), "not an image reference (registry/name[:tag]@sha256:<64 hex>)")
    repository = match.group("repository")
    for hub in _DOCKER_HUB:
        repository = repository.removeprefix(hub)
    return repository, match.group("tag")


def check_image(image: str, policy: EnginePolicy, engine: str) -> None:
    """The image must come from the engine's official repositories or this host's own list
    (`engine.policy.allowed_images`), and be pinned by digest unless the host allows tags."""
    repository, tag = image_repository(image)
    official, tag_prefix = official_images(engine)
    if repository in policy.allowed_images:
        pass
    elif repository in official:
        if tag_prefix and not (tag or "").startswith(tag_prefix):
            raise _refuse(
                repr(image),
                f"from {repository}, only the {tag_prefix!r} tags run {engine}'s server: name the tag beside the "
                "digest",
            )
    else:
        listed = ", ".join([*official, *sorted(policy.allowed_images)]) or "none"
        raise _refuse(
            repr(image),
            f"not an image of {engine}'s official repositories nor of this host's list (engine.policy.allowed_images)"
            f": {listed}. What another image's entrypoint runs is not the judged server",
        )
    if _DIGEST_IMAGE.match(image):
        return
    if policy.allow_image_tags and _TAGGED_IMAGE.match(image):
        return
    raise _refuse(repr(image), "the image must be pinned by digest (name@sha256:...); this host allows no tags")


def _volume(source: str, target: str, read_only: bool) -> str:
    for path in (source, target):
        check_token(path)
        if not path.startswith("/") or ":" in path or "," in path:
            raise _refuse(repr(path), "a mount path must be absolute, without ':' or ','")
    return f"{source}:{target}" + (":ro" if read_only else "")


MOUNT_ROOTS = ("MODEL_ROOT", "CACHE_ROOT")
"""The registry's placeholders for a host's own directories in a mount source (`${MODEL_ROOT}/qwen38-b70`,
`${CACHE_ROOT}/vllm`). The host says what MODEL_ROOT is (profile `engine.policy.mount_roots`), mounted read-only.
A CACHE_ROOT mount is the author's cache of compiled kernels and the like: it is not mounted, and the container
starts with an empty one of its own (a cache shared across jobs would let one job's compiled code run in the
next)."""

DATA_TARGETS = ("/model", "/models", "/workspace", "/data", "/mnt")
"""Where a mount other than the model cache may appear inside the container: data directories, never over the
image's own system or engine files (a file mounted over /etc/ld.so.preload or the server binary would be code)."""
_ROOTED = re.compile(r"^\$\{(?P<root>[A-Z_]+)\}(?P<rest>(?:/[^/]+)*)/?$")


def _under_root(source: str, policy: EnginePolicy) -> tuple[str, str] | None:
    """A `${ROOT}/sub/dir` mount source as the host directory it stands for, and the root's name; None when the
    source names no root. Refused: a root the registry does not define, one this host does not name, or a path
    that climbs out of it."""
    found = _ROOTED.match(source)
    if found is None:
        if source.startswith("${"):
            raise _refuse(repr(source), f"a mount placeholder the farm does not know (known: {', '.join(MOUNT_ROOTS)})")
        return None
    root, rest = found["root"], found["rest"]
    if root not in MOUNT_ROOTS:
        raise _refuse(repr(source), f"a mount placeholder the farm does not know (known: {', '.join(MOUNT_ROOTS)})")
    if any(part in ("..", ".") for part in rest.split("/")):
        raise _refuse(repr(source), "a mount under a root may not climb out of it")
    base = policy.mount_roots.get(root)
    if base is None:
        raise _refuse(
            repr(source), f"this host names no {root} (worker profile engine.policy.mount_roots) for the mount"
        )
    base_path = os.path.realpath(os.path.expanduser(base))
    resolved = os.path.realpath(base_path + rest)
    if resolved != base_path and not resolved.startswith(base_path + os.sep):
        # A link under a writable root (a cache an earlier container wrote) must not carry a mount elsewhere.
        raise _refuse(repr(source), f"resolves to {resolved!r}, outside this host's {root}")
    return resolved, root


def _check_data_target(target: str) -> None:
    parts = target.split("/")
    if ".." in parts or not any(target == t or target.startswith(t + "/") for t in DATA_TARGETS):
        raise _refuse(repr(target), f"a mount may appear only under {', '.join(DATA_TARGETS)} inside the container")


def _mounts(
    container: ContainerLaunch, model_cache: str | None, policy: EnginePolicy, cache_read_only: bool = True
) -> list[str]:
    """`-v` values: the model cache where the image expects it (read-only unless the host says otherwise), and
    any mount the policy allows."""
    default_cache = os.path.expanduser("~/.cache/huggingface")
    allowed = {os.path.expanduser(p) for p in policy.allowed_mount_sources}
    volumes: list[str] = []
    cache_mounted = False
    for mount in container.mounts:
        at_cache = mount.target.rstrip("/").endswith("/.cache/huggingface")
        rooted = _under_root(mount.source, policy)
        if rooted is not None:
            source, root = rooted
            if root == "CACHE_ROOT" or at_cache:
                continue  # the author's cache: the container gets its own (the worker's model cache, below)
            _check_data_target(mount.target)
            volumes.append(_volume(source, mount.target, True))
            continue
        source = os.path.expanduser(mount.source)
        if at_cache:
            if model_cache is not None:
                source = model_cache
            elif source != default_cache and source not in allowed:
                raise _refuse(repr(mount.source), "the model cache mount must be the worker's own cache")
            cache_mounted = True
            volumes.append(_volume(source, mount.target, mount.read_only or cache_read_only))
            continue
        elif source not in allowed:
            raise _refuse(repr(mount.source), "the only mount is the model cache; this host's profile allows no other")
        _check_data_target(mount.target)
        volumes.append(_volume(source, mount.target, mount.read_only))
    if model_cache is not None and not cache_mounted:
        volumes.append(_volume(model_cache, CONTAINER_HF_CACHE, cache_read_only))
    return volumes


def container_env(container: ContainerLaunch, extra_env: Mapping[str, str], engine: str = "vllm") -> list[str]:
    """`-e` values: the recipe's environment (allowlisted) as NAME=value, then the worker's own extra variables
    by name only (their values, secrets included, come from the client's environment)."""
    recipe_env = check_recipe_environment(dict(container.environment), engine)
    for name in extra_env:
        if not _ENV_NAME.match(name):
            raise _refuse(f"environment {name!r}", "not a valid variable name")
    values = [f"{name}={recipe_env[name]}" for name in sorted(recipe_env) if name not in extra_env]
    return values + sorted(extra_env)


def check_container_launch(
    container: ContainerLaunch, policy: EnginePolicy, *, engine: str = "vllm", device_count: int | None = None
) -> None:
    """What can be judged of a container launch without a worker (at submit): its environment, its ports, its
    entrypoint, its engine arguments and that its image is an image reference. The image's repository (the engine's
    official ones or the host's own list), its pin and the mounts depend on the host and are judged there: a
    recipe whose image no host lists still runs as a process on the engine's workers (its argv)."""
    repository, _ = image_repository(container.image)
    docker_run_argv(
        container,
        gpus=(),
        host_port=1,
        name="farm-submit-check",
        model_cache="/models",
        extra_env={},
        policy=replace(
            policy,
            allow_image_tags=True,
            allowed_images=frozenset({repository}),
            allowed_mount_sources=_all_sources(container),
            mount_roots={root: f"/{root.lower()}" for root in MOUNT_ROOTS},
        ),
        engine=engine,
        device_count=device_count,
    )


def _all_sources(container: ContainerLaunch) -> frozenset[str]:
    return frozenset(os.path.expanduser(m.source) for m in container.mounts)


def container_path_roots(container: ContainerLaunch, roots: Sequence[str]) -> tuple[str, ...]:
    """Where the engine's arguments may name files inside the container: the host's roots, the container's model
    cache, and the targets of its read-only mounts (each mount's source and target are judged on the host:
    _mounts). A writable mount is no root: what one job writes there must not be what the engine loads."""
    targets = [
        mount.target
        for mount in container.mounts
        if (mount.read_only or mount.source.startswith("${MODEL_ROOT}")) and mount.target.startswith("/")
    ]
    return tuple(dict.fromkeys((*roots, CONTAINER_HF_CACHE, *targets)))


def docker_run_argv(
    container: ContainerLaunch,
    *,
    gpus: Sequence[int],
    host_port: int,
    name: str,
    model_cache: str | None,
    extra_env: Mapping[str, str],
    policy: EnginePolicy = DEFAULT_POLICY,
    docker: str = "docker",
    bind_host: str = "127.0.0.1",
    engine: str = "vllm",
    device_count: int | None = None,
    cache_read_only: bool = True,
) -> tuple[str, ...]:
    """The exact `docker run` of a recipe's container launch on this worker. The engine arguments are checked
    like a `vllm serve` argv; inside the container the server listens on 0.0.0.0 at the container port, which
    is published on `bind_host:host_port` only."""
    check_image(container.image, policy, engine)
    if not _CONTAINER_NAME.match(name):
        raise _refuse(repr(name), "not a valid container name")
    if container.entrypoint not in ENGINE_IMAGE_ENTRYPOINTS.get(engine, (None,)):
        raise _refuse(repr(container.entrypoint), "a recipe may not replace the image's entrypoint")
    arguments = tuple(container.arguments)
    if engine == "vllm" and arguments[:1] == ("serve",):  # the registry writes the `vllm` entrypoint's subcommand
        arguments = arguments[1:]
    launcher = ENGINE_LAUNCHERS.get(engine, ENGINE_LAUNCHERS["vllm"])  # the image's entrypoint runs this server
    runs = IMAGE_RUNS.get(engine, launcher)
    inside = replace(policy, path_roots=container_path_roots(container, policy.path_roots))
    command = canonical_command((*runs, *arguments), engine, inside, device_count=device_count)
    container_port = container.container_port if container.container_port is not None else DEFAULT_CONTAINER_PORT
    if isinstance(container_port, bool) or not 1 <= container_port <= 65535:
        raise _refuse(f"container_port {container_port!r}", "not a port (1-65535)")
    argv = [docker, "run", "--rm", "--name", name]
    if container.ipc is not None:
        if container.ipc not in ALLOWED_IPC:
            raise _refuse(f"ipc {container.ipc!r}", f"not one of {', '.join(sorted(ALLOWED_IPC))}")
        argv += ["--ipc", container.ipc]
    if container.shm_size is not None:
        if not _SHM_SIZE.match(container.shm_size):
            raise _refuse(f"shm_size {container.shm_size!r}", "not a size such as 16g")
        argv += ["--shm-size", container.shm_size]
    if gpus:
        # Docker splits --gpus on commas unless the device list is quoted inside the value.
        argv += ["--gpus", '"device=' + ",".join(str(g) for g in gpus) + '"']
    argv += ["-p", f"{bind_host}:{host_port}:{container_port}"]
    for volume in _mounts(container, model_cache, policy, cache_read_only):
        argv += ["-v", volume]
    for env_value in container_env(container, extra_env, engine):
        argv += ["-e", env_value]
    argv.append(container.image)
    argv += launcher[len(runs) :]
    kept = command.without("--host", "--port")
    engine_args: list[str] = []
    if kept.model is not None:
        engine_args += [kept.spec.model_option or "--model", kept.model]
    engine_args += kept.render_options()
    listen = ("--host", "0.0.0.0", "--port", str(container_port))
    # what the image's server will read: the judged options and model, and the container's own listen address
    check_launch(kept, (*engine_args, *listen), model=kept.model, worker_tokens=listen)
    return (*argv, *engine_args, *listen)


class ContainerEngine(VllmEngineProcess):
    """The recipe's container as an Engine: foreground `docker run` supervised like a process."""

    def __init__(
        self,
        container: ContainerLaunch,
        *,
        name: str,
        gpus: Sequence[int],
        host_port: int,
        log_path: Path,
        served_model: str,
        model_cache: str | None = None,
        extra_env: Mapping[str, str] = {},
        base_env: Mapping[str, str] | None = None,
        policy: EnginePolicy = DEFAULT_POLICY,
        docker: str = "docker",
        stop_grace_s: float = 30.0,
        probe: HardwareProbe | None = None,
        gpu_free_deadline_s: float = GPU_FREE_DEADLINE_S,
        device_count: int | None = None,
        cache_read_only: bool = True,
    ) -> None:
        argv = docker_run_argv(
            container,
            gpus=gpus,
            host_port=host_port,
            name=name,
            model_cache=model_cache,
            extra_env=extra_env,
            policy=policy,
            docker=docker,
            device_count=device_count,
            cache_read_only=cache_read_only,
        )
        source = os.environ if base_env is None else base_env
        env = {k: v for k, v in source.items() if k in DOCKER_CLIENT_ENV}
        env.update(extra_env)  # the host's own variables, passed by name; never the recipe's
        super().__init__(
            argv,
            env=env,
            log_path=log_path,
            base_url=f"http://127.0.0.1:{host_port}",
            served_model=served_model,
            stop_grace_s=stop_grace_s,
            probe=probe,
            gpu_free_deadline_s=gpu_free_deadline_s,
        )
        self._name = name
        self._docker = docker
        self._image_digest = container.digest

    @property
    def container_name(self) -> str:
        return self._name

    @property
    def image_digest(self) -> str | None:
        return self._image_digest

    def start(self) -> None:
        """Remove a stale container of the same name (a worker that died mid-run), then `docker run`."""
        self._docker_command("rm", "-f", self._name)
        super().start()

    def _before_group_stop(self) -> None:
        grace = max(0, round(self._stop_grace_s))
        self._docker_command("stop", "-t", str(grace), self._name, timeout_s=grace + DOCKER_COMMAND_TIMEOUT_S)
        self._docker_command("rm", "-f", self._name)

    def _docker_command(self, *args: str, timeout_s: float = DOCKER_COMMAND_TIMEOUT_S) -> int | None:
        """Run one docker command, appending its output to the engine log; its failure is logged, not raised
        (a container that is already gone is the usual case)."""
        argv = (self._docker, *args)
        try:
            with open_private(self.log_path) as log_file:
                done = subprocess.run(
                    argv,
                    env=self.environment,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    check=False,
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("docker.command_failed", argv=list(argv), error=str(exc))
            return None
        if done.returncode != 0:
            log.info("docker.command_status", argv=list(argv), status=done.returncode)
        return done.returncode
