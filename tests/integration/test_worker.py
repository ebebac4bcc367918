"""The worker through its real code paths: a real simulator process, a real SQLite store, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from farm.domain import FailureClass, JobState
from farm.engines.process import EngineProcess, group_alive
from farm.recipes.spec import LoadedSweep, load_sweep
from farm.settings import Settings
from farm.store import RunState, Store, recipe_sha256
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.profile import WorkerProfile, load_profile

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED_RECIPE = ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"
TRUTH_DECODE_TOK_S = 200.0
"""The `test` simulator profile decodes 200 tok/s per stream (farm/sim/profiles/test.toml)."""


def write_profile(
    tmp_path: Path,
    *,
    lease_s: float = 4.0,
    faults: tuple[str, ...] = (),
    ready_timeout_s: float = 30.0,
    overrides: dict[str, str] | None = None,
    sim_profile: str = "test",
) -> Path:
    """A simulator worker profile for the seed's hardware, on the fast `test` simulator profile (or another)."""
    lines = [
        'name = "test-sim"',
        "[worker]",
        f"lease_s = {lease_s}",
        "poll_interval_s = 0.1",
        "[hardware]",
        'hardware_id = "rtx-pro-6000-blackwell-96gb"',
        "count = 2",
        "[engine]",
        'kind = "sim"',
        f"ready_timeout_s = {ready_timeout_s}",
        "stop_grace_s = 2.0",
        "[engine.sim]",
        f"profile = {json.dumps(sim_profile)}",
        f"faults = {json.dumps(list(faults))}",
    ]
    if overrides:
        lines.append("[engine.sim.overrides]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in overrides.items()]
    path = tmp_path / "worker.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_spec(tmp_path: Path, *, long_tokens: int = 200, repeats: int = 2, max_attempts: int = 2) -> Path:
    """A small sweep of the seed recipe: decode (code), short TTFT and one prefill length."""
    path = tmp_path / "sweep.toml"
    path.write_text(
        f"""
name = "worker-test"
recipe = "{SEED_RECIPE}"
max_attempts = {max_attempts}
[plan]
repeats = {repeats}
warmup_requests = 1
time_budget_s = 120
request_timeout_s = 30
[plan.decode]
workloads = ["code"]
short_output_tokens = 16
long_output_tokens = {long_tokens}
[plan.short_ttft]
prompt_tokens = 16
[plan.prefill]
prompt_tokens = [2000]
"""
    )
    return path


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh embedded store."""
    return Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)


def submit(store: Store, spec: Path) -> str:
    sweep: LoadedSweep = load_sweep(spec)
    (job_id,) = submit_sweep(store, sweep, simulate=True)
    return job_id


def test_worker_runs_a_job_and_stores_figures_with_provenance(tmp_path: Path, store: Store) -> None:
    """One job on the simulator: succeeded, decode within 1% of the truth, provenance and log stored."""
    job_id = submit(store, write_spec(tmp_path))
    worker = Worker(store, load_profile(write_profile(tmp_path)), data_dir=tmp_path / "data")
    assert worker.run(max_jobs=1, idle_exit_s=5) == 1

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, job.failure_message
    figures = {f.key: f for f in store.results(job_id)}
    decode = figures["decode/code/decode_tok_s"]
    assert decode.summary.n == 2
    assert decode.summary.mean == pytest.approx(TRUTH_DECODE_TOK_S, rel=0.01)
    assert "short_ttft/16/ttft_ms" in figures
    assert "prefill/2000/prefill_tok_s" in figures
    assert {k for k in figures if k.startswith("memory/")} == {"memory/gpu0/peak_memory_gib"}

    (run,) = store.runs(job_id)
    prov = run.provenance
    assert prov is not None
    assert prov["simulated"] is True
    assert prov["engine"]["version"] == "0.0.0+sim"
    assert prov["argv"][1:5] == ["-m", "farm", "sim", "serve"]
    assert prov["recipe_id"] == "deepseek-v4-flash-0731-fp8-e4m3-rtx-pro-6000-blackwell-96gb-vllm-tp2"
    recipe = load_sweep(tmp_path / "sweep.toml").recipe
    assert prov["recipe_sha256"] == recipe_sha256(recipe)
    assert prov["recipe_source_sha256"] == recipe.provenance.content_sha256
    assert prov["method"]["repeats"] == 2
    assert prov["worker_id"] == worker.worker_id
    assert prov["attempt"] == 1
    assert set(prov["prompt_sha256"])
    assert set(prov["output_sha256"])
    (log,) = [a for a in store.artifacts(job_id, 1) if a.name == "engine.log"]
    assert "listening" in log.content


def test_engine_crash_mid_sweep_is_classified_and_leaves_no_process(tmp_path: Path, store: Store) -> None:
    """An engine that dies during the sweep fails the attempt as engine_crashed; its process group is gone."""
    job_id = submit(store, write_spec(tmp_path, long_tokens=2000, max_attempts=1))
    profile = load_profile(write_profile(tmp_path, faults=("--fault-crash-after", "1.5")))
    started: list[int] = []
    worker = Worker(store, profile, data_dir=tmp_path / "data", engine_factory=_recording_factory(started))
    worker.run(max_jobs=1, idle_exit_s=5)

    job = store.get_job(job_id)
    assert job.state == JobState.FAILED
    assert job.failure_class == FailureClass.ENGINE_CRASHED
    assert started
    assert not group_alive(started[0])
    assert store.results(job_id) == []


def test_startup_timeout_is_classified(tmp_path: Path, store: Store) -> None:
    """An engine not ready within the profile's deadline fails as startup_timeout and is stopped. It never
    reached its engine, so this first failed start is not charged: the job is queued again with its budget of
    one attempt whole."""
    job_id = submit(store, write_spec(tmp_path, max_attempts=1))
    profile = load_profile(write_profile(tmp_path, faults=("--fault-startup-delay", "60"), ready_timeout_s=1.5))
    started: list[int] = []
    worker = Worker(store, profile, data_dir=tmp_path / "data", engine_factory=_recording_factory(started))
    worker.run(max_jobs=1, idle_exit_s=5)
    job = store.get_job(job_id)
    assert job.state == JobState.QUEUED
    assert job.failure_class == FailureClass.STARTUP_TIMEOUT
    assert [r.failure_class for r in store.runs(job_id)] == [FailureClass.STARTUP_TIMEOUT]
    assert started
    assert not group_alive(started[0])


def test_cancel_stops_a_running_job(tmp_path: Path, store: Store) -> None:
    """Cancelling a running job stops its worker at the next heartbeat; no figure is stored."""
    job_id = submit(store, write_spec(tmp_path, long_tokens=4000))
    worker = Worker(store, load_profile(write_profile(tmp_path, lease_s=1.0)), data_dir=tmp_path / "data")
    thread = threading.Thread(target=worker.run, kwargs={"max_jobs": 1, "idle_exit_s": 5})
    thread.start()
    _wait_for(lambda: store.get_job(job_id).phase == "measuring", 30)
    store.cancel(job_id)
    started = time.monotonic()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert time.monotonic() - started < 15
    assert store.get_job(job_id).state == JobState.CANCELLED
    assert store.results(job_id) == []


def test_sigkill_mid_job_ends_in_exactly_one_completed_run(tmp_path: Path) -> None:
    """A worker killed with SIGKILL mid-job: its engine dies with it, the lease expires, the job is reaped and
    a second worker completes it. Exactly one run succeeded, and only its figures are stored."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    store = Store.open(url, auto_upgrade=True)
    job_id = submit(store, write_spec(tmp_path, long_tokens=600))
    profile_path = write_profile(tmp_path, lease_s=2.0)
    env = {
        **os.environ,
        "FARM_DATABASE_URL": url,
        "FARM_DATA_DIR": str(tmp_path / "data"),
        "FARM_LOG_FORMAT": "json",
    }
    first_log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(
        [sys.executable, "-m", "farm", "worker", "--profile", str(profile_path), "--worker-id", "first"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=first_log,
    )
    try:
        _wait_for(lambda: store.get_job(job_id).phase == "measuring", 60)
        engine_pids = _children_of(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
        first_log.close()
    assert engine_pids, "the worker had started its engine"
    _wait_for(lambda: not any(_pid_alive(p) for p in engine_pids), 10)

    with (tmp_path / "second.log").open("w") as second_log:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "farm",
                "worker",
                "--profile",
                str(profile_path),
                "--worker-id",
                "second",
                "--max-jobs",
                "1",
                "--idle-exit",
                "20",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=second_log,
            timeout=120,
        )
    assert second.returncode == 0, (tmp_path / "second.log").read_text()[-3000:]

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED
    runs = store.runs(job_id)
    assert [(r.attempt, r.worker_id, r.state.value) for r in runs] == [
        (1, "first", "failed"),
        (2, "second", "succeeded"),
    ]
    assert runs[0].failure_class == FailureClass.HOST_LOST
    assert [f.summary.n for f in store.results(job_id) if f.key == "decode/code/decode_tok_s"] == [2]


def _recording_factory(started: list[int]) -> Any:
    from farm.worker.engines import default_engine_factory

    def factory(recipe: Any, profile: WorkerProfile, port: int, log_path: Path, probe: Any) -> Any:
        engine = default_engine_factory(recipe, profile, port, log_path, probe)
        original_start = engine.start

        def start() -> None:
            original_start()
            assert isinstance(engine, EngineProcess)
            assert engine.pid is not None
            started.append(engine.pid)

        engine.start = start  # type: ignore[method-assign]  # the test wraps the engine's start to record its pid
        return engine

    return factory


def _wait_for(predicate: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(0.05)


def _children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def write_small_spec(tmp_path: Path, *, max_attempts: int = 2, prompt_tokens: int = 16) -> Path:
    """A one-request sweep (short TTFT only): the quickest real job."""
    path = tmp_path / "small.toml"
    path.write_text(
        f"""
name = "small"
recipe = "{SEED_RECIPE}"
max_attempts = {max_attempts}
[plan]
repeats = 1
warmup_requests = 0
time_budget_s = 60
request_timeout_s = 30
[plan.short_ttft]
prompt_tokens = {prompt_tokens}
"""
    )
    return path


def test_beside_a_host_whose_engine_never_starts_every_healthy_job_succeeds(tmp_path: Path, store: Store) -> None:
    """Embedded mode, two workers: one whose engine dies at every start (its simulator profile does not exist),
    one healthy. Every job succeeds, none spends its budget on the broken host, and the broken host is quarantined
    within K failed starts and then claims nothing."""
    sweep = load_sweep(write_small_spec(tmp_path, max_attempts=2))
    job_ids = submit_sweep(store, sweep, simulate=True, count=6, broker_url=None)
    settings = Settings(quarantine_after=3, retry_backoff_s=0.5, self_check_interval_s=3600, poll_interval_s=0.1)
    (tmp_path / "broken").mkdir()
    broken = Worker(
        store,
        load_profile(write_profile(tmp_path / "broken", overrides=None, sim_profile="does-not-exist")),
        data_dir=tmp_path / "data-broken",
        worker_id="broken",
        settings=settings,
    )
    healthy = Worker(
        store,
        load_profile(write_profile(tmp_path)),
        data_dir=tmp_path / "data-healthy",
        worker_id="healthy",
        settings=settings,
    )
    threads = [threading.Thread(target=w.run, kwargs={"idle_exit_s": 120}) for w in (broken, healthy)]
    for thread in threads:
        thread.start()
    try:
        _wait_for(lambda: all(store.get_job(j).state.finished for j in job_ids), 150)
    finally:
        broken.shutdown()
        healthy.shutdown()
        for thread in threads:
            thread.join(timeout=60)
    states = {j: store.get_job(j).state for j in job_ids}
    assert set(states.values()) == {JobState.SUCCEEDED}, states
    runs = [r for j in job_ids for r in store.runs(j)]
    broken_runs = [r for r in runs if r.worker_id == "broken"]
    # Failed starts of one recipe are one strike until the recipe is seen to start on another host
    # (Store._host_attributed_failures): on a loaded machine the broken host may fail more than K before the
    # healthy host's first job has ended, and is quarantined at its first failure after that.
    first_success = min(r.finished_at for r in runs if r.state == RunState.SUCCEEDED and r.finished_at)
    before = sum(1 for r in broken_runs if r.finished_at is not None and r.finished_at < first_success)
    assert 1 <= len(broken_runs) <= max(settings.quarantine_after, before + 2), (len(broken_runs), before)
    assert {r.failure_class for r in broken_runs} == {FailureClass.ENGINE_START_FAILED}
    reason = store.quarantine_reason("broken")
    assert reason is not None
    assert "in a row" in reason
    assert all(r.worker_id == "healthy" for j in job_ids for r in store.runs(j) if r.state.value == "succeeded")


def test_a_prompt_beyond_the_context_fails_the_job_on_its_first_attempt(tmp_path: Path, store: Store) -> None:
    """The engine refuses the request (HTTP 400, maximum context length): the job fails at once as
    context_too_long with attempts left, and is not retried."""
    sweep = load_sweep(write_small_spec(tmp_path, max_attempts=3, prompt_tokens=400))
    (job_id,) = submit_sweep(store, sweep, simulate=True, broker_url=None)
    profile = load_profile(write_profile(tmp_path, overrides={"max_model_len": "256"}))
    worker = Worker(store, profile, data_dir=tmp_path / "data", settings=Settings(poll_interval_s=0.1))
    assert worker.run(idle_exit_s=3) == 1
    job = store.get_job(job_id)
    assert (job.state, job.failure_class, job.attempt) == (JobState.FAILED, FailureClass.CONTEXT_TOO_LONG, 1)
    assert "maximum context length" in (job.failure_message or "")
    assert len(store.runs(job_id)) == 1


@pytest.mark.parametrize("healthy", [True, False], ids=["passes", "fails"])
def test_a_quarantined_host_returns_after_a_self_check_that_serves(healthy: bool, tmp_path: Path, store: Store) -> None:
    """A quarantined host starts its engine with no job: one that serves returns the host to rotation; one that
    dies at start leaves it quarantined, and no engine is left behind either way."""
    profile = load_profile(write_profile(tmp_path, sim_profile="test" if healthy else "does-not-exist"))
    started: list[int] = []
    worker = Worker(
        store,
        profile,
        data_dir=tmp_path / "data",
        worker_id="checked",
        engine_factory=_recording_factory(started),
        settings=Settings(self_check_interval_s=3600),
    )
    store.register_worker("checked", host="host-checked", hardware_classes=list(worker.hardware_classes))
    store.quarantine("checked", "the engine failed to start 3 times in a row")
    reason = worker.check_quarantine()
    assert (reason is None) is healthy
    assert (store.quarantine_reason("checked") is None) is healthy
    if started:
        _wait_for(lambda: not group_alive(started[0]), 10)
    assert worker.check_quarantine() == (None if healthy else "the engine failed to start 3 times in a row")
