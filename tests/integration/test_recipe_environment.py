"""A recipe's environment by exact name, end to end: every class of dangerous variable is refused by `farm submit`
and `farm recipe check` and again by the worker before the engine starts, and a benign control's variables reach a
recording fake engine (its argv and its whole environment), dropped ones not."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from farm.cli.app import app
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import DeclaredProbe, HardwareReport
from farm.recipes.parse import load_recipe
from farm.settings import Settings
from farm.store import Store
from farm.worker.engines import default_engine_factory
from farm.worker.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tests" / "fixtures" / "fake_engines" / "record_argv.py"
MODEL = "farm/tiny-llama"
VLLM = ["vllm", "serve", MODEL]
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "org/m"]

runner = CliRunner()

REFUSED: list[tuple[str, str, str, str]] = [
    # engine, variable, value, the reason's words
    ("vllm", "CUDA_INJECTION64_PATH", "/tmp/evil.so", "tool library"),
    ("vllm", "NCCL_NET_PLUGIN", "evil", "loads code"),
    ("vllm", "NCCL_TUNER_PLUGIN", "evil", "loads code"),
    ("vllm", "HSA_TOOLS_LIB", "evil.so", "tool library"),
    ("vllm", "LD_PRELOAD", "/tmp/evil.so", "loads code"),
    ("vllm", "HF_HUB_ENABLE_HF_TRANSFER", "1", "downloads come from"),
    ("vllm", "HF_ENDPOINT", "https://mirror.example", "downloads come from"),
    ("vllm", "FLASHINFER_CUBINS_REPOSITORY", "https://evil.example", "downloads come from"),
    ("vllm", "FLASHINFER_CUBIN_CHECKSUM_DISABLED", "1", "checksum"),
    ("vllm", "TORCH_LOGS_OUT", "/models/m.gguf", "writes"),
    ("vllm", "CUDNN_LOGDEST_DBG", "/models/m.gguf", "writes"),
    ("vllm", "NCCL_DEBUG_FILE", "/models/x", "writes"),
    ("vllm", "VLLM_PLUGINS", "evil", "loads code"),
    ("vllm", "VLLM_ALLOW_INSECURE_SERIALIZATION", "1", "pickle"),
    ("vllm", "VLLM_SERVER_DEV_MODE", "1", "development endpoints"),
    ("vllm", "VLLM_NOT_A_VARIABLE", "1", "not on the farm's list"),
    ("vllm", "VLLM_CPU_KVCACHE_SPACE", "/etc", "a number"),
    ("vllm", "VLLM_WORKER_MULTIPROC_METHOD", "forkserver", "not one of fork, spawn"),
    ("sglang", "SGL_PLUGINS", "evil", "loads code"),
    ("sglang", "SGLANG_TEST_STUCK_SCHEDULER_INIT", "1", "test faults"),
    ("sglang", "SGLANG_EXTERNAL_MODEL_PACKAGE", "evil", "loads code"),
]


def farm(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def write_recipe(directory: Path, engine: str, environment: dict[str, str]) -> Path:
    """A registry recipe whose command starts with `NAME=value` words, as recorded commands do."""
    argv = VLLM if engine == "vllm" else SGLANG
    recipe = {
        "schema_version": "local-ai-registry/v1",
        "id": "env",
        "model_id": MODEL if engine == "vllm" else "org/m",
        "hardware_id": "cpu",
        "hardware_count": 1,
        "engine": {"name": engine},
        "argv": [*(f"{name}={value}" for name, value in environment.items()), *argv],
    }
    path = directory / "recipe.json"
    path.write_text(json.dumps(recipe))
    return path


def write_profile(tmp_path: Path, engine: str) -> Path:
    """A CPU profile of `engine` whose executable is the recorder, writing argv and environment."""
    section = "vllm" if engine == "vllm" else "sglang"
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    extra = f'{{ FARM_FAKE_ARGV_OUT = "{tmp_path / "argv.json"}", FARM_FAKE_ENV_OUT = "{tmp_path / "env.json"}" }}'
    lines = [
        f'name = "{section}"',
        "[hardware]",
        'hardware_id = "cpu"',
        "count = 1",
        "[engine]",
        f'kind = "{engine}"',
        f"[engine.{section}]",
        f'executable = ["{sys.executable}", "{RECORDER}"]',
        f"extra_env = {extra}",
    ]
    if engine == "vllm":
        lines.append("gpu_free_deadline_s = 0.0")
    else:
        (models / "m").mkdir(exist_ok=True)
        lines += [f"[engine.{section}.model_paths]", f'"org/m" = "{models / "m"}"']
    path = tmp_path / f"{section}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def probe() -> DeclaredProbe:
    return DeclaredProbe(HardwareReport(hardware_id="cpu", count=1, declared=True))


@pytest.mark.parametrize(("engine", "name", "value", "why"), REFUSED)
def test_submit_and_recipe_check_refuse_the_variable(
    tmp_path: Path, engine: str, name: str, value: str, why: str
) -> None:
    """`farm submit` refuses with exit 2, naming the variable and why, and stores nothing; `farm recipe check`
    refuses the same recipe the same way."""
    write_recipe(tmp_path, engine, {"OMP_NUM_THREADS": "2", name: value})
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "env"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, _, err = farm("submit", str(spec))
    flat = " ".join(err.split())
    assert code == 2, err
    assert "field 'environment'" in flat
    assert name in flat
    assert why in flat
    assert "Traceback" not in err
    assert Store.open(Settings().resolved_database_url, auto_upgrade=True).list_jobs() == []
    code, _, err = farm("recipe", "check", str(tmp_path / "recipe.json"))
    assert code == 2
    assert why in " ".join(err.split())


@pytest.mark.parametrize(("engine", "name", "value", "why"), REFUSED)
def test_the_worker_refuses_the_variable_before_the_engine_starts(
    tmp_path: Path, engine: str, name: str, value: str, why: str
) -> None:
    """A recipe that reached a worker anyway (queued before this check) is refused while the engine is built: the
    recorder never runs."""
    recipe = load_recipe(write_recipe(tmp_path, engine, {name: value}))
    profile = load_profile(write_profile(tmp_path, engine))
    with pytest.raises(ArgumentPolicyError, match=name):
        default_engine_factory(recipe, profile, 47131, tmp_path / "engine.log", probe())
    assert not (tmp_path / "argv.json").exists()


BENIGN = {
    "vllm": {
        "OMP_NUM_THREADS": "2",
        "NCCL_P2P_DISABLE": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "CUTE_DSL_ARCH": "sm_120a",
    },
    "sglang": {"SGLANG_ENABLE_SPEC_V2": "True", "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1", "NCCL_IB_DISABLE": "1"},
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_benign_tuning_reaches_the_engine_and_dropped_names_do_not(tmp_path: Path, engine: str) -> None:
    """The control: `farm submit` queues the recipe, and its tuning variables reach the recorder's environment
    with their values; a device pin and a cache path the recipe carries are dropped, and a credential too."""
    dropped = {"CUDA_VISIBLE_DEVICES": "3", "HF_HOME": "/home/author/.cache", "HF_TOKEN": "hf_recipe_token"}
    path = write_recipe(tmp_path, engine, {**BENIGN[engine], **dropped})
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "env"\nrecipe = "recipe.json"\n[plan]\n[plan.short_ttft]\nprompt_tokens = 64\n')
    code, out, err = farm("submit", str(spec))
    assert code == 0, err
    assert "j-" in out
    profile = load_profile(write_profile(tmp_path, engine))
    engine_run = default_engine_factory(load_recipe(path), profile, 47132, tmp_path / "engine.log", probe())
    try:
        engine_run.start()
        engine_run.wait_ready(30)
    finally:
        engine_run.stop()
    received = json.loads((tmp_path / "env.json").read_text())
    assert stat.S_IMODE((tmp_path / "engine.log").stat().st_mode) == 0o600, "the engine log is the worker's own"
    for name, value in BENIGN[engine].items():
        assert received[name] == value
    assert received.get("HF_TOKEN") != "hf_recipe_token"
    assert received.get("HF_HOME") != "/home/author/.cache"
    assert received.get("CUDA_VISIBLE_DEVICES") != "3"
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert not any("=" in word and word.split("=")[0] in BENIGN[engine] for word in argv), "never part of argv"
