"""Dispatch across workers: farm mode (Celery on Redis, PostgreSQL) against embedded mode (polling SQLite).

N tiny jobs on the simulator (one short-TTFT request each, so a job is mostly its engine's start and stop) run
by W real `farm worker` processes. Printed for each mode:

- submit → claim: from the job's row to its first claim (includes waiting behind earlier jobs: a backlog);
- pickup: from the moment a worker could have taken the job (the later of its submission and the end of the
  worker's previous run) to its claim: the cost of the wake-up channel itself;
- jobs per second, from the first submission to the last finish;
- lost jobs (not succeeded at the end) and duplicated ones (more than one run).

    uv run python bench/farm_dispatch.py                 # 200 jobs, 4 workers, both modes
    uv run python bench/farm_dispatch.py --jobs 40 --mode farm

Needs redis-server on PATH and the PostgreSQL of FARM_TEST_POSTGRES_URL (default: local, trust auth).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from farm.domain import JobState
from farm.net import free_port
from farm.queue.announce import Announcer
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.recipes.sweep import ShortTTFTPlan, SweepPlan
from farm.store import RunState, Store
from farm.worker.profile import simulated_class

POSTGRES_URL = os.environ.get("FARM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
HARDWARE_ID = "rtx-pro-6000-blackwell-96gb"
POLL_INTERVAL_S = 0.2
"""Embedded workers poll this often (the demo profile's interval)."""


def write_profile(directory: Path) -> Path:
    path = directory / "bench-worker.toml"
    path.write_text(
        f"""name = "bench"
[worker]
lease_s = 60.0
poll_interval_s = {POLL_INTERVAL_S}
[hardware]
hardware_id = "{HARDWARE_ID}"
count = 2
[engine]
kind = "sim"
ready_timeout_s = 120.0
stop_grace_s = 2.0
[engine.sim]
profile = "test"
"""
    )
    return path


def store_jobs(store: Store, count: int) -> tuple[list[str], str]:
    recipe = Recipe(
        id="bench-sim",
        model_id="sim/bench-model",
        hardware_id=HARDWARE_ID,
        hardware_count=2,
        engine=Engine(name="vllm", version="0.11.0"),
        argv=("vllm", "serve", "sim/bench-model"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="ab" * 32),
    )
    plan = SweepPlan(
        repeats=1,
        warmup_requests=0,
        time_budget_s=120,
        request_timeout_s=60,
        short_ttft=ShortTTFTPlan(prompt_tokens=16),
    )
    klass = simulated_class(recipe.hardware_class)
    ids = store.submit(
        recipe, "bench", plan.model_dump(mode="json"), "cd" * 32, 2, True, count=count, hardware_class=klass
    )
    return ids, klass


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    schema = f"farm_bench_{secrets.token_hex(4)}"
    admin = sa.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextlib.contextmanager
def workers(directory: Path, count: int, env: dict[str, str]) -> Iterator[None]:
    profile = write_profile(directory)
    procs = []
    for index in range(count):
        log = (directory / f"worker-{index}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "farm", "worker", "--profile", str(profile), "--worker-id", f"w{index}"],
                env={**os.environ, **env, "FARM_DATA_DIR": str(directory / f"data-{index}"), "FARM_LOG_FORMAT": "json"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_started(store: Store, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while len(store.list_workers()) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(store.list_workers())} of {count} workers started")
        time.sleep(0.2)
    time.sleep(3)  # registered before Celery consumes (farm) or before the first poll (embedded): let them settle


def wait_done(store: Store, job_ids: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        active = store.list_jobs([JobState.QUEUED, JobState.RUNNING], limit=len(job_ids) + 10)
        if not active:
            return
        time.sleep(0.5)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(mode: str, store: Store, job_ids: list[str]) -> None:
    jobs = {j.id: j for j in store.list_jobs(None, limit=len(job_ids) + 10)}
    runs = {job_id: store.runs(job_id) for job_id in job_ids}
    submit_to_claim = [(runs[j][0].started_at - jobs[j].created_at).total_seconds() for j in job_ids if runs[j]]
    by_worker: dict[str, list[tuple[datetime, datetime | None, str]]] = {}
    for job_id, job_runs in runs.items():
        for run in job_runs:
            by_worker.setdefault(run.worker_id, []).append((run.started_at, run.finished_at, job_id))
    pickup = []
    for entries in by_worker.values():
        entries.sort()
        previous_end: datetime | None = None
        for started, finished, job_id in entries:
            ready = jobs[job_id].created_at if previous_end is None else max(jobs[job_id].created_at, previous_end)
            pickup.append(max(0.0, (started - ready).total_seconds()))
            previous_end = finished
    finished_at = [r.finished_at for rs in runs.values() for r in rs if r.finished_at is not None]
    first = min(j.created_at for j in jobs.values())
    span = (max(finished_at) - first).total_seconds() if finished_at else float("nan")
    succeeded = [j for j in job_ids if jobs[j].state == JobState.SUCCEEDED]
    duplicated = [j for j in job_ids if len(runs[j]) > 1 or sum(r.state == RunState.SUCCEEDED for r in runs[j]) > 1]
    ms = 1000.0
    print(f"\n{mode}: {len(job_ids)} jobs, {len(by_worker)} workers")
    print(
        f"  submit -> claim   p50 {statistics.median(submit_to_claim) * ms:9.1f} ms   "
        f"p99 {percentile(submit_to_claim, 0.99) * ms:9.1f} ms   (includes the backlog)"
    )
    print(
        f"  pickup            p50 {statistics.median(pickup) * ms:9.1f} ms   "
        f"p99 {percentile(pickup, 0.99) * ms:9.1f} ms   (worker free -> claim)"
    )
    print(f"  throughput        {len(succeeded) / span:.2f} jobs/s over {span:.1f} s")
    print(f"  lost              {len(job_ids) - len(succeeded)}")
    print(f"  duplicated        {len(duplicated)}")


def run_farm(jobs: int, worker_count: int, timeout_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, postgres_schema() as url:
        directory = Path(tmp)
        Store.open(url, auto_upgrade=True).close()
        store = Store.open(url)
        with redis_server(directory) as broker:
            env = {"FARM_DATABASE_URL": url, "FARM_BROKER_URL": broker}
            with workers(directory, worker_count, env):
                wait_started(store, worker_count)
                job_ids, klass = store_jobs(store, jobs)
                announcer = Announcer.from_url(broker)
                for job_id in job_ids:
                    announcer.announce(job_id, klass, 0)
                announcer.close()
                wait_done(store, job_ids, timeout_s)
            report("farm (Celery on Redis, PostgreSQL)", store, job_ids)
        store.close()


def run_embedded(jobs: int, worker_count: int, timeout_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
        directory = Path(tmp)
        url = f"sqlite:///{directory / 'farm.db'}"
        store = Store.open(url, auto_upgrade=True)
        with workers(directory, worker_count, {"FARM_DATABASE_URL": url}):
            wait_started(store, worker_count)
            job_ids, _ = store_jobs(store, jobs)
            wait_done(store, job_ids, timeout_s)
        report(f"embedded (polling SQLite every {POLL_INTERVAL_S} s)", store, job_ids)
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--mode", choices=["both", "farm", "embedded"], default="both")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the jobs of one mode")
    args = parser.parse_args()
    if args.mode in ("both", "farm"):
        run_farm(args.jobs, args.workers, args.timeout)
    if args.mode in ("both", "embedded"):
        run_embedded(args.jobs, args.workers, args.timeout)


if __name__ == "__main__":
    main()
