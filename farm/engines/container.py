"""A recipe's digest-pinned container launch: the exact `docker run`, judged for any engine with official images
(its table line's `images`: repositories, tag prefix, entrypoints, what the entrypoint runs). The Engine that
supervises it is the engine's container adapter (vLLM's: farm.engines.vllm.container).

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
from collections.abc import Mapping, Sequence
from dataclasses import replace

from farm.engines.base import EngineImages
from farm.engines.environment import check_recipe_environment
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, canonical_command, check_token
from farm.engines.readback import check_launch
from farm.engines.registry import engine_kind
from farm.errors import ArgumentPolicyError
from farm.logs import get_logger
from farm.recipes.model import ContainerLaunch

log = get_logger(__name__)

DEFAULT_CONTAINER_PORT = 8000
"""vllm/vllm-openai listens here unless the recipe says otherwise."""

CONTAINER_HF_CACHE = "/root/.cache/huggingface"
"""Where the vllm/vllm-openai image looks for the Hugging Face cache."""

DOCKER_CLIENT_ENV = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "XDG_RUNTIME_DIR")
"""What the docker client itself needs from the worker's environment."""

DOCKER_COMMAND_TIMEOUT_S = 60.0
"""`docker rm -f` and friends: seconds, unless the daemon hangs."""

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


def engine_images(engine: str) -> EngineImages:
    """The engine's own images, from its table line (`EngineKind.images`); none for an engine without."""
    images = engine_kind(engine).images
    return images if images is not None else EngineImages(repositories=())


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
    images = engine_images(engine)
    official, tag_prefix = images.repositories, images.tag_prefix
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


def container_env(container: ContainerLaunch, extra_env: Mapping[str, str], engine: str) -> list[str]:
    """`-e` values: the recipe's environment (allowlisted) as NAME=value, then the worker's own extra variables
    by name only (their values, secrets included, come from the client's environment)."""
    recipe_env = check_recipe_environment(dict(container.environment), engine)
    for name in extra_env:
        if not _ENV_NAME.match(name):
            raise _refuse(f"environment {name!r}", "not a valid variable name")
    values = [f"{name}={recipe_env[name]}" for name in sorted(recipe_env) if name not in extra_env]
    return values + sorted(extra_env)


def check_container_launch(
    container: ContainerLaunch, policy: EnginePolicy, *, engine: str, device_count: int | None = None
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
    engine: str,
    device_count: int | None = None,
    cache_read_only: bool = True,
) -> tuple[str, ...]:
    """The exact `docker run` of a recipe's container launch on this worker. The engine arguments are checked
    like a `vllm serve` argv; inside the container the server listens on 0.0.0.0 at the container port, which
    is published on `bind_host:host_port` only."""
    check_image(container.image, policy, engine)
    if not _CONTAINER_NAME.match(name):
        raise _refuse(repr(name), "not a valid container name")
    images = engine_images(engine)
    if container.entrypoint not in images.entrypoints:
        raise _refuse(repr(container.entrypoint), "a recipe may not replace the image's entrypoint")
    arguments = tuple(container.arguments)
    if images.subcommand and arguments[: len(images.subcommand)] == images.subcommand:
        # the registry writes the entrypoint's own subcommand (`serve`) before the server's arguments
        arguments = arguments[len(images.subcommand) :]
    launcher = engine_kind(engine).launcher  # the image's entrypoint runs this server
    runs = images.runs if images.runs is not None else launcher
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
