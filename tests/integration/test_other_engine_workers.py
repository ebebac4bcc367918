"""Workers for Ollama, TabbyAPI and MLX through their adapters' real code paths, on real registry recipes: the
worker judges the recipe, the adapter renders the command after the host's executable, and the stand-in
(farm.sim.standin, the simulator speaking that engine's API) records exactly what it was handed, then serves."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from farm.demo import engine_demos, run_demo
from farm.domain import JobState
from farm.engines.admission import check_recipe_for_submit, check_runnable
from farm.recipes.parse import load_recipe
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.engines import _read_version
from farm.worker.profile import load_profile

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "tests" / "fixtures" / "registry"
CANONICAL = json.loads((REGISTRY / "canonical.json").read_text())
OLLAMA_RECIPE = "gemma-4-12b-q4-k-m-rtx-5070-ti-16gb-ollama-tp1.json"
MLX_RECIPE = "pg-mlx-community-qwen3-5-122b-a10b-4bit-4bit-apple-m5-max-128gb-mlx-899213eefa.json"
TABBY_RECIPE = "qwen3827b-exl3-sc3bpw-v4-rtx4080super-tabbyapi-tp1.json"
LMSTUDIO_RECIPE = "gemma-4-e4b-it-4bit-apple-m5-max-128gb-lmstudio-tp1.json"


def write_profile(tmp_path: Path, engine: str, recipe_file: str, section: list[str]) -> Path:
    """A worker for the recipe's hardware whose engine executable is the stand-in for `engine`."""
    recipe = load_recipe(REGISTRY / recipe_file)
    standin = [sys.executable, "-m", "farm.sim.standin", engine]
    path = tmp_path / f"{engine}-worker.toml"
    lines = [
        f'name = "standin-{engine}"',
        "[worker]",
        "lease_s = 4.0",
        "poll_interval_s = 0.1",
        "[hardware]",
        f'hardware_id = "{recipe.hardware_id}"',
        f"count = {recipe.hardware_count}",
        "[engine]",
        f'kind = "{engine}"',
        "stand_in = true",
        "ready_timeout_s = 30.0",
        "stop_grace_s = 2.0",
        f"[engine.{engine}]",
        f"executable = {json.dumps(standin)}",
        *section,
        f"[engine.{engine}.extra_env]",
        f"FARM_FAKE_ARGV_OUT = {json.dumps(str(tmp_path / 'argv.jsonl'))}",
        f"PYTHONPATH = {json.dumps(str(ROOT))}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_job(
    tmp_path: Path,
    store: Store,
    engine: str,
    recipe_file: str,
    section: list[str],
    lengths: tuple[int, int] = (8, 32),
) -> tuple[str, Any]:
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'name = "standin"\nrecipe = {json.dumps(str(REGISTRY / recipe_file))}\nmax_attempts = 1\n'
        "[plan]\nrepeats = 1\nwarmup_requests = 1\ntime_budget_s = 120\nrequest_timeout_s = 30\n"
        f"[plan.decode]\nworkloads = ['code']\nshort_output_tokens = {lengths[0]}\nlong_output_tokens = {lengths[1]}\n"
    )
    (job_id,) = submit_sweep(store, load_sweep(spec), simulate=True)
    worker = Worker(store, load_profile(write_profile(tmp_path, engine, recipe_file, section)), data_dir=tmp_path / "d")
    assert worker.run(max_jobs=1, idle_exit_s=10) == 1
    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    (run,) = store.runs(job_id)
    assert run.provenance is not None
    assert run.provenance["simulated"] is True
    assert {f.key for f in store.results(job_id)} >= {"decode/code/decode_tok_s"}
    return job_id, run.provenance


def recorded(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)


def test_the_four_engines_recipes_are_runnable_at_submit() -> None:
    """Ollama, LM Studio, TabbyAPI and MLX recipes pass the submit check and a worker runs their engine."""
    for name in (OLLAMA_RECIPE, LMSTUDIO_RECIPE, MLX_RECIPE, TABBY_RECIPE):
        recipe = load_recipe(REGISTRY / name)
        check_recipe_for_submit(recipe)
        check_runnable(recipe)


def test_mlx_worker_launches_exactly_the_judged_command(tmp_path: Path, store: Store) -> None:
    """mlx_lm.server gets the recipe's canonical argv and the worker's address, and nothing else."""
    _, prov = run_job(tmp_path, store, "mlx", MLX_RECIPE, [])
    (call,) = recorded(tmp_path)
    port = call["argv"][-1]
    assert call["argv"] == [*CANONICAL[MLX_RECIPE]["argv"], "--host", "127.0.0.1", "--port", port]
    assert prov["argv"][4:] == call["argv"][1:]


def test_ollamas_own_eval_timing_agrees_with_the_clients_decode(tmp_path: Path, store: Store) -> None:
    """Beside the two-point decode, the runner asks Ollama's native /api/generate for the same pair: its own
    `eval_count`/`eval_duration` (the stand-in's from the simulator's truth) give the server's decode rate, and
    the client's figure agrees with it within 1%."""
    recipe = load_recipe(REGISTRY / OLLAMA_RECIPE)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    section = [f"model_paths = {{{json.dumps(recipe.model_id)} = {json.dumps(str(gguf))}}}"]
    # long enough that a millisecond of a loaded machine's jitter is well under 1% of the decode window
    job_id, _ = run_job(tmp_path, store, "ollama", OLLAMA_RECIPE, section, lengths=(32, 544))
    (decode,) = [f for f in store.results(job_id) if f.key == "decode/code/decode_tok_s"]
    report = decode.params["server_report"]
    assert report["source"].startswith("ollama /api/generate")
    assert report["output_tokens"] == [32, 544]  # the plan's short and long lengths, as Ollama counted them
    assert report["decode_tok_s"] > 0
    assert abs(report["client_over_server"] - 1) < 0.01, report
    assert abs(decode.summary.mean / report["decode_tok_s"] - 1) < 0.01


def test_the_worker_judges_against_the_version_its_executable_says(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked at start, the stand-in answers `mlx_lm.server --version` as 0.32.5: the worker judges the recipe with
    the nearest older spec shipped (0.32.2) and its provenance says which, and that the executable said so."""
    monkeypatch.setenv("FARM_STANDIN_VERSION", "0.32.5")
    _read_version.cache_clear()
    try:
        _, prov = run_job(tmp_path, store, "mlx", MLX_RECIPE, [])
    finally:
        _read_version.cache_clear()
    note = prov["engine"]["argument_spec"]
    assert note.startswith("mlx 0.32.2, the nearest older spec shipped for 0.32.5"), note
    assert "0.32.5 read from the executable at start" in note
    (call,) = recorded(tmp_path)  # the question was not a launch: only the server's argv is recorded
    assert call["argv"][0] == "mlx_lm.server"


def test_ollama_worker_serves_then_creates_the_model_from_the_hosts_gguf(tmp_path: Path, store: Store) -> None:
    """`ollama serve` on the worker's loopback port (OLLAMA_HOST), then `ollama create` with a Modelfile from the
    host's GGUF file and the recipe's context; the model is measured under the recipe's model id."""
    recipe = load_recipe(REGISTRY / OLLAMA_RECIPE)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    section = [f"model_paths = {{{json.dumps(recipe.model_id)} = {json.dumps(str(gguf))}}}"]
    run_job(tmp_path, store, "ollama", OLLAMA_RECIPE, section)
    serve, create = recorded(tmp_path)
    assert serve["argv"] == CANONICAL[OLLAMA_RECIPE]["argv"] == ["ollama", "serve"]
    assert create["argv"][:3] == ["ollama", "create", recipe.model_id]
    (modelfile,) = create["files"].values()
    expected = [f"FROM {gguf}"]
    if recipe.serving.max_context_tokens:
        expected.append(f"PARAMETER num_ctx {recipe.serving.max_context_tokens}")
    assert modelfile.splitlines() == expected


def test_tabbyapi_worker_writes_the_judged_config_into_the_run_dir(tmp_path: Path, store: Store) -> None:
    """`python main.py --config FILE`: the file is the recipe's judged config with only the worker's settings
    (where it listens, no API key on loopback, the host's model folder) laid over it."""
    recipe = load_recipe(REGISTRY / TABBY_RECIPE)
    folder = tmp_path / "models" / "Qwen-EXL3"
    folder.mkdir(parents=True)
    section = [
        f"model_paths = {{{json.dumps(recipe.model_id)} = {json.dumps(str(folder))}}}",
        "[engine.policy]",  # the recipe's config names its container's folder, which this host says it has
        f"path_roots = [{json.dumps(str(tmp_path))}, '/workspace/models']",
    ]
    job_id, prov = run_job(tmp_path, store, "tabbyapi", TABBY_RECIPE, section)
    (call,) = recorded(tmp_path)
    assert call["argv"][:2] == ["main.py", "--config"]
    config_path = call["argv"][2]
    assert Path(config_path).name == "tabbyapi-config.yml"
    assert job_id in config_path
    written = json.loads(call["files"][config_path])
    judged = json.loads(CANONICAL[TABBY_RECIPE]["argv"][3])
    assert written["network"].pop("port") > 0
    assert written["network"] == {**judged["network"], "host": "127.0.0.1", "disable_auth": True}
    assert written["model"] == {**judged["model"], "model_dir": str(folder.parent), "model_name": folder.name}
    assert {k: v for k, v in written.items() if k not in ("network", "model")} == {
        k: v for k, v in judged.items() if k not in ("network", "model")
    }
    assert prov["argv"][4:] == call["argv"][1:]


def test_lmstudio_worker_starts_the_server_then_loads_the_judged_model(tmp_path: Path, store: Store) -> None:
    """`lms server start` on the worker's port and loopback address, then `lms load` of the recipe's model key with
    exactly its judged load options (context, parallel slots) under the recipe's model id; at stop every model is
    unloaded and the server stopped (LM Studio's daemon would keep both)."""
    recipe = load_recipe(REGISTRY / LMSTUDIO_RECIPE)
    _, prov = run_job(tmp_path, store, "lmstudio", LMSTUDIO_RECIPE, [])
    calls = [call["argv"] for call in recorded(tmp_path) if call["argv"][1:2] != ["version"]]
    start, load, unload, stop = calls
    port = start[start.index("--port") + 1]
    assert start == ["lms", "server", "start", "--port", port, "--bind", "127.0.0.1"]
    judged = CANONICAL[LMSTUDIO_RECIPE]["argv"]  # lms server start MODEL --context-length 8192 --parallel 1 --gpu max
    model, options = judged[3], judged[4:]
    assert "--context-length" in options
    # the worker serves the model under the recipe's id, and says yes (stdin is closed: no prompt is answered)
    assert load == ["lms", "load", model, *options, "--identifier", recipe.model_id, "--yes"]
    assert unload == ["lms", "unload", "--all"]
    assert stop == ["lms", "server", "stop"]
    assert prov["argv"][4:] == start[1:]
    assert prov["engine"]["version"] == "0.3.0-standin"


@pytest.mark.parametrize("engine", ["ollama", "lmstudio", "tabbyapi", "mlx"])
def test_demo_runs_through_the_engines_adapter(tmp_path: Path, store: Store, engine: str) -> None:
    """`farm demo --engine E`: the demo sweep of E's registry recipe through E's adapter, the simulator standing in
    for E; the job succeeds and its results are marked simulated."""
    spec, profile, _demo = engine_demos()[engine]
    job = run_demo(store, tmp_path / "data", spec=spec, profile=profile, simulate=True)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    (run,) = store.runs(job.id)
    assert run.provenance is not None
    assert run.provenance["simulated"] is True
    assert run.provenance["argv"][1:4] == ["-m", "farm.sim.standin", engine]
    assert any(f.key == "decode/code/decode_tok_s" for f in store.results(job.id))
