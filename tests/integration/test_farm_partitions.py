"""Farm mode when the network is slow or silent rather than down, through real processes: a broker that accepts
connections and never answers (submit returns at once, a worker stops on SIGTERM and shows it receives nothing),
and PostgreSQL unreachable past the leases of two workers that spooled their results, beside an idle third
worker (nobody's results are refused when it comes back, whoever reconnects first).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from farm_harness import (
    POSTGRES_URL,
    FarmWorker,
    SilentServer,
    TcpProxy,
    postgres_schema,
    running_redis,
    silent_broker,
    store_jobs,
    submit_jobs,
    tiny_plan,
    wait_for,
    worker_processes,
    write_profile,
)

from farm.domain import JobState
from farm.store import RunState, Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL schema of this test's own."""
    with postgres_schema() as (direct, _):
        yield direct


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    """The test's view of the store the workers share."""
    with Store.open(pg_url) as opened:
        yield opened


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    """A broker address that accepts connections and never answers."""
    with silent_broker() as server:
        yield server


@pytest.fixture
def farm_workers() -> Iterator[list[FarmWorker]]:
    """The worker processes the test starts, stopped at the end."""
    with worker_processes() as started:
        yield started


def test_submit_on_a_broker_that_never_answers_returns_at_once_with_the_jobs_stored(
    store: Store, pg_url: str, silent: SilentServer
) -> None:
    """`farm submit --count 5` on a silent broker: one bounded attempt for the whole submit (not one per job),
    under 8 s, exit 0, the 5 jobs stored and queued, their ids printed, and a note that the sweepers will
    announce them."""
    env = {**os.environ, "FARM_DATABASE_URL": pg_url, "FARM_BROKER_URL": silent.url, "FARM_LOG_FORMAT": "json"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "farm", "submit", str(ROOT / "jobs" / "demo.toml"), "--simulate", "--count", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 8, f"farm submit took {elapsed:.1f} s"
    printed = done.stdout.split()
    assert len(printed) == 5
    jobs = store.list_jobs(["queued"])
    assert sorted(j.id for j in jobs) == sorted(printed)
    assert "5 of 5 job(s) stored but not announced" in done.stderr
    assert "sweepers announce them" in done.stderr
    assert silent.connections == 1  # one attempt, on one connection


def test_a_worker_on_a_broker_that_never_answers_says_so_and_stops_on_sigterm(
    tmp_path: Path, store: Store, pg_url: str, silent: SilentServer, farm_workers: list[FarmWorker]
) -> None:
    """Its heartbeat says its broker does not answer, `farm workers` shows it as broker-down (it serves no
    class), and SIGTERM ends it within 15 s, though Celery's consumer waits on the silent broker."""
    worker = FarmWorker(tmp_path, "deaf", write_profile(tmp_path, "deaf"), database_url=pg_url, broker_url=silent.url)
    farm_workers.append(worker)
    wait_for(
        lambda: [w for w in store.list_workers() if w.worker_id == "deaf" and w.broker_ok is False],
        40,
        "the heartbeat saying the broker does not answer",
    )
    _, klass = store_jobs(store)  # queued, for the class only this worker declares
    env = {**os.environ, "FARM_DATABASE_URL": pg_url}
    shown = subprocess.run(
        [sys.executable, "-m", "farm", "workers", "--json"], env=env, capture_output=True, text=True, timeout=30
    )
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    (line,) = view["workers"]
    assert (line["state"], line["live"], line["receives"], line["broker_ok"]) == ("broker-down", True, False, False)
    (queue,) = view["queues"]
    assert (queue["hardware_class"], queue["unserved"]) == (klass, True)

    worker.signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    worker.wait(30)
    elapsed = time.monotonic() - stopped_at
    assert elapsed < 15, f"the worker took {elapsed:.1f} s to stop"
    assert worker.events("worker.shutting_down"), worker.tail()


OWNERS_BACK_AFTER_S = 3.0
"""How much later than the idle worker the owners reach the database again (a partition that heals unevenly)."""


@pytest.mark.timeout(180)
def test_after_a_database_outage_past_the_leases_no_spooled_result_is_refused(
    tmp_path: Path, farm_workers: list[FarmWorker]
) -> None:
    """Two workers measure a job each and a third is idle; PostgreSQL becomes unreachable for all three (each
    side through its own proxy) mid-measurement: both owners spool their results and the outage outlasts their
    4-s leases. The idle worker reaches the database again first, the owners 3 s later: the idle worker's reaper
    waits its grace from the database's return, the owners deliver as soon as they reach it, and both jobs end
    with their one attempt, by their owners; nothing is refused and the idle worker runs nothing. (Before the
    grace, the idle worker reaped both jobs at once and claimed them as new attempts.)"""
    postgres_port = sa.engine.make_url(POSTGRES_URL).port or 5432
    owners_proxy, idle_proxy = TcpProxy(target_port=postgres_port), TcpProxy(target_port=postgres_port)
    owners_proxy.up()
    idle_proxy.up()
    try:
        with (
            postgres_schema(port=owners_proxy.port) as (direct_url, owners_url),
            Store.open(direct_url) as store,
            running_redis(tmp_path / "redis") as redis_server,
        ):
            idle_url = sa.engine.make_url(owners_url).set(port=idle_proxy.port).render_as_string(hide_password=False)
            profile = write_profile(tmp_path, "race", lease_s=4.0)
            owners = [
                FarmWorker(tmp_path, name, profile, database_url=owners_url, broker_url=redis_server.url)
                for name in ("owner-a", "owner-b")
            ]
            farm_workers += owners
            wait_for(lambda: len(store.list_workers()) == 2, 60, "both owners registered")
            job_ids = submit_jobs(store, redis_server.url, n=2, plan=tiny_plan(decode_tokens=2400))
            wait_for(
                lambda: {store.get_job(j).owner for j in job_ids} == {"owner-a", "owner-b"},
                60,
                "one job running on each owner",
            )
            idle = FarmWorker(tmp_path, "idle", profile, database_url=idle_url, broker_url=redis_server.url)
            farm_workers.append(idle)
            wait_for(lambda: len(store.list_workers()) == 3, 60, "the idle worker registered")
            wait_for(lambda: all(store.get_job(j).phase == "measuring" for j in job_ids), 60, "both measuring")
            owners_proxy.down()
            idle_proxy.down()
            cut_at = time.monotonic()
            spools = [owner.data_dir / "spool" / owner.worker_id for owner in owners]
            wait_for(lambda: all(list(s.glob("*.json")) for s in spools), 60, "both results spooled")
            assert all(store.get_job(j).state == JobState.RUNNING for j in job_ids)
            # Past every lease, with margin: when the database answers again, both leases have long expired.
            wait_for(lambda: time.monotonic() - cut_at >= 15, 20, "the outage outlasting the leases")
            idle_proxy.up()
            time.sleep(OWNERS_BACK_AFTER_S)
            owners_proxy.up()

            wait_for(lambda: all(store.get_job(j).state == JobState.SUCCEEDED for j in job_ids), 40, "both stored")
            wait_for(lambda: not any(list(s.glob("*.json")) for s in spools), 10, "the spools emptied")
            for job_id in job_ids:
                (run,) = store.runs(job_id)
                assert (run.attempt, run.state) == (1, RunState.SUCCEEDED), job_id
                assert run.worker_id == store.get_job(job_id).owner
            for worker in farm_workers:
                assert worker.events("spool.refused") == [], worker.worker_id
            assert [len(owner.events("spool.delivered")) for owner in owners] == [1, 1]
            assert idle.events("job.succeeded") == []
            assert idle.events("sweep.reap_held")
    finally:
        owners_proxy.close()
        idle_proxy.close()


VISIBILITY_TIMEOUT_S = 6.0


def test_the_message_a_killed_worker_held_comes_back_within_the_visibility_timeout(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """FARM_VISIBILITY_TIMEOUT_S = 6: a worker killed with SIGKILL just after it claimed its job leaves the
    message unacknowledged in Redis; it is back in the queue within the timeout and a few seconds (not a day
    later), the other worker takes it, and it is a duplicate (the job is still held under its lease)."""
    env = {"FARM_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S)}
    profile = write_profile(tmp_path, "vt", lease_s=60.0)
    with running_redis(tmp_path / "redis") as redis_server:
        urls = {"database_url": pg_url, "broker_url": redis_server.url}
        farm_workers += [FarmWorker(tmp_path, name, profile, **urls, **env) for name in ("one", "two")]
        wait_for(lambda: len(store.list_workers()) == 2, 60, "both workers registered")
        (job_id,) = submit_jobs(store, redis_server.url, plan=tiny_plan(decode_tokens=2400))
        wait_for(lambda: store.get_job(job_id).owner, 40, "the job claimed")
        owner = store.get_job(job_id).owner
        victim, survivor = sorted(farm_workers, key=lambda w: w.worker_id != owner)
        victim.signal(signal.SIGKILL)
        killed_at = time.time()
        victim.wait(10)
        client = redis_server.client()
        assert client.hlen("unacked") == 1  # the message the victim held

        duplicates = wait_for(
            lambda: [e for e in survivor.events("task.duplicate") if e.get("job") == job_id],
            VISIBILITY_TIMEOUT_S + 15,
            "the victim's message back and taken by the survivor",
        )
        from datetime import datetime

        back_after = datetime.fromisoformat(duplicates[0]["timestamp"]).timestamp() - killed_at
        assert back_after < VISIBILITY_TIMEOUT_S + 5, back_after
        wait_for(lambda: client.hlen("unacked") == 0, 10, "the message acknowledged by the survivor")
        client.close()
        assert [(r.attempt, r.worker_id) for r in store.runs(job_id)] == [(1, victim.worker_id)]
