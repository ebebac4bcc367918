"""The worker through its real code paths with the parts of issues 8, 11 and 12 wired in: open-loop plans,
endpoint engines, engine counters of other families, SGLang through the simulator."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from farm.domain import JobState
from farm.recipes.spec import load_sweep
from farm.sim.launch import running_sim
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED_RECIPE = ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"


def write_sim_profile(tmp_path: Path) -> Path:
    """A simulator worker for the seed's hardware on the fast `test` simulator profile."""
    path = tmp_path / "worker.toml"
    path.write_text(
        "\n".join(
            [
                'name = "wiring-sim"',
                "[worker]",
                "lease_s = 4.0",
                "poll_interval_s = 0.1",
                "[hardware]",
                'hardware_id = "rtx-pro-6000-blackwell-96gb"',
                "count = 2",
                "[engine]",
                'kind = "sim"',
                "ready_timeout_s = 30.0",
                "stop_grace_s = 2.0",
                "[engine.sim]",
                'profile = "test"',
            ]
        )
        + "\n"
    )
    return path


def write_spec(tmp_path: Path, body: str, *, recipe: Path = SEED_RECIPE) -> Path:
    """A small sweep spec of `recipe` with the given plan sections."""
    path = tmp_path / "sweep.toml"
    path.write_text(
        f'name = "wiring"\nrecipe = {json.dumps(str(recipe))}\nmax_attempts = 1\n'
        "[plan]\nrepeats = 1\nwarmup_requests = 1\ntime_budget_s = 120\nrequest_timeout_s = 30\n" + body
    )
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh embedded store."""
    return Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)


def run_one(store: Store, worker: Worker, spec: Path) -> str:
    """Submit the spec as a simulated job, let the worker run it, return the job id once it has ended."""
    (job_id,) = submit_sweep(store, load_sweep(spec), simulate=True)
    assert worker.run(max_jobs=1, idle_exit_s=10) == 1
    return job_id


def test_open_loop_plan_runs_through_the_worker_and_stores_its_figures(tmp_path: Path, store: Store) -> None:
    """A spec whose only measurement is [plan.open_loop] runs on a simulator worker with no daemon change: the
    worker's run_sweep reads the section from the job's plan and the open-loop figures are stored."""
    spec = write_spec(
        tmp_path,
        "[plan.open_loop]\nprocess = 'constant'\nrates_rps = [4.0]\nrequests = 6\n"
        "prompt_tokens = 64\noutput_tokens = 16\n[plan.open_loop.slo]\nttft_ms = 5000\n",
    )
    worker = Worker(store, load_profile(write_sim_profile(tmp_path)), data_dir=tmp_path / "data")
    job_id = run_one(store, worker, spec)

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    figures = {f.key: f for f in store.results(job_id)}
    open_loop = {key: figure for key, figure in figures.items() if key.startswith("open_loop/")}
    assert open_loop, f"no open-loop figures among {sorted(figures)}"
    (offered,) = [f for key, f in open_loop.items() if key.endswith("/offered_rps")]
    assert offered.summary.mean == pytest.approx(4.0)
    (good,) = [f for key, f in open_loop.items() if key.endswith("/good_fraction")]
    assert 0.0 < good.summary.mean <= 1.0
    (run,) = store.runs(job_id)
    assert run.provenance is not None
    assert run.provenance["method"]["open_loop"]["rates_rps"] == [4.0]


def write_endpoint_profile(tmp_path: Path, url: str, served: dict[str, str]) -> Path:
    """An endpoint worker (the seed's hardware, declared) measuring the simulator at `url`."""
    path = tmp_path / "endpoint-worker.toml"
    lines = [
        'name = "wiring-endpoint"',
        "[worker]",
        "lease_s = 4.0",
        "poll_interval_s = 0.1",
        "[hardware]",
        'hardware_id = "rtx-pro-6000-blackwell-96gb"',
        "count = 2",
        "[engine]",
        'kind = "endpoint"',
        "ready_timeout_s = 30.0",
        "[engine.endpoint]",
        f"url = {json.dumps(url)}",
        "simulated = true",
        "[engine.endpoint.served_models]",
        *[f"{json.dumps(model)} = {json.dumps(name)}" for model, name in served.items()],
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_endpoint_worker_measures_a_server_it_did_not_start(tmp_path: Path, store: Store) -> None:
    """A worker whose profile names an endpoint (a simulator started separately) runs a job on it, stores the
    run with provenance engine kind "endpoint" and the URL without credentials, and leaves the server running."""
    recipe = load_sweep(write_spec(tmp_path, "[plan.short_ttft]\nprompt_tokens = 16\n")).recipe
    with running_sim(model="sim-served", faults=("--fault-startup-delay", "0")) as sim:
        url = sim.base_url.replace("http://", "http://me:hunter2@")
        profile = load_profile(write_endpoint_profile(tmp_path, url, {recipe.model_id: "sim-served"}))
        spec = write_spec(
            tmp_path,
            "[plan.decode]\nworkloads = ['code']\nshort_output_tokens = 8\nlong_output_tokens = 64\n"
            "[plan.short_ttft]\nprompt_tokens = 16\n",
        )
        worker = Worker(store, profile, data_dir=tmp_path / "data")
        job_id = run_one(store, worker, spec)
        assert sim.alive(), "the worker must not stop a server it did not start"

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    figures = {f.key for f in store.results(job_id)}
    assert {"decode/code/decode_tok_s", "short_ttft/16/ttft_ms"} <= figures
    (run,) = store.runs(job_id)
    prov = run.provenance
    assert prov is not None
    assert prov["engine"]["kind"] == "endpoint"
    assert prov["engine"]["launched_by_farm"] is False
    assert prov["engine"]["url"] == sim.base_url
    assert prov["engine"]["version"] == "0.0.0+sim"
    assert prov["simulated"] is True
    assert prov["argv"] == []
    assert "hunter2" not in json.dumps(prov)


FAKE_SGLANG = ROOT / "tests" / "fixtures" / "fake_engines" / "sglang_module"
SGLANG_RECIPE = """{"schema_version": "local-ai-registry/v1", "id": "sglang-on-the-sim", "hardware_id": "cpu",
 "hardware_count": 1, "engine": {"name": "sglang"},
 "argv": ["python3", "-m", "sglang.launch_server", "--model-path", "org/m", "--context-length", "4096"]}"""


def write_sglang_profile(tmp_path: Path) -> Path:
    """An SGLang worker whose `python -m sglang.launch_server` is the fake that execs the simulator in SGLang's
    dialect (its package is put on PYTHONPATH by the profile's own extra_env)."""
    path = tmp_path / "sglang-worker.toml"
    lines = [
        'name = "wiring-sglang"',
        "[worker]",
        "lease_s = 4.0",
        "poll_interval_s = 0.1",
        "[hardware]",
        'hardware_id = "cpu"',
        "count = 1",
        "[engine]",
        'kind = "sglang"',
        "ready_timeout_s = 30.0",
        "stop_grace_s = 2.0",
        "[engine.sglang]",
        f"executable = [{json.dumps(sys.executable)}, '-m', 'sglang.launch_server']",
        "[engine.sglang.extra_env]",
        f"PYTHONPATH = {json.dumps(str(FAKE_SGLANG))}",
        f"FARM_FAKE_ARGV_OUT = {json.dumps(str(tmp_path / 'argv.json'))}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sglang_worker_runs_a_job_on_the_simulator_speaking_sglang(tmp_path: Path, store: Store) -> None:
    """The worker launches the SGLang adapter's canonical command; the fake launcher becomes the simulator in
    SGLang's dialect; the job succeeds, the version comes from /get_server_info (there is no /version), and the
    decode's token cross-check reads SGLang's own counters (sglang:generation_tokens_total)."""
    recipe = tmp_path / "sglang.json"
    recipe.write_text(SGLANG_RECIPE)
    spec = write_spec(
        tmp_path,
        "[plan.decode]\nworkloads = ['code']\nshort_output_tokens = 8\nlong_output_tokens = 64\n",
        recipe=recipe,
    )
    (job_id,) = submit_sweep(store, load_sweep(spec), simulate=False)
    worker = Worker(store, load_profile(write_sglang_profile(tmp_path)), data_dir=tmp_path / "data")
    assert worker.run(max_jobs=1, idle_exit_s=10) == 1

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    launched = json.loads((tmp_path / "argv.json").read_text())
    assert launched[1:5] == ["--model-path", "org/m", "--context-length", "4096"]
    assert launched[-6:] == ["--served-model-name", "org/m", "--host", "127.0.0.1", "--port", launched[-1]]

    (decode,) = [f for f in store.results(job_id) if f.key == "decode/code/decode_tok_s"]
    (counted,) = decode.params["server_counter_deltas"]
    (usage,) = decode.params["usage_completion_tokens"]
    assert counted["vllm:generation_tokens"] == usage == 8 + 64
    (run,) = store.runs(job_id)
    prov = run.provenance
    assert prov is not None
    assert prov["engine"]["name"] == "sglang"
    assert prov["engine"]["version"] == "0.0.0+sim"
    assert prov["argv"][1:3] == ["-m", "sglang.launch_server"]
