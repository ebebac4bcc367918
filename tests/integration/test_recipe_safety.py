"""Round 2 of the recipe audit, end to end: each class is refused by `farm submit` / `farm recipe check` and again by
the worker before the engine starts, and a benign control of the same shape reaches the recording fake engine
(tests/fixtures/fake_engines/record_argv.py) exactly as judged."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from farm.cli.app import app
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import DeclaredProbe, HardwareReport
from farm.net import free_port
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.worker.engines import default_engine_factory
from farm.worker.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tests" / "fixtures" / "fake_engines" / "record_argv.py"
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "org/m"]
VLLM = ["vllm", "serve", "org/m"]

runner = CliRunner()


def write_recipe(directory: Path, engine: str, argv: list[str], **more: Any) -> Path:
    recipe = {
        "schema_version": "local-ai-registry/v1",
        "id": "audit2",
        "model_id": "org/m",
        "hardware_id": "cpu",
        "hardware_count": 1,
        "engine": {"name": engine},
        "argv": argv,
        **more,
    }
    path = directory / "recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def make_recipe(engine: str, argv: list[str]) -> Recipe:
    return Recipe(
        id="audit2",
        model_id="org/m",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name=engine),
        argv=tuple(argv),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


def recording_profile(tmp_path: Path, kind: str, *, more: str = "") -> Path:
    """A CPU profile of `kind` whose executable is the argv recorder; it trusts no repository with remote code."""
    section = {"llama.cpp": "llamacpp", "sglang": "sglang", "vllm": "vllm"}[kind]
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "m.gguf").write_bytes(b"GGUF")
    lines = [
        'name = "rec"',
        "[hardware]",
        'hardware_id = "cpu"',
        "count = 1",
        "[engine]",
        f'kind = "{kind}"',
        f"[engine.{section}]",
        f'executable = ["{sys.executable}", "{RECORDER}"]',
        f'extra_env = {{ FARM_FAKE_ARGV_OUT = "{tmp_path / "argv.json"}" }}',
    ]
    if kind == "vllm":
        lines.append("gpu_free_deadline_s = 0.0")
    lines += more.splitlines()
    if kind != "vllm":
        lines += [f"[engine.{section}.model_paths]", f'"org/m" = "{models / "m.gguf"}"']
    profile = tmp_path / f"{section}.toml"
    profile.write_text("\n".join(lines) + "\n")
    return profile


def probe() -> DeclaredProbe:
    return DeclaredProbe(HardwareReport(hardware_id="cpu", count=1, declared=True))


def launch(tmp_path: Path, kind: str, argv: list[str], *, port: int, more: str = "") -> list[str]:
    """Start the recorder as the worker would for the recipe; what it received."""
    profile = load_profile(recording_profile(tmp_path, kind, more=more))
    engine = default_engine_factory(make_recipe(kind, argv), profile, port, tmp_path / "engine.log", probe())
    try:
        engine.start()
        engine.wait_ready(30)
    finally:
        engine.stop()
    received: list[str] = json.loads((tmp_path / "argv.json").read_text())
    return received


def assert_refused_everywhere(tmp_path: Path, kind: str, argv: list[str], why: str, *, more: str = "") -> None:
    recipe = write_recipe(tmp_path, kind, argv)
    result = runner.invoke(app, ["recipe", "check", str(recipe)])
    assert result.exit_code == 2, result.stdout
    assert re.search(why, " ".join(result.stderr.split())), result.stderr
    assert "Traceback" not in result.stderr
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "audit2"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    result = runner.invoke(app, ["submit", str(spec)])
    assert result.exit_code == 2
    assert re.search(why, " ".join(result.stderr.split())), result.stderr
    profile = load_profile(recording_profile(tmp_path, kind, more=more))
    with pytest.raises(ArgumentPolicyError, match=why):
        default_engine_factory(make_recipe(kind, argv), profile, 47190, tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()


# --- 1. the rendered argv parses back to what was judged ---


@pytest.mark.parametrize(
    ("kind", "argv", "why"),
    [
        # SGLang's --model-checksum takes an optional value: its value as its own token is SGLang's trust switch
        ("sglang", [*SGLANG, "--model-checksum=--trust-remote-code"], "never begins with '-'"),
        ("vllm", ["vllm", "serve", "--model=--trust-remote-code"], "begins with .-."),
        ("sglang", [*SGLANG, "--cuda-graph-bs-decode", "1", "-2"], "a list of values"),
    ],
)
def test_values_an_engine_would_read_as_options_are_refused(
    tmp_path: Path, kind: str, argv: list[str], why: str
) -> None:
    """A value no rendering keeps a value is refused at submit, by `farm recipe check` and by the worker."""
    assert_refused_everywhere(tmp_path, kind, argv, why)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("kind", "argv", "one_token"),
    [
        ("sglang", [*SGLANG, "--tool-call-parser=--trust-remote-code"], "--tool-call-parser=--trust-remote-code"),
        ("sglang", [*SGLANG, "--chunked-prefill-size", "-1"], "--chunked-prefill-size=-1"),
        ("vllm", [*VLLM, "--served-model-name=--host=0.0.0.0"], "--served-model-name=--host=0.0.0.0"),
    ],
)
def test_a_value_that_looks_like_an_option_reaches_the_engine_as_one_token(
    tmp_path: Path, kind: str, argv: list[str], one_token: str
) -> None:
    """The benign control: a value beginning with '-' reaches the engine in the one-token `--opt=value` form its
    argparse keeps as the value; `--trust-remote-code` and a second `--host` never arrive as tokens of their own."""
    received = launch(tmp_path, kind, argv, port=free_port())
    assert one_token in received
    assert "--trust-remote-code" not in received
    assert received.count("--host") == 1
    assert received[received.index("--host") + 1] == "127.0.0.1"


def test_trusted_remote_code_with_no_model_on_the_command_is_refused(tmp_path: Path) -> None:
    """`vllm serve --trust-remote-code` names no model; the worker would load the recipe's model with remote code
    trusted on a host that trusts nothing, so the judge refuses it (found beyond the audit's classes)."""
    assert_refused_everywhere(tmp_path, "vllm", ["vllm", "serve", "--trust-remote-code"], "names no model")


# --- 4. reads and writes apart ---

WRITES = [
    ("llama.cpp", ["llama-server", "-m", "/models/m.gguf", "--log-file", "/models/m.gguf"]),
    ("llama.cpp", ["llama-server", "-m", "/models/m.gguf", "--slot-save-path", "/models/"]),
    ("llama.cpp", ["llama-server", "-m", "/models/m.gguf", "--lookup-cache-dynamic", "/models/m.gguf"]),
    ("vllm", [*VLLM, "--mm-encoder-fp8-scale-save-path", "/models/org/m/model.safetensors"]),
    ("vllm", [*VLLM, "--download-dir", "/models"]),
    ("vllm", [*VLLM, "--compilation-config", '{"debug_dump_path":"/models/org/m"}']),
    ("vllm", [*VLLM, "--profiler-config", '{"torch_profiler_dir":"/models/org/m"}']),
    ("sglang", [*SGLANG, "--crash-dump-folder", "/models/org/m"]),
    ("sglang", [*SGLANG, "--modelopt-export-path", "/models/org/m"]),
    ("sglang", [*SGLANG, "--log-requests-target", "stdout", "/models/org/m"]),
]


@pytest.mark.parametrize(("kind", "argv"), WRITES)
def test_options_that_write_files_are_refused(tmp_path: Path, kind: str, argv: list[str]) -> None:
    """An option that writes a file or directory (a log, a slot save, a crash dump, a scale file, downloads, a JSON
    key naming a dump or profile directory) is refused even under the host's roots: the audit saw a llama-server
    log replace a GGUF under the model root, and every later job on the host fail."""
    more = '[engine.policy]\npath_roots = ["/models"]' if kind == "vllm" else ""
    assert_refused_everywhere(tmp_path, kind, argv, "writes", more=more)


@pytest.mark.timeout(60)
def test_options_that_only_read_still_reach_the_engine(tmp_path: Path) -> None:
    """The benign control: a file the engine only reads, under the roots (a lookup cache it never updates), and a
    log target that is the engine's own stdout, reach the fake engine."""
    received = launch(
        tmp_path,
        "llama.cpp",
        ["llama-server", "-m", "/models/m.gguf", "--lookup-cache-static", "/models/m.gguf"],
        port=free_port(),
        more='[engine.policy]\npath_roots = ["/models"]',
    )
    assert received[received.index("--lookup-cache-static") + 1] == "/models/m.gguf"
    received = launch(tmp_path, "sglang", [*SGLANG, "--log-requests-target", "stdout"], port=free_port())
    assert received[received.index("--log-requests-target") + 1] == "stdout"


# --- 2. trust is (repository, revision) ---

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TRUSTS = f'[engine.policy]\nallow_trust_remote_code_models = ["org/m@{COMMIT}"]'


@pytest.mark.parametrize(
    ("kind", "argv", "why"),
    [
        ("vllm", [*VLLM, "--trust-remote-code"], "pin the repository with --revision"),
        ("vllm", [*VLLM, "--trust-remote-code", "--revision", "main"], "org/m@main"),
        ("vllm", [*VLLM, "--trust-remote-code", "--revision", "refs/pr/12"], "pull-request"),
        ("vllm", [*VLLM, "--trust-remote-code", "--revision", COMMIT, "--code-revision", "refs/pr/1"], "pull-request"),
        ("sglang", [*SGLANG, "--trust-remote-code", "--revision", "main"], "org/m@main"),
    ],
)
def test_trusted_remote_code_needs_a_listed_revision(tmp_path: Path, kind: str, argv: list[str], why: str) -> None:
    """Remote code on a repository the host trusts, but at a branch, a pull request or no revision at all: refused
    at submit, by `farm recipe check` and by a worker whose list names the repository at one commit."""
    assert_refused_everywhere(tmp_path, kind, argv, why, more=TRUSTS)


@pytest.mark.timeout(60)
def test_trusted_remote_code_at_the_listed_commit_reaches_the_engine(tmp_path: Path) -> None:
    """The benign control: the listed repository at the listed commit starts with remote code trusted."""
    argv = [*VLLM, "--trust-remote-code", "--revision", COMMIT]
    received = launch(tmp_path, "vllm", argv, port=free_port(), more=TRUSTS)
    assert "--trust-remote-code" in received
    assert received[received.index("--revision") + 1] == COMMIT


def test_a_profile_trusting_a_bare_repository_is_refused(tmp_path: Path) -> None:
    """An old-style entry (`org/m` alone) would trust any commit, a pull request's included: the profile is refused
    naming the entry and the form to write."""
    from farm.errors import ProfileError

    bare = '[engine.policy]\nallow_trust_remote_code_models = ["org/m"]'
    with pytest.raises(ProfileError, match=r"org/m@<40-hex commit>"):
        load_profile(recording_profile(tmp_path, "vllm", more=bare))


# --- 3. images only from the engine's official repositories or the host's list ---

FAKE_DOCKER = ROOT / "tests" / "fixtures" / "fake_engines" / "fake_docker.py"
DIGEST = "@sha256:" + "0a" * 32


def container_profile(tmp_path: Path, *, more: str = "") -> Path:
    """A vllm-container host whose docker client is the recording stand-in (tests/fixtures/fake_engines)."""
    state = tmp_path / "docker-state"
    state.mkdir(exist_ok=True)
    wrapper = tmp_path / "docker"
    wrapper.write_text(f'#!/bin/sh\nFAKE_DOCKER_STATE="{state}" exec "{sys.executable}" "{FAKE_DOCKER}" "$@"\n')
    wrapper.chmod(0o755)
    profile = tmp_path / "container.toml"
    profile.write_text(
        "\n".join(
            [
                'name = "box"',
                "[hardware]",
                'hardware_id = "cpu"',
                "count = 1",
                "[engine]",
                'kind = "vllm-container"',
                "stop_grace_s = 1",
                "[engine.vllm]",
                "gpu_free_deadline_s = 0.0",
                "[engine.container]",
                f'docker = "{wrapper}"',
                *more.splitlines(),
            ]
        )
        + "\n"
    )
    return profile


def draft_launch_recipe(directory: Path, image: str) -> Path:
    """A registry recipe whose draft launch (`draft_launch`, a docker launch) names the image."""
    return write_recipe(
        directory,
        "vllm",
        [*VLLM, "--max-model-len", "1024"],
        draft_launch={"kind": "docker", "image": image, "arguments": ["--model", "org/m", "--max-model-len", "1024"]},
    )


@pytest.mark.parametrize(
    ("image", "more", "why"),
    [
        ("ghcr.io/someone/vllm-fork" + DIGEST, "", "not an image of vllm's official repositories"),
        ("docker.io/lmsysorg/sglang" + DIGEST, "", "not an image of vllm's official repositories"),
        ("vllm/vllm-openai:latest", "", "pinned by digest"),
        ("ghcr.io/someone/vllm-fork" + DIGEST, '[engine.policy]\nallowed_images = ["ghcr.io/other/x"]', "official"),
    ],
)
def test_the_worker_runs_no_image_but_the_engines_own_or_its_listed_ones(
    tmp_path: Path, image: str, more: str, why: str
) -> None:
    """Whichever field names the image (here the registry's draft launch, read by `farm recipe check`), a worker
    runs only the engine's official repositories or its own list, digest-pinned; the docker client never runs."""
    from farm.recipes.parse import load_recipe

    recipe = load_recipe(draft_launch_recipe(tmp_path, image))
    assert recipe.container is not None
    assert recipe.container.image == image
    profile = load_profile(container_profile(tmp_path, more=more))
    with pytest.raises(ArgumentPolicyError, match=why):
        default_engine_factory(recipe, profile, 47195, tmp_path / "engine.log", probe())
    assert not (tmp_path / "docker-state" / "calls.jsonl").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("image", "more"),
    [
        ("docker.io/vllm/vllm-openai:v0.32.0" + DIGEST, ""),
        ("ghcr.io/someone/vllm-fork" + DIGEST, '[engine.policy]\nallowed_images = ["ghcr.io/someone/vllm-fork"]'),
    ],
)
def test_an_official_or_listed_image_reaches_docker(tmp_path: Path, image: str, more: str) -> None:
    """The benign control: vLLM's own image, or an image the host lists, reaches the recording docker client."""
    from farm.recipes.parse import load_recipe

    recipe = load_recipe(draft_launch_recipe(tmp_path, image))
    assert runner.invoke(app, ["recipe", "check", str(tmp_path / "recipe.json")]).exit_code == 0
    profile = load_profile(container_profile(tmp_path, more=more))
    engine = default_engine_factory(recipe, profile, free_port(), tmp_path / "engine.log", probe())
    try:
        engine.start()
        engine.wait_ready(30)
    finally:
        engine.stop()
    runs = [
        json.loads(line)["argv"]
        for line in (tmp_path / "docker-state" / "calls.jsonl").read_text().splitlines()
        if json.loads(line)["argv"][0] == "run"
    ]
    assert len(runs) == 1
    assert image in runs[0]


def test_a_llama_cpp_image_must_be_a_server_tag() -> None:
    """From llama.cpp's own repository only the `server` tags start llama-server (`full` runs a tools script)."""
    from farm.engines.container import check_image
    from farm.engines.policy import DEFAULT_POLICY

    check_image("ghcr.io/ggml-org/llama.cpp:server-cuda" + DIGEST, DEFAULT_POLICY, "llama.cpp")
    with pytest.raises(ArgumentPolicyError, match="'server' tags"):
        check_image("ghcr.io/ggml-org/llama.cpp:full" + DIGEST, DEFAULT_POLICY, "llama.cpp")
    with pytest.raises(ArgumentPolicyError, match="official"):
        check_image("ghcr.io/ggml-org/llama.cpp-fork:server" + DIGEST, DEFAULT_POLICY, "llama.cpp")
