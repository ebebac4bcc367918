"""What the farm-mode tests share: private Redis servers, a fresh PostgreSQL schema, real `farm worker` processes
on the simulator, tiny jobs, and a TCP proxy that makes PostgreSQL unreachable on demand.

Every test gets its own redis-server on a free port (never the shared one on 6379, which other tests use and
which must not be restarted) and its own PostgreSQL schema, reached by the worker processes through the URL.
The test modules wrap these context managers in fixtures of their own (a fixture imported from another module
would be shadowed by the test's parameter of the same name, which linters rightly flag).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from farm.net import free_port
from farm.queue.announce import Announcer
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.recipes.sweep import DecodePlan, ShortTTFTPlan, SweepPlan
from farm.store import Store
from farm.worker.profile import simulated_class

POSTGRES_URL = os.environ.get("FARM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
RTX = "rtx-pro-6000-blackwell-96gb"
H100 = "h100-sxm-80gb"
H200 = "h200-141gb"


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str = "condition") -> Any:
    """Poll until `predicate()` is truthy; returns its value. AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout_s} s")
        time.sleep(0.1)


def wait_for_sweeps(store: Store, worker_ids: list[str], *, passes_s: float = 1.5, timeout_s: float = 30) -> None:
    """Wait until every named worker has said it is alive again more than `passes_s` after now (by the
    database's clock, which stamps the heartbeats): its sweeper has made a few more passes since, so whatever
    those passes would do to the jobs (reap, announce) has had its chance."""
    start = max(w.last_heartbeat for w in store.list_workers())
    wait_for(
        lambda: all(
            w.last_heartbeat.timestamp() > start.timestamp() + passes_s
            for w in store.list_workers()
            if w.worker_id in worker_ids
        ),
        timeout_s,
        f"more sweeps by {', '.join(worker_ids)}",
    )


def aof_contains(directory: Path, needle: bytes) -> bool:
    """Whether Redis has written `needle` to its append-only file(s) under `directory` (a SIGKILL of Redis keeps
    what it wrote: the page cache belongs to the kernel)."""
    return any(needle in path.read_bytes() for path in directory.rglob("*.aof") if path.is_file())


# --- Redis ---------------------------------------------------------------------------------------------------


class RedisServer:
    """A private redis-server on a free port; `kill` and `start` again simulate a crash and a restart."""

    def __init__(self, directory: Path, *, appendonly: bool) -> None:
        self.directory = directory
        self.port = free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
        argv += ["--save", "", "--maxmemory-policy", "noeviction"]
        argv += ["--appendonly", "yes", "--appendfsync", "everysec"] if self.appendonly else ["--appendonly", "no"]
        with (self.directory / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            wait_for(lambda: _pings(client), 10, "redis-server answering")
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no chance to write anything more to disk."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=2, socket_timeout=5)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@contextlib.contextmanager
def running_redis(directory: Path, *, appendonly: bool = False) -> Iterator[RedisServer]:
    """A private Redis, killed at the end."""
    server = RedisServer(directory, appendonly=appendonly)
    server.start()
    try:
        yield server
    finally:
        server.kill()


# --- PostgreSQL ------------------------------------------------------------------------------------------------


@functools.cache
def postgres_unreachable() -> str | None:
    """Why the test PostgreSQL cannot be used, or None when it can."""
    engine = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as error:
        reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
        return f"PostgreSQL at {make_url(POSTGRES_URL).render_as_string()} is unreachable: {reason}"
    finally:
        engine.dispose()
    return None


def admin(statement: str) -> None:
    """Run one statement on the test PostgreSQL outside any test schema (create or drop a schema)."""
    engine = sa.create_engine(POSTGRES_URL)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


@contextlib.contextmanager
def postgres_schema(*, port: int | None = None) -> Iterator[tuple[str, str]]:
    """A fresh migrated schema: (URL for the test, URL for the workers: through `port` when given)."""
    if reason := postgres_unreachable():
        pytest.skip(reason)
    schema = f"farm_test_{secrets.token_hex(6)}"
    admin(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        direct = url.render_as_string(hide_password=False)
        Store.open(direct, auto_upgrade=True).close()
        via = url.set(port=port).render_as_string(hide_password=False) if port else direct
        yield direct, via
    finally:
        admin(f'DROP SCHEMA "{schema}" CASCADE')


# --- jobs ------------------------------------------------------------------------------------------------------


def make_recipe(hardware_id: str = RTX, count: int = 2, options: tuple[str, ...] = ()) -> Recipe:
    """A small valid recipe for `count` × `hardware_id` (and `options` after the model); the simulator serves its
    model."""
    return Recipe(
        id=f"sim-test-{hardware_id}-x{count}",
        model_id="sim/test-model",
        hardware_id=hardware_id,
        hardware_count=count,
        engine=Engine(name="vllm", version="0.11.0"),
        argv=("vllm", "serve", "sim/test-model", *options),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="ab" * 32),
    )


def tiny_plan(*, decode_tokens: int | None = None) -> SweepPlan:
    """One short-TTFT request; with `decode_tokens`, a two-point decode too (200 tok/s: 1000 tokens ≈ 5 s)."""
    decode = None
    if decode_tokens is not None:
        decode = DecodePlan(workloads=("code",), short_output_tokens=8, long_output_tokens=decode_tokens)
    return SweepPlan(
        repeats=1,
        warmup_requests=0,
        time_budget_s=120,
        request_timeout_s=60,
        short_ttft=ShortTTFTPlan(prompt_tokens=16),
        decode=decode,
    )


def store_jobs(
    store: Store,
    hardware_id: str = RTX,
    count: int = 2,
    *,
    n: int = 1,
    max_attempts: int = 2,
    plan: SweepPlan | None = None,
    options: tuple[str, ...] = (),
) -> tuple[list[str], str]:
    """Store `n` simulated jobs (not announced) of the recipe make_recipe gives; returns their ids and their
    hardware class."""
    recipe = make_recipe(hardware_id, count, options)
    klass = simulated_class(recipe.hardware_class)
    ids = store.submit(
        recipe,
        sweep_name="farm-test",
        plan=(plan or tiny_plan()).model_dump(mode="json"),
        spec_sha256="cd" * 32,
        max_attempts=max_attempts,
        simulated=True,
        count=n,
        hardware_class=klass,
    )
    return ids, klass


def submit_jobs(store: Store, broker_url: str, hardware_id: str = RTX, count: int = 2, **kwargs: Any) -> list[str]:
    """Store jobs and announce them, as `farm submit` does in farm mode."""
    ids, klass = store_jobs(store, hardware_id, count, **kwargs)
    announcer = Announcer.from_url(broker_url)
    try:
        for job_id in ids:
            announcer.announce(job_id, klass, 0)
    finally:
        announcer.close()
    return ids


# --- worker processes ------------------------------------------------------------------------------------------


def write_profile(
    directory: Path,
    name: str,
    *,
    hardware_id: str = RTX,
    count: int = 2,
    also_serve_counts: tuple[int, ...] = (),
    lease_s: float = 4.0,
    faults: tuple[str, ...] = (),
    sim_profile: str = "test",
    overrides: dict[str, str] | None = None,
) -> Path:
    """A simulator worker profile on the fast `test` simulator profile (a profile that does not exist makes a
    host whose engine dies at every start); `overrides` set simulator profile fields."""
    lines = [
        f'name = "{name}"',
        "[worker]",
        f"lease_s = {lease_s}",
        "[hardware]",
        f'hardware_id = "{hardware_id}"',
        f"count = {count}",
        f"also_serve_counts = {json.dumps(list(also_serve_counts))}",
        "[engine]",
        'kind = "sim"',
        "ready_timeout_s = 30.0",
        "stop_grace_s = 2.0",
        "[engine.sim]",
        f"profile = {json.dumps(sim_profile)}",
        f"faults = {json.dumps(list(faults))}",
    ]
    if overrides:
        lines += ["[engine.sim.overrides]", *(f"{key} = {json.dumps(value)}" for key, value in overrides.items())]
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class FarmWorker:
    """A real `farm worker` process in farm mode (Celery on Redis, the store on PostgreSQL)."""

    def __init__(
        self, tmp_path: Path, worker_id: str, profile: Path, *, database_url: str, broker_url: str, **env: str
    ) -> None:
        self.worker_id = worker_id
        self.data_dir = tmp_path / f"data-{worker_id}"
        self.log_path = tmp_path / f"{worker_id}.log"
        environment = {
            **os.environ,
            "FARM_DATABASE_URL": database_url,
            "FARM_BROKER_URL": broker_url,
            "FARM_DATA_DIR": str(self.data_dir),
            "FARM_LOG_FORMAT": "json",
            "FARM_SWEEP_INTERVAL_S": "0.5",
            "FARM_ANNOUNCE_GRACE_S": "1",
            # At the scale of the tests' leases (2-10 s) and sweeps (0.5 s): the owners deliver within a second.
            "FARM_REAP_GRACE_S": "5",
            **env,
        }
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "farm", "worker", "--profile", str(profile), "--worker-id", worker_id],
                env=environment,
                cwd=tmp_path,  # its engines inherit it: a leftover engine is found by its working directory
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def events(self, name: str) -> list[dict[str, Any]]:
        """The worker's structlog lines whose event is `name`."""
        out = []
        for line in self.log().splitlines():
            if line.startswith("{") and f'"{name}"' in line:
                with contextlib.suppress(json.JSONDecodeError):
                    record = json.loads(line)
                    if record.get("event") == name:
                        out.append(record)
        return out

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after 20 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def tail(self, chars: int = 4000) -> str:
        return self.log()[-chars:]


@contextlib.contextmanager
def worker_processes() -> Iterator[list[FarmWorker]]:
    """A list for the worker processes a test starts; every one still running is stopped at the end."""
    started: list[FarmWorker] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.stop()


# --- a TCP proxy in front of PostgreSQL --------------------------------------------------------------------------


class TcpProxy:
    """Forwards 127.0.0.1:port to a target; `down()` closes the listener and every connection (the database is
    unreachable: connections refused), `up()` listens again on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self._up(), self._loop).result(timeout=10)

    def down(self) -> None:
        asyncio.run_coroutine_threadsafe(self._down(), self._loop).result(timeout=10)

    def close(self) -> None:
        self.down()
        asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _cancel_all(self) -> None:
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def _down(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
            self._writers.discard(writer)


# --- a broker that accepts connections and never answers ----------------------------------------------------------


class SilentServer:
    """Listens on 127.0.0.1, accepts every connection and never sends a byte (a frozen broker, or a partition
    that lets the handshake through): `url` is a Redis URL pointing at it."""

    def __init__(self) -> None:
        import socket

        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._accepted: list[Any] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def connections(self) -> int:
        return len(self._accepted)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._accepted.append(conn)  # held open, read from by nobody

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for conn in self._accepted:
            conn.close()


@contextlib.contextmanager
def silent_broker() -> Iterator[SilentServer]:
    server = SilentServer()
    try:
        yield server
    finally:
        server.close()
