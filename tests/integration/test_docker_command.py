"""The container lifecycle against a stand-in `docker` on PATH that records its calls and plays the server."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from farm.domain import FailureClass
from farm.engines.container import docker_run_argv
from farm.engines.process import group_alive
from farm.engines.vllm.container import ContainerEngine
from farm.errors import EngineError
from farm.net import free_port
from farm.recipes.model import ContainerLaunch, Mount

pytestmark = pytest.mark.slow

FAKES = Path(__file__).resolve().parents[1] / "fixtures" / "fake_engines"
IMAGE = "vllm/vllm-openai@sha256:" + "0a" * 32


@pytest.fixture
def docker_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `docker` executable first on PATH that runs the stand-in with this interpreter; its state directory."""
    bin_dir = tmp_path / "bin"
    state = tmp_path / "docker-state"
    bin_dir.mkdir()
    state.mkdir()
    wrapper = bin_dir / "docker"
    wrapper.write_text(
        f'#!/bin/sh\nFAKE_DOCKER_STATE="{state}" exec "{sys.executable}" "{FAKES / "fake_docker.py"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return state


def calls(state: Path) -> list[dict[str, Any]]:
    """Every recorded docker call, in order."""
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def container() -> ContainerLaunch:
    """The seed's launch shape, small."""
    return ContainerLaunch(
        image=IMAGE,
        arguments=("--model", "org/m", "--tensor-parallel-size", "2", "--host", "0.0.0.0", "--port", "8000"),
        ipc="host",
        shm_size="16g",
        mounts=(Mount(source="~/.cache/huggingface", target="/root/.cache/huggingface"),),
        container_port=8000,
    )


def engine(tmp_path: Path, port: int, name: str = "farm-test-1") -> ContainerEngine:
    """A container engine for the stand-in docker with a token in the worker's extra environment."""
    return ContainerEngine(
        container(),
        name=name,
        gpus=[0, 1],
        host_port=port,
        log_path=tmp_path / "engine.log",
        served_model="org/m",
        extra_env={"HF_TOKEN": "hf_from_the_worker"},
        stop_grace_s=1,
    )


def test_run_ready_stop(tmp_path: Path, docker_state: Path) -> None:
    """Start removes a stale container, runs the exact docker run, serves; stop asks docker to stop and remove
    it, and the client's process group is gone. The token reaches docker by environment, never by argv."""
    port = free_port()
    eng = engine(tmp_path, port)
    eng.start()
    try:
        eng.wait_ready(30)
        assert eng.version() == "fake-0.0"
    finally:
        eng.stop()
    assert eng.pid is not None
    assert not group_alive(eng.pid)
    recorded = calls(docker_state)
    assert [c["argv"][0] for c in recorded] == ["rm", "run", "stop", "rm"]
    assert recorded[0]["argv"] == ["rm", "-f", "farm-test-1"]
    expected_run = docker_run_argv(
        container(),
        gpus=[0, 1],
        host_port=port,
        name="farm-test-1",
        model_cache=None,
        extra_env={"HF_TOKEN": ""},
        engine="vllm",
    )
    assert recorded[1]["argv"] == list(expected_run[1:])
    assert recorded[1]["env"] == {"HF_TOKEN": "hf_from_the_worker"}
    assert not any("hf_from_the_worker" in token for token in recorded[1]["argv"])
    assert recorded[2]["argv"] == ["stop", "-t", "1", "farm-test-1"]
    assert recorded[3]["argv"] == ["rm", "-f", "farm-test-1"]
    assert eng.image_digest == "sha256:" + "0a" * 32


def test_port_already_allocated(tmp_path: Path, docker_state: Path) -> None:
    """Docker refusing the published port ends the wait at once, classed port_in_use."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: health probes are refused at once
        eng = engine(tmp_path, int(taken.getsockname()[1]))
        eng.start()
        with pytest.raises(EngineError) as caught:
            eng.wait_ready(30)
        eng.stop()
    assert caught.value.failure_class == FailureClass.PORT_IN_USE
    assert "port is already allocated" in caught.value.log_tail
