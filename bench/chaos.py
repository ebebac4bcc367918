"""Chaos in farm mode: real Redis (a private redis-server per trial), real PostgreSQL (a fresh schema per trial,
reached through a TCP proxy this script controls), three real `farm worker` processes on the simulator.

Trials (each a few tiny jobs, bounded by a deadline):

- worker_sigkill     the worker running a job is killed with SIGKILL mid-job
- broken_host        one of the three workers has an engine that dies at every start
- redis_kill_aof     Redis (appendonly, everysec) killed with SIGKILL mid-run and restarted
- redis_kill_no_aof  Redis without persistence killed and restarted: its queued messages are gone
- db_outage          PostgreSQL unreachable for longer than the lease (through the proxy) while jobs run
- duplicate_delivery every job's message sent four times
- sigterm_finish     SIGTERM to a busy worker with on_sigterm = finish
- sigterm_release    SIGTERM to a busy worker with on_sigterm = release
- poison_job         a job whose request the engine refuses (prompt beyond the context), among healthy ones

Printed per trial: jobs submitted, succeeded, lost (a healthy job that ended without succeeding; the poison
job is expected to fail, and its note says how), run twice (a job with more than one succeeded run), stuck (not
finished at the deadline), orphan engine processes (simulators still alive, found by their working directory,
after every worker stopped), and the time to recover (from the fault to the last job finished).

    nice -n 10 uv run python bench/chaos.py                # every trial
    nice -n 10 uv run python bench/chaos.py --trials worker_sigkill,db_outage

Needs redis-server on PATH and the PostgreSQL of FARM_TEST_POSTGRES_URL (default: local, trust auth). The shared
PostgreSQL server is never stopped: an "outage" closes the proxy in front of it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from farm_harness import (  # noqa: E402 - the integration tests' harness, on the path just above
    POSTGRES_URL,
    FarmWorker,
    RedisServer,
    TcpProxy,
    aof_contains,
    postgres_schema,
    store_jobs,
    tiny_plan,
    wait_for,
    write_profile,
)

from farm.domain import JobState  # noqa: E402
from farm.queue.announce import Announcer  # noqa: E402
from farm.queue.celery_app import queue_name  # noqa: E402
from farm.recipes.sweep import ShortTTFTPlan, SweepPlan  # noqa: E402
from farm.store import RunState, Store  # noqa: E402

DEADLINE_S = 120.0
"""A trial's jobs must all finish within this long after its fault, or the rest count as stuck."""

LEASE_S = 4.0
"""The workers' lease: short, so a lost host is noticed within seconds."""

WORKER_ENV = {
    "FARM_SWEEP_INTERVAL_S": "0.5",
    "FARM_ANNOUNCE_GRACE_S": "1",
    "FARM_ANNOUNCE_STALE_S": "5",
    "FARM_RETRY_BACKOFF_S": "1",
    "FARM_QUARANTINE_AFTER": "3",
    "FARM_SELF_CHECK_INTERVAL_S": "3600",
}


@dataclass
class Row:
    trial: str
    submitted: int = 0
    succeeded: int = 0
    lost: int = 0
    run_twice: int = 0
    stuck: int = 0
    orphans: int = 0
    recover_s: float = 0.0
    note: str = ""


@dataclass
class Trial:
    """One trial's world: its directory, Redis, schema (direct and proxied URLs), store and workers."""

    name: str
    directory: Path
    redis: RedisServer
    proxy: TcpProxy
    direct_url: str
    proxied_url: str
    store: Store
    workers: list[FarmWorker] = field(default_factory=list)
    healthy: list[str] = field(default_factory=list)
    poison: list[str] = field(default_factory=list)

    def start_worker(self, name: str, *, sim_profile: str = "test", via_proxy: bool = False, **env: str) -> FarmWorker:
        profile = write_profile(self.directory, name, lease_s=LEASE_S, sim_profile=sim_profile)
        worker = FarmWorker(
            self.directory,
            name,
            profile,
            database_url=self.proxied_url if via_proxy else self.direct_url,
            broker_url=self.redis.url,
            **(WORKER_ENV | env),
        )
        self.workers.append(worker)
        return worker

    def wait_registered(self) -> None:
        wait_for(lambda: len(self.store.list_workers()) == len(self.workers), 90, "every worker registered")

    def submit(
        self, n: int, plan: SweepPlan | None = None, *, poison: bool = False, announce: bool = True
    ) -> list[str]:
        ids, klass = store_jobs(self.store, n=n, max_attempts=3, plan=plan or tiny_plan(decode_tokens=400))
        if announce:
            announcer = Announcer.from_url(self.redis.url)
            try:
                for job_id in ids:
                    announcer.announce(job_id, klass, 0)
            finally:
                announcer.close()
        (self.poison if poison else self.healthy).extend(ids)
        return ids

    def running_owner(self) -> FarmWorker:
        """The worker of a job that is measuring now (waits for one)."""
        job = wait_for(
            lambda: next((j for j in self.store.list_jobs([JobState.RUNNING]) if j.phase == "measuring"), None),
            60,
            "a job measuring",
        )
        return next(w for w in self.workers if w.worker_id == job.owner)

    def all_finished(self) -> bool:
        return all(self.store.get_job(j).state.finished for j in self.healthy + self.poison)


def _orphans(directory: Path) -> int:
    """Processes whose working directory is the trial's (engines inherit the worker's)."""
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(proc / "cwd")) == directory and "sim" in (proc / "cmdline").read_text():
                count += 1
    return count


@contextlib.contextmanager
def trial_world(name: str, root: Path, *, appendonly: bool = True) -> Iterator[Trial]:
    directory = root / name
    directory.mkdir(parents=True)
    proxy = TcpProxy(target_port=sa.engine.make_url(POSTGRES_URL).port or 5432)
    proxy.up()
    redis = RedisServer(directory / "redis", appendonly=appendonly)
    redis.start()
    try:
        with postgres_schema(port=proxy.port) as (direct, proxied), Store.open(direct) as store:
            trial = Trial(name, directory, redis, proxy, direct, proxied, store)
            try:
                yield trial
            finally:
                for worker in trial.workers:
                    worker.stop()
    finally:
        redis.kill()
        proxy.close()


def measure(trial: Trial, fault_at: float) -> Row:
    """Wait for every job to finish (bounded), then count."""
    with contextlib.suppress(AssertionError):
        wait_for(trial.all_finished, DEADLINE_S, "every job finished")
    last_finish = max(
        (j.updated_at.timestamp() for j in (trial.store.get_job(i) for i in trial.healthy + trial.poison)),
        default=time.time(),
    )
    row = Row(trial.name, submitted=len(trial.healthy) + len(trial.poison))
    for job_id in trial.healthy + trial.poison:
        job = trial.store.get_job(job_id)
        runs = trial.store.runs(job_id)
        succeeded_runs = sum(1 for r in runs if r.state == RunState.SUCCEEDED)
        row.run_twice += succeeded_runs > 1
        if not job.state.finished:
            row.stuck += 1
        elif job.state == JobState.SUCCEEDED:
            row.succeeded += 1
        if job.state.finished and job.state != JobState.SUCCEEDED and job_id in trial.healthy:
            row.lost += 1
    for worker in trial.workers:
        worker.stop()
    with contextlib.suppress(AssertionError):  # an engine's parent-death signal may take a moment
        wait_for(lambda: _orphans(trial.directory) == 0, 10, "engines gone")
    row.orphans = _orphans(trial.directory)
    row.recover_s = max(0.0, last_finish - fault_at)
    return row


# --- the trials ----------------------------------------------------------------------------------------------


def worker_sigkill(trial: Trial) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name)
    trial.wait_registered()
    trial.submit(6)
    victim = trial.running_owner()
    fault = time.time()
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    return measure(trial, fault)


def broken_host(trial: Trial) -> Row:
    trial.start_worker("broken", sim_profile="does-not-exist")
    trial.start_worker("b")
    trial.start_worker("c")
    trial.wait_registered()
    fault = time.time()
    trial.submit(9, tiny_plan())
    row = measure(trial, fault)
    reason = trial.store.quarantine_reason("broken")
    row.note = "broken host quarantined" if reason else "broken host not quarantined"
    return row


def _redis_kill(trial: Trial) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name)
    trial.wait_registered()
    ids = trial.submit(6)
    wait_for(lambda: trial.store.get_job(ids[0]).state == JobState.RUNNING, 60, "a job running")
    if trial.redis.appendonly:
        needle = queue_name(trial.store.get_job(ids[0]).hardware_class).encode()
        wait_for(lambda: aof_contains(trial.redis.directory, needle), 10, "the messages in the AOF")
    fault = time.time()
    trial.redis.kill()
    trial.redis.start()
    return measure(trial, fault)


def redis_kill_aof(trial: Trial) -> Row:
    return _redis_kill(trial)


def redis_kill_no_aof(trial: Trial) -> Row:
    return _redis_kill(trial)


def db_outage(trial: Trial) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name, via_proxy=True)
    trial.wait_registered()
    trial.submit(6)
    trial.running_owner()
    fault = time.time()
    trial.proxy.down()
    outage_s = 4 * LEASE_S
    wait_for(lambda: time.time() - fault >= outage_s, outage_s + 5, "the end of the outage")
    trial.proxy.up()
    row = measure(trial, fault)
    delivered = sum(len(w.events("spool.delivered")) for w in trial.workers)
    refused = sum(len(w.events("spool.refused")) for w in trial.workers)
    row.note = f"outage {outage_s:.0f} s > lease {LEASE_S:.0f} s; spool delivered {delivered}, refused {refused}"
    return row


def duplicate_delivery(trial: Trial) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name)
    trial.wait_registered()
    ids = trial.submit(6, announce=False)
    fault = time.time()
    announcer = Announcer.from_url(trial.redis.url)
    try:
        for _copy in range(4):
            for job_id in ids:
                announcer.forget(job_id)
                announcer.announce(job_id, trial.store.get_job(job_id).hardware_class, 0)
    finally:
        announcer.close()
    row = measure(trial, fault)
    row.note = f"{4 * len(ids)} messages for {len(ids)} jobs"
    return row


def _sigterm(trial: Trial, policy: str) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name, FARM_ON_SIGTERM=policy)
    trial.wait_registered()
    trial.submit(6)
    victim = trial.running_owner()
    fault = time.time()
    victim.signal(signal.SIGTERM)
    row = measure(trial, fault)
    row.note = f"the stopped worker exited {victim.proc.poll()}"
    return row


def sigterm_finish(trial: Trial) -> Row:
    return _sigterm(trial, "finish")


def sigterm_release(trial: Trial) -> Row:
    return _sigterm(trial, "release")


def poison_job(trial: Trial) -> Row:
    for name in ("a", "b", "c"):
        trial.start_worker(name)
    trial.wait_registered()
    fault = time.time()
    (poison,) = trial.submit(
        1,
        SweepPlan(
            repeats=1,
            warmup_requests=0,
            time_budget_s=60,
            request_timeout_s=30,
            short_ttft=ShortTTFTPlan(prompt_tokens=40_000),
        ),
        poison=True,
    )
    trial.submit(5, tiny_plan())
    row = measure(trial, fault)
    job = trial.store.get_job(poison)
    row.note = f"poison job: {job.state.value} as {job.failure_class} after {job.attempt} attempt(s)"
    return row


TRIALS: dict[str, tuple[Callable[[Trial], Row], bool]] = {
    "worker_sigkill": (worker_sigkill, True),
    "broken_host": (broken_host, True),
    "redis_kill_aof": (redis_kill_aof, True),
    "redis_kill_no_aof": (redis_kill_no_aof, False),
    "db_outage": (db_outage, True),
    "duplicate_delivery": (duplicate_delivery, True),
    "sigterm_finish": (sigterm_finish, True),
    "sigterm_release": (sigterm_release, True),
    "poison_job": (poison_job, True),
}
"""name → (trial, Redis with appendonly)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", default=",".join(TRIALS), help="comma-separated trial names")
    args = parser.parse_args()
    names = [n.strip() for n in args.trials.split(",") if n.strip()]
    unknown = [n for n in names if n not in TRIALS]
    if unknown:
        parser.error(f"unknown trials: {', '.join(unknown)}; known: {', '.join(TRIALS)}")
    rows: list[Row] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="farm-chaos-") as tmp:
        for name in names:
            run, appendonly = TRIALS[name]
            t0 = time.monotonic()
            with trial_world(name, Path(tmp), appendonly=appendonly) as trial:
                row = run(trial)
            rows.append(row)
            print(f"{name}: done in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    header = ("trial", "submitted", "succeeded", "lost", "run twice", "stuck", "orphan engines", "recover s", "note")
    table = [header] + [
        (
            r.trial,
            str(r.submitted),
            str(r.succeeded),
            str(r.lost),
            str(r.run_twice),
            str(r.stuck),
            str(r.orphans),
            f"{r.recover_s:.1f}",
            r.note,
        )
        for r in rows
    ]
    print("| " + " | ".join(table[0]) + " |")
    print("|" + "---|" * len(header))
    for line in table[1:]:
        print("| " + " | ".join(line) + " |")
    print(f"\ntotal {time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
