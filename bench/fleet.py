"""A simulated fleet on one PostgreSQL and one Redis: how far one coordinator goes.

`--hosts` simulated hosts (default 100) take `--jobs` tiny jobs (default 10,000) that were stored and announced
on one hardware class's queue beforehand (a backlog). Each host is the farm's coordination path for real, and
nothing more: its own Store (the 2-connection pool every farm process has), its own Redis consumer of the
class's queue with a prefetch of one and late acknowledgement (standing in for Celery's), each message handed to
the farm's task runtime (`farm.worker.celery.FarmRuntime.handle`: claim the message's job, run it, then claim
the next queued job straight from the store while one is queued), an engine-less worker whose job writes its
result with the real `Store.complete` (one figure with its summary, group stats and leaderboard rows), and the
real sweeper thread of a farm worker (`farm.worker.sweeper.Sweeper`: reap, announce what is due in its turn,
ping the broker, heartbeat) at the default 5-s interval. A job "measures" for about `--job-s` (0 by default: a
saturation test of the coordinator's capacity, whose pickup is the queue in front of it; give `--job-s` to
measure pickup at an offered load of hosts / job_s claims a second). Hosts are threads, `--processes` processes
of them, because a process per host does not fit 2 cores (a farm worker is a Celery worker, a Python process of
~80 MB). `--message-only` runs the design before straight claims (every job through its own message).

Printed: claims per second (from the first claim to the last), pickup p50 / p99 (from a host being free, at the
start or after its previous job's result was written, to its next claim returning), by path (straight from the
store, or by a message) and what it is made of (before the claim query, the wait for a message, the claim query,
the claim's CPU in the host's thread), the wake-up lag of a sleeping thread in each host process (its GIL and
CPU queue), the largest number of database connections the fleet held at once and per host (sampled every
0.25 s), Redis memory (peak, INFO), the leaderboard's time while the fleet writes (`Store.leaderboard`, every
2 s), and lost or doubled jobs.

PostgreSQL's default max_connections (100) cannot take 100 hosts at 2 connections each, so by default the fleet
reaches it through a private PgBouncer in transaction mode (`--pooler pgbouncer`, `--server-connections` to
PostgreSQL), as docs/farm-mode.md advises for large fleets; the connections counted per host are then the
fleet's client connections to PgBouncer (its SHOW POOLS), and the server connections are printed apart.
`--pooler none` connects the hosts to PostgreSQL directly (counted in pg_stat_activity): for small fleets.

    uv run python bench/fleet.py                                       # capacity: 100 hosts, 10,000 jobs
    uv run python bench/fleet.py --processes 4 --job-s 10              # pickup at 10 claims/s offered
    uv run python bench/fleet.py --hosts 100 --jobs 1000 --job-s 10    # the same, quicker

Needs redis-server on PATH (a private one is started, AOF on, noeviction, as docs/farm-mode.md asks), pgbouncer
on PATH or in /usr/sbin for the default pooler, and the PostgreSQL of FARM_TEST_POSTGRES_URL (default: local,
trust auth; the benchmark makes and drops a database of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import psycopg
import redis
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from farm.bench.metrics import summarize
from farm.domain import ClaimedJob, Figure, JobState, RunResult
from farm.net import free_port
from farm.queue.announce import Announcer, announce_jobs
from farm.queue.celery_app import queue_name
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.recipes.sweep import ShortTTFTPlan, SweepPlan
from farm.settings import Settings
from farm.store import Store
from farm.worker.celery import FarmRuntime
from farm.worker.outage import StoreWatch
from farm.worker.profile import simulated_class
from farm.worker.sweeper import Sweeper

POSTGRES_URL = os.environ.get("FARM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
HARDWARE_ID = "rtx-pro-6000-blackwell-96gb"
APPLICATION_NAME = "farm-fleet-bench"
"""The fleet's PostgreSQL connections carry this application_name, so pg_stat_activity counts only theirs."""
LEASE_S = 60.0
LEADERBOARD_EVERY_S = 2.0


def recipe() -> Recipe:
    return Recipe(
        id="fleet-bench",
        model_id="sim/fleet-model",
        hardware_id=HARDWARE_ID,
        hardware_count=2,
        engine=Engine(name="vllm", version="0.11.0"),
        argv=("vllm", "serve", "sim/fleet-model"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="ab" * 32),
    )


def tiny_result(worker_id: str, attempt: int) -> RunResult:
    value = 100.0 + (hash(worker_id) % 50)
    figure = Figure(
        kind="decode",
        key="decode/code/decode_tok_s",
        metric="decode_tok_s",
        unit="tok/s",
        values=(value,),
        summary=summarize([value]),
        workload="code",
        params={"short_output_tokens": 8, "long_output_tokens": 64},
        requested_repeats=1,
    )
    provenance = {"worker_id": worker_id, "attempt": attempt, "engine": {"name": "sim", "version": "fleet"}}
    return RunResult(figures=(figure,), samples={}, provenance=provenance, total_requests=1)


# --- one simulated host ----------------------------------------------------------------------------------------


@dataclass
class HostTally:
    pickups: list[tuple[str, float, float, float, float, float]] = field(default_factory=list)
    """One per claim: (path, total, before the claim query, the claim query, its CPU in this thread, of which
    waiting for a message). path: "straight" (the worker claimed from the store as it came free) or "message" (it
    went back to the broker and a wake-up message brought the claim). Seconds."""
    claimed: int = 0
    messages: int = 0
    duplicates: int = 0
    withdrawn: int = 0
    """Messages dropped without a claim query: their announcement was withdrawn (the job was claimed straight)."""
    errors: list[str] = field(default_factory=list)
    first_claim: float | None = None
    last_claim: float | None = None


class TimedStore(Store):
    """The farm's Store, noting when its last claim call started and the thread CPU it had used then."""

    claim_started: float = 0.0
    claim_cpu_started: float = 0.0

    def claim(self, *args: Any, **kwargs: Any) -> ClaimedJob | None:
        self.claim_started, self.claim_cpu_started = time.monotonic(), time.thread_time()
        return super().claim(*args, **kwargs)

    def claim_job(self, *args: Any, **kwargs: Any) -> ClaimedJob | None:
        self.claim_started, self.claim_cpu_started = time.monotonic(), time.thread_time()
        return super().claim_job(*args, **kwargs)


class BenchWorker:
    """The task's worker (farm.worker.celery.TaskWorker) without an engine: a job 'measures' for about `job_s`
    and its one figure is written with the real `Store.complete`. It times every pickup."""

    def __init__(self, store: TimedStore, worker_id: str, klass: str, settings: Settings, job_s: float) -> None:
        self.store = store
        self.worker_id = worker_id
        self.hardware_classes = (klass,)
        self.lease_s = LEASE_S
        self.settings = settings
        self.job_s = job_s
        self.rng = random.Random(worker_id)
        self.tally = HostTally()
        self.free_at = time.monotonic()
        self.message_at = float("-inf")

    def deliver_spooled(self) -> frozenset[str]:
        return frozenset()  # nothing is ever spooled here: the database stays up

    def check_quarantine(self) -> str | None:
        return self.store.quarantine_reason(self.worker_id)

    def report_alive(self, job_id: str | None = None, phase: str | None = None) -> None:
        self.store.worker_heartbeat(self.worker_id, job_id=job_id, phase=phase, broker_ok=True)

    def run_job(self, job: ClaimedJob) -> JobState | None:
        claimed_at, cpu = time.monotonic(), time.thread_time()
        store, tally = self.store, self.tally
        by_message = self.message_at > self.free_at
        waited = self.message_at - self.free_at if by_message else 0.0
        tally.pickups.append(
            (
                "message" if by_message else "straight",
                claimed_at - self.free_at,
                store.claim_started - self.free_at,
                claimed_at - store.claim_started,
                cpu - store.claim_cpu_started,
                waited,
            )
        )
        tally.first_claim = tally.first_claim or claimed_at
        tally.last_claim = claimed_at
        tally.claimed += 1
        if self.job_s:
            time.sleep(self.job_s * self.rng.uniform(0.5, 1.5))  # hosts drift apart, as real ones do
        store.complete(job.id, job.attempt, self.worker_id, tiny_result(self.worker_id, job.attempt))
        self.free_at = time.monotonic()
        return JobState.SUCCEEDED


class MessageOnlyRuntime(FarmRuntime):
    """The design before straight claims (--message-only, for comparison): one message per job, every job."""

    def claim_next(self) -> ClaimedJob | None:
        return None


def run_host(
    worker_id: str,
    fleet_url: str,
    broker_url: str,
    klass: str,
    job_s: float,
    message_only: bool,
    ready: threading.Barrier,
    start: threading.Event,
    stop: EventType,
    tallies: dict[str, HostTally],
) -> None:
    """One host: consume the class's queue (prefetch one, ack after the task, as Celery does with acks_late) and
    hand each message to the farm's task runtime (`FarmRuntime.handle`: claim, run, claim the next straight)."""
    settings = Settings()
    store = TimedStore(fleet_url)
    worker = BenchWorker(store, worker_id, klass, settings, job_s)
    tallies[worker_id] = worker.tally
    announcer = Announcer.from_url(broker_url, settings)
    runtime = (MessageOnlyRuntime if message_only else FarmRuntime)(worker, announcer)
    sweeper = Sweeper(
        store,
        announcer,
        [klass],
        settings,
        idle_heartbeat=runtime.idle_heartbeat,
        check_host=runtime.check_host,
        watch=StoreWatch(settings.reap_grace_s),
        worker_id=worker_id,
    )
    try:
        store.register_worker(worker_id, host=f"fleet-{worker_id}", hardware_classes=[klass])
        with announcer.app.connection_for_read() as connection:
            queue = connection.SimpleQueue(queue_name(klass))
            queue.consumer.qos(prefetch_count=1)
            ready.wait()
            start.wait()
            sweeper.start()
            worker.free_at = time.monotonic()
            runtime.run_queued()  # a worker that starts free claims straight from the store (farm_mode's on_ready)
            while not stop.is_set():
                try:
                    message = queue.get(block=True, timeout=0.5)
                except queue.Empty:
                    continue
                worker.message_at = time.monotonic()
                worker.tally.messages += 1
                job_id = str(message.payload[0][0])  # Celery's protocol 2: [args, kwargs, embed]
                outcome = runtime.handle(job_id)
                if outcome == "duplicate":
                    worker.tally.duplicates += 1
                elif outcome == "withdrawn":
                    worker.tally.withdrawn += 1
                message.ack()
            queue.close()
    except Exception as exc:  # reported, not raised: the fleet's figures say how many hosts failed and why
        worker.tally.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        sweeper.stop(timeout_s=10)
        announcer.close()
        store.close()


def lag_probe(stop: EventType, lags: list[float], every_s: float = 0.01) -> None:
    """How late a thread of this process wakes from a sleep: the wait for the GIL and for a CPU that every
    pickup pays at each of its wake-ups (a socket read, a lock), sampled every `every_s`."""
    while not stop.is_set():
        t0 = time.monotonic()
        time.sleep(every_s)
        lags.append(time.monotonic() - t0 - every_s)


def host_process(
    worker_ids: list[str],
    fleet_url: str,
    broker_url: str,
    klass: str,
    job_s: float,
    message_only: bool,
    ready: Any,
    start: Any,
    stop: EventType,
    results: Any,
) -> None:
    """A process of host threads; puts each host's tally (and the process's wake-up lags) on `results` when
    `stop` is set."""
    os.environ.setdefault("FARM_LOG_LEVEL", "warning")
    from farm.logs import configure

    configure("json", "warning")
    local_ready = threading.Barrier(len(worker_ids) + 1)
    local_start = threading.Event()
    tallies: dict[str, HostTally] = {}
    lags: list[float] = []
    threads = [
        threading.Thread(
            target=run_host,
            args=(w, fleet_url, broker_url, klass, job_s, message_only, local_ready, local_start, stop, tallies),
            name=w,
            daemon=True,
        )
        for w in worker_ids
    ]
    for thread in threads:
        thread.start()
    local_ready.wait()
    ready.wait()  # every process's hosts are consuming
    start.wait()
    local_start.set()
    probe = threading.Thread(target=lag_probe, args=(stop, lags), name="lag-probe", daemon=True)
    probe.start()
    for thread in threads:
        thread.join()
    probe.join()
    results.put(({w: t.__dict__ for w, t in tallies.items()}, lags))


# --- the services ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def private_redis(directory: Path) -> Iterator[str]:
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"]
    argv += ["--maxclients", "10000"]
    with (directory / "redis.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    """A fresh migrated database of the benchmark's own on the test PostgreSQL; its name."""
    admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    name = f"farm_fleet_{secrets.token_hex(5)}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        Store.open(database_url(name), auto_upgrade=True).close()
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def database_url(name: str, *, port: int | None = None, database: str | None = None) -> str:
    url = make_url(POSTGRES_URL).set(database=database or name)
    if port is not None:
        url = url.set(port=port)
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def private_pgbouncer(directory: Path, database: str, server_connections: int) -> Iterator[int]:
    """A PgBouncer in transaction mode in front of the test PostgreSQL, serving `database` as "fleet"; its port."""
    target = make_url(POSTGRES_URL)
    port = free_port()
    directory.chmod(0o755)  # PgBouncer runs as another user (below): it reads its files and writes its log here
    directory = directory / "pgbouncer"
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)
    (directory / "userlist.txt").write_text(f'"{target.username or "postgres"}" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
fleet = host={target.host or "127.0.0.1"} port={target.port or 5432} dbname={database}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {directory / "userlist.txt"}
admin_users = {target.username or "postgres"}
pool_mode = transaction
default_pool_size = {server_connections}
max_client_conn = 5000
ignore_startup_parameters = extra_float_digits
logfile = {directory / "pgbouncer.log"}
"""
    )
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    # PgBouncer refuses to run as root; -u drops to an unprivileged user.
    argv = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(config)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with psycopg.connect(
                    host="127.0.0.1", port=port, dbname="fleet", user=target.username, connect_timeout=2
                ):
                    break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def pgbouncer_pools(port: int) -> tuple[int, int]:
    """(client connections, server connections) of the "fleet" pool, from PgBouncer's SHOW POOLS."""
    user = make_url(POSTGRES_URL).username
    with psycopg.connect(
        host="127.0.0.1", port=port, dbname="pgbouncer", user=user, autocommit=True, cursor_factory=psycopg.ClientCursor
    ) as conn:
        cursor = conn.execute("SHOW POOLS")
        columns = [c.name for c in cursor.description or ()]
        for row in cursor.fetchall():
            pool = dict(zip(columns, row, strict=True))
            if pool["database"] == "fleet":
                clients = int(pool["cl_active"]) + int(pool["cl_waiting"])
                servers = sum(int(pool[k]) for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
                return clients, servers
    return 0, 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def print_pickups(records: list[tuple[str, float, float, float, float, float]], lags: list[float]) -> None:
    """Pickup p50 / p99 and what it is made of, by path (HostTally.pickups), and the processes' wake-up lag."""

    def ms(values: list[float]) -> str:
        return f"p50 {percentile(values, 0.5) * 1000:.1f} / p99 {percentile(values, 0.99) * 1000:.1f} ms"

    print(f"pickup (free -> next claim): {ms([r[1] for r in records])}, max {max(r[1] for r in records) * 1000:.1f} ms")
    for path in ("straight", "message"):
        chosen = [r for r in records if r[0] == path]
        if not chosen:
            continue
        print(
            f"  {path:8} {len(chosen):6} claims: pickup {ms([r[1] for r in chosen])}; before the claim query "
            f"{ms([r[2] for r in chosen])}"
            + (f" (of it waiting for a message {ms([r[5] for r in chosen])})" if path == "message" else "")
            + f"; the claim query {ms([r[3] for r in chosen])}, "
            + f"its CPU in the host's thread {ms([r[4] for r in chosen])}"
        )
    if lags:
        print(f"  wake-up lag of a sleeping thread in a host process (GIL and CPU queue): {ms(lags)}")


# --- the run ----------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=4, help="processes the hosts are spread over")
    parser.add_argument(
        "--job-s", type=float, default=0.0, help="how long each job 'measures' on average (uniform, 0.5 to 1.5 times)"
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="give up after this long")
    parser.add_argument("--pooler", choices=("pgbouncer", "none"), default="pgbouncer")
    parser.add_argument(
        "--server-connections", type=int, default=20, help="PgBouncer's connections to PostgreSQL (--pooler pgbouncer)"
    )
    parser.add_argument(
        "--sweep-interval-s", type=float, default=None, help="each host's FARM_SWEEP_INTERVAL_S (default: the farm's)"
    )
    parser.add_argument(
        "--message-only",
        action="store_true",
        help="the design before straight claims, for comparison: every job through its own message",
    )
    args = parser.parse_args()
    for name in ("hosts", "jobs", "processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.processes > args.hosts:
        parser.error(f"--processes ({args.processes}) cannot exceed --hosts ({args.hosts})")
    if args.job_s < 0 or args.timeout_s <= 0:
        parser.error("--job-s must be at least 0 and --timeout-s above 0")
    if args.sweep_interval_s is not None:
        os.environ["FARM_SWEEP_INTERVAL_S"] = str(args.sweep_interval_s)  # the host processes inherit it
    from farm.logs import configure

    configure("json", "warning")
    os.environ["FARM_LOG_LEVEL"] = "warning"
    klass = simulated_class(recipe().hardware_class)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="farm-fleet-")))
        broker_url = stack.enter_context(private_redis(tmp))
        database = stack.enter_context(bench_database())
        direct_url = database_url(database)
        bouncer: int | None = None
        if args.pooler == "pgbouncer":
            bouncer = stack.enter_context(private_pgbouncer(tmp, database, args.server_connections))
            fleet_url = database_url(database, port=bouncer, database="fleet")
        else:
            tagged = make_url(direct_url).update_query_dict({"application_name": APPLICATION_NAME})
            fleet_url = tagged.render_as_string(hide_password=False)
        store = stack.enter_context(Store.open(direct_url, pool_size=4))
        via = f"PgBouncer ({args.server_connections} server connections)" if bouncer else "PostgreSQL directly"
        offered = f"{args.hosts / args.job_s:.0f} claims/s offered" if args.job_s else "saturation (job_s=0)"
        print(
            f"fleet: {args.hosts} hosts in {args.processes} processes, {args.jobs} jobs, job_s={args.job_s} "
            f"({offered}), sweep every {Settings().sweep_interval_s:g} s, reaching {via}, "
            f"{'message per job' if args.message_only else 'straight claims'}"
        )
        started = time.monotonic()
        ids: list[str] = []
        plan = SweepPlan(repeats=1, warmup_requests=0, short_ttft=ShortTTFTPlan(prompt_tokens=16))
        for offset in range(0, args.jobs, 1000):
            ids += store.submit(
                recipe(),
                sweep_name="fleet",
                plan=plan.model_dump(mode="json"),
                spec_sha256="cd" * 32,
                max_attempts=3,
                simulated=True,
                count=min(1000, args.jobs - offset),
                hardware_class=klass,
            )
        announcer = Announcer.from_url(broker_url)
        missed, error = announce_jobs(announcer, [(job_id, klass) for job_id in ids])
        announcer.close()
        assert not missed, error
        print(f"stored and announced {len(ids)} jobs in {time.monotonic() - started:.1f} s")

        context = multiprocessing.get_context("spawn")
        ready, start, stop = context.Barrier(args.processes + 1), context.Event(), context.Event()
        results = context.Queue()
        workers = [f"host-{n:03d}" for n in range(args.hosts)]
        groups = [workers[p :: args.processes] for p in range(args.processes)]
        processes = [
            context.Process(
                target=host_process,
                args=(group, fleet_url, broker_url, klass, args.job_s, args.message_only, ready, start, stop, results),
            )
            for group in groups
            if group
        ]
        for process in processes:
            process.start()
        ready.wait(timeout=600)
        client = redis.Redis.from_url(broker_url)
        peak_connections, peak_servers, peak_redis = 0, 0, int(client.info("memory")["used_memory"])
        leaderboard_s: list[float] = []
        next_board = time.monotonic() + LEADERBOARD_EVERY_S
        start.set()
        run_started = time.monotonic()
        done = 0
        with sa.create_engine(POSTGRES_URL).connect() as admin:
            while time.monotonic() - run_started < args.timeout_s:
                if bouncer is not None:
                    clients, servers = pgbouncer_pools(bouncer)
                else:
                    clients = admin.execute(
                        sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"),
                        {"name": APPLICATION_NAME},
                    ).scalar_one()
                    servers = clients
                    admin.rollback()
                peak_connections, peak_servers = max(peak_connections, clients), max(peak_servers, servers)
                peak_redis = max(peak_redis, int(client.info("memory")["used_memory"]))
                if time.monotonic() >= next_board:
                    t0 = time.monotonic()
                    store.leaderboard()
                    leaderboard_s.append(time.monotonic() - t0)
                    next_board = time.monotonic() + LEADERBOARD_EVERY_S
                done = store.queue_depth().get(klass, 0)
                running = len(store.list_jobs(["running"], limit=args.hosts + 1))
                if done == 0 and running == 0:
                    break
                time.sleep(0.25)
        elapsed = time.monotonic() - run_started
        t0 = time.monotonic()
        store.leaderboard()
        idle_board_s = time.monotonic() - t0
        stop.set()
        tallies: dict[str, dict[str, Any]] = {}
        lags: list[float] = []
        for _ in processes:
            process_tallies, process_lags = results.get(timeout=120)
            tallies |= process_tallies
            lags += process_lags
        for process in processes:
            process.join(timeout=60)
        redis_info = client.info("memory")
        client.close()

        with sa.create_engine(direct_url).connect() as conn:
            rows = conn.execute(sa.text("SELECT state, count(*) FROM jobs GROUP BY state")).all()
            states: dict[str, int] = {str(state): int(count) for state, count in rows}
            doubled = conn.execute(
                sa.text("SELECT count(*) FROM (SELECT job_id FROM runs GROUP BY job_id HAVING count(*) > 1) d")
            ).scalar_one()
        records = [p for t in tallies.values() for p in t["pickups"]]
        later = [p for t in tallies.values() for p in t["pickups"][1:]]
        firsts = [t["first_claim"] for t in tallies.values() if t["first_claim"]]
        lasts = [t["last_claim"] for t in tallies.values() if t["last_claim"]]
        claims = sum(t["claimed"] for t in tallies.values())
        errors = [e for t in tallies.values() for e in t["errors"]]
        span = max(lasts) - min(firsts) if firsts else float("nan")
        succeeded = states.get(JobState.SUCCEEDED.value, 0)
        print(f"run: {elapsed:.1f} s; claims: {claims}, {claims / span:.0f} claims/s over {span:.1f} s")
        print_pickups(records, lags)
        print(
            f"  pickup after each host's first claim (the hosts all start at once, a burst the run's first claims "
            f"pay): p50 {percentile([r[1] for r in later], 0.5) * 1000:.1f} / "
            f"p99 {percentile([r[1] for r in later], 0.99) * 1000:.1f} ms over {len(later)} claims"
        )
        print(
            f"database connections held by the fleet: peak {peak_connections} "
            f"({peak_connections / args.hosts:.2f} per host); PostgreSQL server connections: peak {peak_servers}"
        )
        mib = 2**20
        print(
            f"Redis memory: peak {peak_redis / mib:.1f} MiB sampled, used_memory_peak "
            f"{int(redis_info['used_memory_peak']) / mib:.1f} MiB, "
            f"at the end {int(redis_info['used_memory']) / mib:.1f} MiB"
        )
        if leaderboard_s:
            print(
                f"leaderboard while writing: {len(leaderboard_s)} reads, "
                f"p50 {statistics.median(leaderboard_s) * 1000:.0f} ms, max {max(leaderboard_s) * 1000:.0f} ms; "
                f"after: {idle_board_s * 1000:.0f} ms"
            )
        print(
            f"jobs: {succeeded} succeeded of {len(ids)}, states {states}, doubled {doubled}, "
            f"messages taken {sum(t['messages'] for t in tallies.values())} "
            f"(duplicates {sum(t['duplicates'] for t in tallies.values())}, dropped as withdrawn "
            f"{sum(t['withdrawn'] for t in tallies.values())}), host errors {len(errors)}"
        )
        for error_text in sorted(set(errors))[:5]:
            print(f"  host error: {error_text}")
        return 0 if succeeded == len(ids) and doubled == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
