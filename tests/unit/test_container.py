"""The exact `docker run` of a recipe's container launch, and what the host policy refuses in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines.container import docker_run_argv
from farm.engines.policy import EnginePolicy
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
    """The seed's draft_launch becomes one exact docker run: its options, the worker's port on loopback, the
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
    )
    assert argv == (
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
        f"{home}/.cache/huggingface:/root/.cache/huggingface",
        "-e",
        "HF_TOKEN",
        seed.container.image,
        "--model",
        "deepseek-ai/DeepSeek-V4-Flash-0731",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "262144",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    )
    assert not any("hf_secret_value" in token for token in argv)


def test_model_cache_replaces_the_recipe_source(home: Path) -> None:
    """The worker's model cache is what gets mounted where the image expects the Hugging Face cache."""
    argv = docker_run_argv(launch(), gpus=[0], host_port=1, name="n", model_cache="/srv/hf", extra_env={})
    assert argv[argv.index("-v") + 1] == "/srv/hf:/root/.cache/huggingface"
    assert argv[argv.index("--gpus") + 1] == '"device=0"'


def test_model_cache_added_when_the_recipe_mounts_none(home: Path) -> None:
    """A recipe without mounts still gets the worker's model cache."""
    argv = docker_run_argv(launch(mounts=()), gpus=[], host_port=1, name="n", model_cache="/srv/hf", extra_env={})
    assert "/srv/hf:/root/.cache/huggingface" in argv
    assert "--gpus" not in argv


def test_recipe_environment_goes_by_name(home: Path) -> None:
    """The recipe's own environment is passed with -e NAME as well; values travel in the client's env."""
    argv = docker_run_argv(
        launch(environment={"VLLM_USE_V1": "1"}), gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}
    )
    assert argv[argv.index("-e") + 1] == "VLLM_USE_V1"
    assert "VLLM_USE_V1=1" not in argv


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"image": "vllm/vllm-openai:latest"}, "pinned by digest"),
        ({"image": "--privileged"}, "pinned by digest"),
        ({"entrypoint": "bash"}, "entrypoint"),
        ({"ipc": "container:other"}, "ipc"),
        ({"shm_size": "16g --privileged"}, "shm_size"),
        ({"mounts": (Mount(source="/etc", target="/etc"),)}, "does not allow mounting"),
        ({"mounts": (Mount(source="/", target="/root/.cache/huggingface"),)}, "worker's own cache"),
        ({"arguments": ("--trust-remote-code",)}, "trust-remote-code"),
        ({"arguments": ("--uds", "/s")}, "Unix socket"),
        ({"environment": {"LD_PRELOAD": "/x.so"}}, "may not set"),
        ({"environment": {"A": "$(id)"}}, "command substitution"),
    ],
)
def test_refused(home: Path, fields: dict[str, object], why: str) -> None:
    """Tags, entrypoints, foreign IPC, odd sizes, unlisted mounts and refused arguments are policy errors."""
    with pytest.raises(ArgumentPolicyError, match=why):
        docker_run_argv(launch(**fields), gpus=[0], host_port=1, name="n", model_cache=None, extra_env={})


def test_bad_container_name_is_refused(home: Path) -> None:
    """The container name is one token Docker accepts, never an option."""
    with pytest.raises(ArgumentPolicyError, match="container name"):
        docker_run_argv(launch(), gpus=[0], host_port=1, name="--rm", model_cache=None, extra_env={})


def test_policy_opens_tags_and_mounts(home: Path) -> None:
    """A host may allow tagged images and name extra mount sources."""
    policy = EnginePolicy(allow_image_tags=True, allowed_mount_sources=frozenset({"~/data"}))
    container = launch(
        image="vllm/vllm-openai:v0.32.0",
        mounts=(Mount(source="~/data", target="/data", read_only=True),),
    )
    argv = docker_run_argv(container, gpus=[0], host_port=1, name="n", model_cache=None, extra_env={}, policy=policy)
    assert "vllm/vllm-openai:v0.32.0" in argv
    assert f"{home}/data:/data:ro" in argv
