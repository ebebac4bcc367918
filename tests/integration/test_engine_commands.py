"""Every refused command of the audit, through the CLI (`farm submit`, `farm recipe check`) and at the worker, and
a benign control recipe whose canonical command reaches a fake engine executable that records its argv."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from farm.cli.app import app
from farm.engines.policy import recipe_command
from farm.engines.registry import ENGINES
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import DeclaredProbe, HardwareReport
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.settings import Settings
from farm.store import Store
from farm.worker.engines import default_engine_factory, engine_policy
from farm.worker.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tests" / "fixtures" / "fake_engines" / "record_argv.py"
MODEL = "farm/tiny-llama"

runner = CliRunner()

REFUSED: list[tuple[list[str], str]] = [
    (["vllm", "serve", "evil/model", "--model", MODEL, "--trust-remote-code"], "disagree"),
    (["vllm", "serve", MODEL, "--tokenizer", "evil/tok", "--trust-remote-code"], "trust list"),
    (["vllm", "serve", MODEL, "--hf-config-path", "evil/cfg", "--trust-remote-code"], "trust list"),
    (
        ["vllm", "serve", MODEL, "--trust-remote-code", "--speculative-config", '{"method":"eagle","model":"evil/d"}'],
        "trust list",
    ),
    (["vllm", "serve", MODEL, "--distributed-executor-backend", "pkg.Class"], "not one of"),
    (["vllm", "serve", MODEL, "--kv-transfer-config", '{"kv_connector_module_path":"evil.m"}'], "names code"),
    (["vllm", "serve", MODEL, "--compilation-config", '{"inductor_passes":{"x":"evil.p"}}'], "names code"),
    (["vllm", "serve", MODEL, "--log-config-file", "/models/log.json"], "factory"),
    (["vllm", "serve", MODEL, "--kv-events-config", '{"endpoint":"tcp://*:5557"}'], "not loopback"),
    (["vllm", "serve", MODEL, "-dpa", "0.0.0.0"], "not loopback"),
    (["vllm", "serve", MODEL, "--master-addr", "0.0.0.0"], "not loopback"),
    (["vllm", "serve", MODEL, "--otlp-traces-endpoint", "http://collector:4317"], "telemetry"),
    (["vllm", "serve", MODEL, "--chat-template", "/etc/passwd"], "outside this host's model and cache roots"),
    (["vllm", "serve", MODEL, "--download-dir", "/"], "writes"),
    (["vllm", "serve", MODEL, "--lora-modules", "a=/root/.ssh"], "outside this host's model and cache roots"),
    (["vllm", "serve", MODEL, "--mm-encoder-fp8-scale-save-path", "/tmp/s"], "writes"),
    (["vllm", "serve", "../../etc"], "relative path"),
    # the recipe reader may refuse it first, naming hardware_count: either way, never queued
    (["vllm", "serve", MODEL, "--tensor_parallel_size", "2"], "the job has 1|runs on 2 device"),
    (["vllm", "serve", MODEL, "-tp", "1", "--tensor-parallel-size", "1"], "given twice"),
    (["vllm", "serve", MODEL, "--trust-remote"], "abbreviations are refused"),
]


def farm(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def write_recipe(directory: Path, argv: list[str], *, engine: str = "vllm") -> Path:
    recipe = {
        "schema_version": "local-ai-registry/v1",
        "id": "audit",
        "model_id": MODEL,
        "hardware_id": "cpu",
        "hardware_count": 1,
        "engine": {"name": engine},
        "argv": argv,
    }
    path = directory / "recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def make_recipe(argv: list[str]) -> Recipe:
    return Recipe(
        id="audit",
        model_id=MODEL,
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="vllm"),
        argv=tuple(argv),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


@pytest.mark.parametrize(("argv", "why"), REFUSED)
def test_submit_and_recipe_check_refuse(tmp_path: Path, argv: list[str], why: str) -> None:
    """`farm submit` refuses with exit 2, the field and the reason, and stores nothing; `farm recipe check`
    refuses the same recipe the same way."""
    recipe = write_recipe(tmp_path, argv)
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "audit"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, _, err = farm("submit", str(spec))
    assert code == 2, err
    assert "field 'argv'" in err or "field 'hardware_count'" in err
    assert re.search(why, " ".join(err.split()))
    assert "Traceback" not in err
    store = Store.open(Settings().resolved_database_url, auto_upgrade=True)
    assert store.list_jobs() == []
    code, _, err = farm("recipe", "check", str(recipe))
    assert code == 2
    assert re.search(why, " ".join(err.split()))


@pytest.fixture
def recording_profile(tmp_path: Path) -> Path:
    """A CPU vLLM profile whose executable is the argv recorder."""
    profile = tmp_path / "rec.toml"
    profile.write_text(
        "\n".join(
            [
                'name = "rec"',
                "[hardware]",
                'hardware_id = "cpu"',
                "count = 1",
                "[engine]",
                'kind = "vllm"',
                "[engine.vllm]",
                f'executable = ["{sys.executable}", "{RECORDER}"]',
                "gpu_free_deadline_s = 0.0",
                f'extra_env = {{ FARM_FAKE_ARGV_OUT = "{tmp_path / "argv.json"}" }}',
            ]
        )
        + "\n"
    )
    return profile


def probe() -> DeclaredProbe:
    return DeclaredProbe(HardwareReport(hardware_id="cpu", count=1, declared=True))


@pytest.mark.timeout(60)
def test_a_benign_recipe_reaches_the_engine_as_its_canonical_command(tmp_path: Path, recording_profile: Path) -> None:
    """The control recipe, written with aliases, underscores and `=`, starts the engine; the engine receives the
    canonical argv (the one the worker reports for provenance), never the recipe's own spelling."""
    profile = load_profile(recording_profile)
    recipe = make_recipe(["vllm", "serve", MODEL, "--max_model_len=1024", "-tp", "1", "--host", "0.0.0.0"])
    engine = default_engine_factory(recipe, profile, 47123, tmp_path / "engine.log", probe())
    try:
        engine.start()
        engine.wait_ready(30)
    finally:
        engine.stop()
    received = json.loads((tmp_path / "argv.json").read_text())
    assert tuple(received) == engine.argv[1:]  # the recorder's sys.argv starts at its script
    assert received[1:] == [
        MODEL,
        "--max-model-len",
        "1024",
        "--tensor-parallel-size",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        "47123",
    ]
    judged = recipe_command(recipe, engine_policy(profile)).without("--host", "--port").render_options()
    assert tuple(received[2:-4]) == judged


@pytest.mark.parametrize(("argv", "why"), REFUSED)
def test_the_worker_refuses_before_the_engine_starts(
    tmp_path: Path, recording_profile: Path, argv: list[str], why: str
) -> None:
    """At the worker, the same commands are refused while building the engine: the recorder never runs."""
    profile = load_profile(recording_profile)
    with pytest.raises(ArgumentPolicyError, match=why.split("'")[0][:20]):
        default_engine_factory(make_recipe(argv), profile, 47124, tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()


def test_an_engine_no_worker_runs_is_refused_at_submit_with_the_list(tmp_path: Path) -> None:
    """A valid recipe for an engine the farm cannot launch passes the command check (`farm recipe check`) and is
    refused at submit, naming what the workers run."""
    recipe = Recipe(
        id="mlx",
        model_id="mlx-community/Qwen3-4B-4bit",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="mlx"),
        argv=("mlx_lm.server", "--model", "mlx-community/Qwen3-4B-4bit", "--port", "8080"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )
    from farm.engines.admission import check_recipe_for_submit, check_runnable

    check_recipe_for_submit(recipe)
    check_runnable(recipe)  # an MLX worker exists (farm.engines.mlx.adapter)
    with pytest.raises(ArgumentPolicyError, match=r"no worker of this farm runs mlx \(the farm's workers run: vllm"):
        check_runnable(recipe, runnable=("vllm", "llama.cpp"))


def other_profile(tmp_path: Path, kind: str) -> Path:
    """A profile of `kind` (llama.cpp or sglang) whose executable is the argv recorder, mapping the model."""
    section = "llamacpp" if kind == "llama.cpp" else "sglang"
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "m.gguf").write_bytes(b"GGUF")
    profile = tmp_path / f"{section}.toml"
    profile.write_text(
        "\n".join(
            [
                f'name = "{section}"',
                "[hardware]",
                'hardware_id = "cpu"',
                "count = 1",
                "[engine]",
                f'kind = "{kind}"',
                f"[engine.{section}]",
                f'executable = ["{sys.executable}", "{RECORDER}"]',
                f'extra_env = {{ FARM_FAKE_ARGV_OUT = "{tmp_path / "argv.json"}" }}',
                f"[engine.{section}.model_paths]",
                f'"org/m" = "{models / "m.gguf"}"',
                *(
                    [f"[engine.{section}.draft_paths]", f'"d.gguf" = "{models / "d-Q8.gguf"}"']
                    if kind == "llama.cpp"
                    else []
                ),
            ]
        )
        + "\n"
    )
    return profile


def engine_recipe(engine: str, argv: list[str]) -> Recipe:
    return Recipe(
        id="other",
        model_id="org/m",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name=engine),
        argv=tuple(argv),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("kind", "argv", "expected"),
    [
        (
            "llama.cpp",
            ["llama-server", "-hf", "org/m-GGUF", "-c", "2048", "-np", "2", "--host", "0.0.0.0"],
            ["--ctx-size", "2048", "--parallel", "2", "--model", "{model}", "--alias", "org/m"],
        ),
        (
            "llama.cpp",
            ["llama-server", "-hf", "org/m-GGUF", "-md", "d.gguf", "--spec-type", "draft-simple"],
            ["--spec-type", "draft-simple", "--model", "{model}", "--spec-draft-model", "{draft}", "--alias", "org/m"],
        ),
        (
            "sglang",
            ["python3", "-m", "sglang.launch_server", "--model", "org/m", "--context-length", "4096"],
            ["--model-path", "{model}", "--context-length", "4096", "--served-model-name", "org/m"],
        ),
    ],
)
def test_other_engines_reach_the_executable_as_their_canonical_command(
    tmp_path: Path, kind: str, argv: list[str], expected: list[str]
) -> None:
    """llama.cpp and SGLang workers launch the judged command: the host's model file, canonical spellings,
    the served name and the worker's own address; the recipe's --host never arrives."""
    profile = load_profile(other_profile(tmp_path, kind))
    engine = default_engine_factory(engine_recipe(kind, argv), profile, 47125, tmp_path / "engine.log", probe())
    try:
        engine.start()
        engine.wait_ready(30)
    finally:
        engine.stop()
    received = json.loads((tmp_path / "argv.json").read_text())
    model, draft = str(tmp_path / "models" / "m.gguf"), str(tmp_path / "models" / "d-Q8.gguf")
    wanted = [e.replace("{model}", model).replace("{draft}", draft) for e in expected]
    assert received[1:] == [*wanted, "--host", "127.0.0.1", "--port", "47125"]


@pytest.mark.parametrize(
    ("kind", "argv", "why"),
    [
        ("llama.cpp", ["llama-server", "-m", "/etc/passwd"], "outside this host's"),
        ("llama.cpp", ["llama-server", "--rpc", "10.0.0.2:50052"], "RPC servers beyond"),
        ("llama.cpp", ["llama-server", "-hf", "org/m-GGUF", "-md", "other.gguf"], "no file for the draft model"),
        (
            "sglang",
            ["python3", "-m", "sglang.launch_server", "--model-path", "org/m", "--tp-size", "2"],
            "the job has 1",
        ),
        ("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "org/m", "--api-key", "k"], "secrets"),
    ],
)
def test_other_engines_refuse_before_starting(tmp_path: Path, kind: str, argv: list[str], why: str) -> None:
    """A refused llama.cpp or SGLang command never reaches the executable."""
    profile = load_profile(other_profile(tmp_path, kind))
    with pytest.raises(ArgumentPolicyError, match=why):
        default_engine_factory(engine_recipe(kind, argv), profile, 47126, tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()


def test_a_worker_refuses_an_engine_its_host_does_not_have(tmp_path: Path) -> None:
    """A llama.cpp host given an SGLang recipe says which engines it runs."""
    from farm.errors import EngineError

    profile = load_profile(other_profile(tmp_path, "llama.cpp"))
    recipe = engine_recipe("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "org/m"])
    with pytest.raises(EngineError, match=r"this worker runs llama.cpp; the recipe wants 'sglang'"):
        default_engine_factory(recipe, profile, 47127, tmp_path / "engine.log", probe())


SEED = ROOT / "tests" / "fixtures" / "001_5d0dc33ac7ff8823.txt"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"environment": {"DOCKER_HOST": "tcp://evil:2375"}}, "DOCKER_HOST"),
        ({"environment": {"DOCKER_CONFIG": "/tmp/evil"}}, "DOCKER_CONFIG"),
        ({"environment": {"LD_AUDIT": "/tmp/evil.so"}}, "LD_AUDIT"),
        ({"environment": {"HTTPS_PROXY": "http://evil:3128"}}, "HTTPS_PROXY"),
        ({"environment": {"PYTHONPATH": "/tmp/evil"}}, "PYTHONPATH"),
        ({"container_port": -5}, "not a port"),
        ({"entrypoint": "bash"}, "entrypoint"),
        (
            {
                "arguments": [
                    "--model",
                    "deepseek-ai/DeepSeek-V4-Flash-0731",
                    "--tensor-parallel-size",
                    "2",
                    "--master-addr",
                    "0.0.0.0",
                ]
            },
            "loopback",
        ),
    ],
)
def test_submit_refuses_a_bad_container_launch(tmp_path: Path, change: dict[str, object], why: str) -> None:
    """The seed document with its draft_launch changed: `farm submit` refuses it (exit 2, the reason, nothing
    stored) before any docker command could see the recipe's environment or port."""
    document = json.loads(SEED.read_text())
    document["data"]["draft_launch"].update(change)
    if "arguments" in change:
        # The draft's arguments are the command only where the recipe records none of its own.
        document["data"]["metadata"]["localmaxxing"].pop("observed_command", None)
        document["data"]["metadata"]["localmaxxing"].pop("tokenized", None)
    (tmp_path / "recipe.json").write_text(json.dumps(document))
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "c"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, _, err = farm("submit", str(spec))
    assert code == 2, err
    assert why in " ".join(err.split())
    assert "Traceback" not in err
    store = Store.open(Settings().resolved_database_url, auto_upgrade=True)
    assert store.list_jobs() == []


def test_submit_accepts_the_seed_container_launch(tmp_path: Path) -> None:
    """The control: the seed document itself, container launch included, is queued."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "c"\nrecipe = "{SEED}"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, out, err = farm("submit", str(spec))
    assert code == 0, err
    assert "j-" in out


def test_submit_queues_nothing_for_an_engine_no_worker_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """submit_sweep (what `farm submit` calls) refuses an Ollama recipe with the list of runnable engines, and
    stores nothing."""
    from farm.recipes.spec import LoadedSweep
    from farm.recipes.sweep import SweepSpec
    from farm.submit import submit_sweep

    recipe = Recipe(
        id="ollama",
        model_id="qwen3:8b",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="ollama"),
        argv=("ollama", "run", "qwen3:8b"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )
    spec = SweepSpec.model_validate({"name": "o", "recipe": "r.json", "plan": {"short_ttft": {"prompt_tokens": 64}}})
    sweep = LoadedSweep(spec=spec, recipe=recipe, spec_path=tmp_path, recipe_path=tmp_path, spec_sha256="0" * 64)
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    # Every engine of the table has a worker now: one without its adapter stands for an engine none runs.
    monkeypatch.setitem(ENGINES, "ollama", replace(ENGINES["ollama"], adapter=None))
    with pytest.raises(ArgumentPolicyError, match="no worker of this farm runs ollama"):
        submit_sweep(store, sweep, broker_url=None)
    assert store.list_jobs() == []
