"""The deployment files say what farm mode needs: checked by reading them, since no Docker engine runs here.

PyYAML is not a dependency, and `docker compose config` needs the compose plugin (absent on this machine: the
`docker` CLI here has no `compose` command), so docker-compose.yml is written in plain block YAML (its header
says so) and read by the small reader below, which refuses anything outside that subset rather than guess.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith("[") or text.startswith('"'):
        return json.loads(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    if text == "" or text == "null":
        return None
    if text[0] in "'{&*|>!":
        raise ValueError(f"outside the YAML subset this reader takes: {text!r}")
    return text


def _without_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # inside double quotes is text)."""
    quoted = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted and (index == 0 or line[index - 1] == " "):
            return line[:index].rstrip()
    return line.rstrip()


def read_block_yaml(text: str) -> Any:
    """Block mappings and sequences of scalars (plain, double-quoted, or JSON flow lists); nothing else."""
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        stripped = _without_comment(raw)
        if not stripped.strip() or stripped.lstrip().startswith("#"):
            continue
        lines.append((len(stripped) - len(stripped.lstrip(" ")), stripped.strip()))

    def block(index: int, indent: int) -> tuple[Any, int]:
        if lines[index][1].startswith("- "):
            items: list[Any] = []
            while index < len(lines) and lines[index][0] == indent and lines[index][1].startswith("- "):
                rest = lines[index][1][2:]
                if re.match(r"^[A-Za-z_][\w.-]*:( |$)", rest):
                    # "- key: value" opens a mapping whose other keys sit two columns further in.
                    lines[index] = (indent + 2, rest)
                    value, index = block(index, indent + 2)
                else:
                    value, index = _scalar(rest), index + 1
                items.append(value)
            return items, index
        mapping: dict[str, Any] = {}
        while index < len(lines) and lines[index][0] == indent:
            key, sep, rest = lines[index][1].partition(":")
            if not sep:
                raise ValueError(f"not a mapping entry: {lines[index][1]!r}")
            index += 1
            if rest.strip():
                mapping[key] = _scalar(rest)
            elif index < len(lines) and lines[index][0] > indent:
                mapping[key], index = block(index, lines[index][0])
            else:
                mapping[key] = None
        return mapping, index

    value, end = block(0, lines[0][0])
    if end != len(lines):
        raise ValueError(f"could not read line {lines[end]!r}")
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """docker-compose.yml, read."""
    data = read_block_yaml(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def test_the_reader_reads_nested_blocks_lists_and_flow_lists() -> None:
    """The reader itself, on a hand-written document, and its refusal of YAML it does not take."""
    text = 'a:\n  b: 1\n  c: ["x", "y"]\n  d:\n    - e: "f"\n      g: h\n    - plain\n# note\nz: "q # not a comment"\n'
    assert read_block_yaml(text) == {
        "a": {"b": 1, "c": ["x", "y"], "d": [{"e": "f", "g": "h"}, "plain"]},
        "z": "q # not a comment",
    }
    with pytest.raises(ValueError, match="subset"):
        read_block_yaml("a: &anchor 1\n")


def test_compose_has_the_farm_services(compose: dict[str, Any]) -> None:
    """Redis, PostgreSQL, Flower, a one-shot migration and a GPU worker."""
    assert set(compose["services"]) == {"redis", "postgres", "flower", "migrate", "worker"}


def test_redis_keeps_messages_and_needs_a_password(compose: dict[str, Any]) -> None:
    """AOF every second, noeviction, and a password from the environment (required, no default)."""
    command = compose["services"]["redis"]["command"]
    joined = " ".join(command)
    assert "--appendonly yes" in joined
    assert "--appendfsync everysec" in joined
    assert "--maxmemory-policy noeviction" in joined
    password = command[command.index("--requirepass") + 1]
    assert password.startswith("${FARM_REDIS_PASSWORD:?")


def test_migrate_runs_once_and_the_worker_waits_for_it(compose: dict[str, Any]) -> None:
    """`farm db upgrade` as a one-shot service; the worker starts only after it completed successfully."""
    services = compose["services"]
    assert services["migrate"]["command"] == ["farm", "db", "upgrade"]
    assert services["migrate"]["restart"] == "no"
    depends = services["worker"]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert depends["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_worker_gets_gpus_models_and_credentials(compose: dict[str, Any]) -> None:
    """GPU reservation (nvidia driver, gpu capability), the Hugging Face cache mounted, broker and store URLs with
    credentials from the environment, and a stop grace period long enough for a job."""
    worker = compose["services"]["worker"]
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia"
    assert device["capabilities"] == ["gpu"]
    assert device["count"] == "all" or int(device["count"]) >= 1
    assert any(".cache/huggingface:" in volume for volume in worker["volumes"])
    environment = worker["environment"]
    assert environment["FARM_BROKER_URL"].startswith("redis://:${FARM_REDIS_PASSWORD:?")
    assert "farm:${FARM_POSTGRES_PASSWORD:?" in environment["FARM_DATABASE_URL"]
    assert worker["stop_signal"] == "SIGTERM"
    assert re.fullmatch(r"\d+h", worker["stop_grace_period"])
    assert worker["build"]["dockerfile"] == "deploy/Dockerfile.worker"


def _strings(node: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in _strings(value, f"{path}.{key}")]
    if isinstance(node, list):
        return [item for index, value in enumerate(node) for item in _strings(value, f"{path}[{index}]")]
    return [(path, node)] if isinstance(node, str) else []


def test_no_password_is_written_into_the_compose_file(compose: dict[str, Any]) -> None:
    """Every credential comes from the environment: each PASSWORD value, each URL's password and each
    --requirepass is a required ${...} variable."""
    checked = 0
    command = compose["services"]["redis"]["command"]
    secrets = [("redis --requirepass", command[command.index("--requirepass") + 1])]
    for path, value in _strings(compose):
        if path.endswith("PASSWORD"):
            secrets.append((path, value))
        secrets += [(path, match) for match in re.findall(r"://[^:/@]*:(.*)@", value)]
    for path, value in secrets:
        assert re.fullmatch(r"\$\{[A-Z_]+:\?[^}]*\}", value), f"{path} carries a literal secret"
        checked += 1
    assert checked >= 6


def test_systemd_unit_waits_for_the_job_and_restarts_on_failure() -> None:
    """Restart=on-failure, KillSignal=SIGTERM, a stop timeout of hours, settings from an EnvironmentFile."""
    unit = (DEPLOY / "farm-worker.service").read_text()
    settings = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert settings["Restart"] == "on-failure"
    assert settings["KillSignal"] == "SIGTERM"
    assert settings["EnvironmentFile"] == "/etc/farm/farm.env"
    assert re.fullmatch(r"\d+h", settings["TimeoutStopSec"])
    assert "farm worker --profile" in settings["ExecStart"]


def test_worker_image_installs_the_package_and_vllm_on_request() -> None:
    """The Dockerfile installs the locked dependencies and the package, and vLLM behind a build argument."""
    dockerfile = (DEPLOY / "Dockerfile.worker").read_text()
    assert "ARG WITH_VLLM=0" in dockerfile
    assert "uv export --frozen" in dockerfile
    assert 'uv pip install --system "vllm==${VLLM_VERSION}"' in dockerfile
    assert "STOPSIGNAL SIGTERM" in dockerfile


def test_env_example_names_every_setting_without_real_secrets() -> None:
    """farm.env.example sets the broker and store URLs with placeholder credentials."""
    example = (DEPLOY / "farm.env.example").read_text()
    values = dict(line.split("=", 1) for line in example.splitlines() if line and not line.startswith("#"))
    assert values["FARM_BROKER_URL"].startswith("redis://:change-me@")
    assert values["FARM_DATABASE_URL"].startswith("postgresql+psycopg://farm:change-me@")
    assert values["FARM_REDIS_PASSWORD"] == values["FARM_POSTGRES_PASSWORD"] == "change-me"


def test_docker_compose_config_accepts_the_file() -> None:
    """`docker compose config` validates the file where the compose plugin exists."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the docker CLI here has no compose plugin ('docker compose' is an unknown command)")
    env = {"FARM_REDIS_PASSWORD": "x", "FARM_POSTGRES_PASSWORD": "y", "HOME": "/root", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
