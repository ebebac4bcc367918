"""The exact `docker run` of a recipe's container launch, and what the host policy refuses in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines.container import docker_run_argv
from farm.engines.policy import EnginePolicy, canonical_command
from farm.engines.vllm.container import ContainerEngine
from farm.errors import ArgumentPolicyError
from farm.recipes.model import ContainerLaunch, Mount
from farm.recipes.parse import load_recipe

SEED_REGISTRY = Path(__file__).resolve().parents[1] / "fixtures" / "001_5d0dc33ac7ff8823.txt"
DIGEST = "sha256:" + "0a" * 32
IMAGE = f"vllm/vllm-openai@{DIGEST}"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A HOME of the test's own, so `~` expands to a known place."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def launch(**fields: object) -> ContainerLaunch:
    """A container launch with the seed's shape; fields override."""
    base: dict[str, object] = {
        "image": IMAGE,
        "arguments": ("--model", "org/m", "--tensor-parallel-size", "2", "--host", "0.0.0.0", "--port", "8000"),
        "ipc": "host",
        "shm_size": "16g",
        "mounts": (Mount(source="~/.cache/huggingface", target="/root/.cache/huggingface"),),
        "container_port": 8000,
        "host_port": 8000,
    }
    base.update(fields)
    return ContainerLaunch.model_validate(base)


def test_the_seed_launch(home: Path) -> None:
    """The seed's container runs the seed's own command (its observed command, not the shorter draft the registry
    synthesized from it) as one exact docker run: the draft's image and options, the worker's port on loopback, the
    GPUs quoted for Docker's CSV parser, secrets by name only, and the engine listening inside on 0.0.0.0."""
    seed = load_recipe(SEED_REGISTRY)
    assert seed.container is not None
    argv = docker_run_argv(
        seed.container,
        gpus=[0, 1],
        host_port=41234,
        name="farm-job-1",
        model_cache=None,
        extra_env={"HF_TOKEN": "hf_secret_value"},
        engine="vllm",
    )
    head = (
        "docker",
        "run",
        "--rm",
        "--name",
        "farm-job-1",
        "--ipc",
        "host",
        "--shm-size",
        "16g",
        "--gpus",
        '"device=0,1"',
        "-p",
        "127.0.0.1:41234:8000",
        "-v",
        f"{home}/.cache/huggingface:/root/.cache/huggingface:ro",
        "-e",
        "HF_TOKEN",
        seed.container.image,
    )
    assert argv[: len(head)] == head
    judged = canonical_command(seed.argv, "vllm")
    assert argv[len(head) :] == (
        "--model",
        "deepseek-ai/DeepSeek-V4-Flash-0731",
        *judged.render_options(),
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    )
    assert '{"method":"dspark","num_speculative_tokens":5,"draft_sample_method":"probabilistic"}' in argv
    assert not any("hf_secret_value" in token for token in argv)


def test_model_cache_replaces_the_recipe_source(home: Path) -> None:
    """The worker's model cache is what gets mounted where the image expects the Hugging Face cache."""
    argv = docker_run_argv(
        launch(), gpus=[0], host_port=1, name="n", model_cache="/srv/hf", extra_env={}, engine="vllm"
    )
    assert argv[argv.index("-v") + 1] == "/srv/hf:/root/.cache/huggingface:ro"
    assert argv[argv.index("--gpus") + 1] == '"device=0"'


def test_model_cache_added_when_the_recipe_mounts_none(home: Path) -> None:
    """A recipe without mounts still gets the worker's model cache."""
    argv = docker_run_argv(
        launch(mounts=()), gpus=[], host_port=1, name="n", model_cache="/srv/hf", extra_env={}, engine="vllm"
    )
    assert "/srv/hf:/root/.cache/huggingface:ro" in argv
    assert "--gpus" not in argv


def test_a_recipes_credentials_never_reach_the_container(home: Path) -> None:
    """HF_TOKEN in a recipe's container environment is dropped; the host's own token goes by name only."""
    container = launch(environment={"HF_TOKEN": "hf_from_the_recipe", "VLLM_USE_V1": "1"})
    argv = docker_run_argv(
        container, gpus=[0], host_port=1, name="n", model_cache=None, extra_env={"HF_TOKEN": "x"}, engine="vllm"
    )
    assert "VLLM_USE_V1=1" in argv
    assert not any("hf_from_the_recipe" in token for token in argv)
    assert argv[argv.index("VLLM_USE_V1=1") + 2] == "HF_TOKEN"


def test_the_registrys_serve_subcommand_is_not_doubled(home: Path) -> None:
    """The registry's draft_launch names the image's `vllm` entrypoint and starts its arguments with `serve`: the
    container gets the model once, never `serve serve`."""
    container = launch(entrypoint="vllm", arguments=("serve", "--model", "org/m", "--max-model-len", "8"))
    argv = docker_run_argv(container, gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}, engine="vllm")
    tail = argv[argv.index(IMAGE) + 1 :]
    assert tail == ("--model", "org/m", "--max-model-len", "8", "--host", "0.0.0.0", "--port", "8000")


def test_a_writable_cache_only_when_the_host_says_so(home: Path) -> None:
    """The model cache is read-only by default; a profile that lets the engine download makes it writable."""
    argv = docker_run_argv(
        launch(mounts=()),
        gpus=[],
        host_port=1,
        name="n",
        model_cache="/srv/hf",
        extra_env={},
        cache_read_only=False,
        engine="vllm",
    )
    assert "/srv/hf:/root/.cache/huggingface" in argv


def test_recipe_environment_goes_to_the_container_only(home: Path, tmp_path: Path) -> None:
    """The recipe's allowlisted environment is passed as -e NAME=value to the container; the docker client's
    own environment holds only the worker's docker settings and its own extra variables, never the recipe's."""
    container = launch(environment={"VLLM_USE_V1": "1", "NCCL_DEBUG": "INFO"})
    argv = docker_run_argv(container, gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}, engine="vllm")
    assert "VLLM_USE_V1=1" in argv
    assert "NCCL_DEBUG=INFO" in argv
    engine = ContainerEngine(
        container,
        name="n",
        gpus=[0],
        host_port=1,
        log_path=tmp_path / "log",
        served_model="org/m",
        extra_env={"HF_TOKEN": "hf_host_secret"},
        base_env={"PATH": "/bin", "DOCKER_HOST": "unix:///run/docker.sock", "LD_AUDIT": "/x.so", "OTHER": "1"},
    )
    assert engine.environment == {
        "PATH": "/bin",
        "DOCKER_HOST": "unix:///run/docker.sock",
        "HF_TOKEN": "hf_host_secret",
    }
    assert "HF_TOKEN" in engine.argv
    assert not any("hf_host_secret" in token for token in engine.argv)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"image": "vllm/vllm-openai:latest"}, "pinned by digest"),
        ({"image": "--privileged"}, "not an image reference"),
        ({"entrypoint": "bash"}, "entrypoint"),
        ({"ipc": "container:other"}, "ipc"),
        ({"shm_size": "16g --privileged"}, "shm_size"),
        ({"mounts": (Mount(source="/etc", target="/etc"),)}, "the only mount is the model cache"),
        ({"mounts": (Mount(source="/", target="/root/.cache/huggingface"),)}, "worker's own cache"),
        ({"arguments": ("--model", "org/m", "--trust-remote-code")}, "trust list"),
        ({"arguments": ("--uds", "/s")}, "Unix socket"),
        ({"environment": {"LD_PRELOAD": "/x.so"}}, "loads code"),
        ({"environment": {"LD_AUDIT": "/x.so"}}, "loads code"),
        ({"environment": {"DOCKER_HOST": "tcp://evil:2375"}}, "listens or connects"),
        ({"environment": {"DOCKER_CONFIG": "/tmp/cfg"}}, "not on the farm's list"),
        ({"environment": {"HTTPS_PROXY": "http://evil:3128"}}, "listens or connects"),
        ({"environment": {"PYTHONPATH": "/tmp/evil"}}, "loads code"),
        ({"environment": {"VLLM_PLUGINS": "evil"}}, "loads code"),
        ({"environment": {"VLLM_HOST_IP": "0.0.0.0"}}, "listens or connects"),
        ({"environment": {"LLAMA_ARG_MODEL": "/etc/passwd"}}, "past the argument policy"),
        ({"environment": {"VLLM_CPU_KVCACHE_SPACE": "$(id)"}}, "plain text"),
        ({"container_port": -5}, "not a port"),
        ({"container_port": 70000}, "not a port"),
    ],
)
def test_refused(home: Path, fields: dict[str, object], why: str) -> None:
    """Tags, entrypoints, foreign IPC, odd sizes, unlisted mounts and refused arguments are policy errors."""
    with pytest.raises(ArgumentPolicyError, match=why):
        docker_run_argv(
            launch(**fields), gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}, engine="vllm"
        )


def test_bad_container_name_is_refused(home: Path) -> None:
    """The container name is one token Docker accepts, never an option."""
    with pytest.raises(ArgumentPolicyError, match="container name"):
        docker_run_argv(launch(), gpus=[0], host_port=1, name="--rm", model_cache=None, extra_env={}, engine="vllm")


def test_policy_opens_tags_and_mounts(home: Path) -> None:
    """A host may allow tagged images and name extra mount sources."""
    policy = EnginePolicy(allow_image_tags=True, allowed_mount_sources=frozenset({"~/data"}))
    container = launch(
        image="vllm/vllm-openai:v0.32.0",
        mounts=(Mount(source="~/data", target="/data", read_only=True),),
    )
    argv = docker_run_argv(
        container, gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy, engine="vllm"
    )
    assert "vllm/vllm-openai:v0.32.0" in argv
    assert f"{home}/data:/data:ro" in argv


def test_registry_mount_roots_are_the_hosts_own(home: Path) -> None:
    """`${MODEL_ROOT}/m` is the registry's placeholder for a host's model directory: the host's profile says what
    it is, and it is mounted read-only under a data directory. `${CACHE_ROOT}/vllm` is the author's cache: not
    mounted (a cache shared across jobs would let one job's compiled code run in the next)."""
    mounts = (
        Mount(source="${CACHE_ROOT}/vllm", target="/root/.cache/vllm"),
        Mount(source="${MODEL_ROOT}/qwen38", target="/models"),
    )
    roots = EnginePolicy(mount_roots={"CACHE_ROOT": "/srv/cache", "MODEL_ROOT": "~/models"})
    argv = docker_run_argv(
        launch(mounts=mounts),
        gpus=[],
        host_port=1,
        name="n",
        model_cache="/srv/hf",
        extra_env={},
        policy=roots,
        engine="vllm",
    )
    volumes = [argv[i + 1] for i, token in enumerate(argv) if token == "-v"]
    assert volumes == [f"{home}/models/qwen38:/models:ro", "/srv/hf:/root/.cache/huggingface:ro"]
    for source, target, phrase in (
        ("${MODEL_ROOT}/../../etc", "/models", "climb out"),
        ("${HOME}/x", "/models", "does not know"),
        ("${MODEL_ROOT}/m", "/etc/ld.so.preload", "only under /model"),
        ("${MODEL_ROOT}/m", "/app/llama-server", "only under /model"),
        ("${MODEL_ROOT}/m", "/models/../etc", "only under /model"),
    ):
        policy = EnginePolicy(mount_roots={"MODEL_ROOT": "/srv/models"})
        with pytest.raises(ArgumentPolicyError, match=phrase):
            docker_run_argv(
                launch(mounts=(Mount(source=source, target=target),)),
                gpus=[], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy, engine="vllm",
            )  # fmt: skip
    with pytest.raises(ArgumentPolicyError, match="names no MODEL_ROOT"):
        docker_run_argv(
            launch(mounts=(Mount(source="${MODEL_ROOT}/m", target="/models"),)),
            gpus=[], host_port=1, name="n", model_cache=None, extra_env={}, policy=EnginePolicy(), engine="vllm",
        )  # fmt: skip


def test_a_link_under_a_mount_root_does_not_carry_the_mount_out(tmp_path: Path) -> None:
    """A model root may hold a link (`evil -> /etc`): the mount is judged where it really leads."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "evil").symlink_to("/etc")
    (models / "m").mkdir()
    policy = EnginePolicy(mount_roots={"MODEL_ROOT": str(models)})
    with pytest.raises(ArgumentPolicyError, match="outside this host's MODEL_ROOT"):
        docker_run_argv(
            launch(mounts=(Mount(source="${MODEL_ROOT}/evil", target="/models"),)),
            gpus=[], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy, engine="vllm",
        )  # fmt: skip
    argv = docker_run_argv(
        launch(mounts=(Mount(source="${MODEL_ROOT}/m", target="/models"),)),
        gpus=[], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy, engine="vllm",
    )  # fmt: skip
    assert f"{models}/m:/models:ro" in argv


def test_an_allowed_mount_still_lands_in_a_data_directory() -> None:
    """Even a source the host allows is never mounted over the image's own files."""
    policy = EnginePolicy(allowed_mount_sources=frozenset({"/srv/assets"}))
    with pytest.raises(ArgumentPolicyError, match="only under /model"):
        docker_run_argv(
            launch(mounts=(Mount(source="/srv/assets", target="/usr/lib/x"),)),
            gpus=[], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy, engine="vllm",
        )  # fmt: skip
