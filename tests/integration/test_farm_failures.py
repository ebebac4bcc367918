"""Farm mode when things break, through real processes: a worker killed mid-job, Redis restarted with and without
persistence, PostgreSQL unreachable while results are written, a job whose engine crashes on every worker.

Every path must end in exactly one succeeded run per job (or a failed job after its attempt budget), with
nothing lost and nothing looping.
"""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from farm_harness import (
    POSTGRES_URL,
    FarmWorker,
    TcpProxy,
    aof_contains,
    postgres_schema,
    running_redis,
    submit_jobs,
    tiny_plan,
    wait_for,
    wait_for_sweeps,
    worker_processes,
    write_profile,
)

from farm.domain import FailureClass, JobState
from farm.queue.celery_app import queue_name
from farm.store import RunState, Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(60)]

OUTAGE_S = 60.0
"""The database outage of the spool tests: six leases of 10 s."""


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
def farm_workers() -> Iterator[list[FarmWorker]]:
    """The worker processes the test starts, stopped at the end."""
    with worker_processes() as started:
        yield started


def _state(store: Store, job_id: str) -> JobState:
    return store.get_job(job_id).state


def _all_finished(store: Store, job_ids: list[str]) -> bool:
    return all(_state(store, j).finished for j in job_ids)


def _all_succeeded(store: Store, job_ids: list[str]) -> bool:
    return all(_state(store, j) == JobState.SUCCEEDED for j in job_ids)


def test_a_worker_killed_mid_job_is_replaced_after_its_lease_expires(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """SIGKILL to the worker running a job: its lease expires, the other worker's sweeper reaps the job and
    announces it, and the other worker runs it. Exactly one succeeded run; the killed one is host_lost. (Its
    message stays unacknowledged in Redis until the visibility timeout; when it comes back it is a duplicate.)"""
    profile = write_profile(tmp_path, "pair", lease_s=2.0)
    with running_redis(tmp_path / "redis") as redis_server:
        urls = {"database_url": pg_url, "broker_url": redis_server.url}
        farm_workers += [FarmWorker(tmp_path, "one", profile, **urls), FarmWorker(tmp_path, "two", profile, **urls)]
        wait_for(lambda: len(store.list_workers()) == 2, 40, "both workers registered")
        (job_id,) = submit_jobs(store, redis_server.url, plan=tiny_plan(decode_tokens=600))
        wait_for(lambda: store.get_job(job_id).phase == "measuring", 40, "the job measuring")
        owner = store.get_job(job_id).owner
        victim, survivor = sorted(farm_workers, key=lambda w: w.worker_id != owner)
        victim.signal(signal.SIGKILL)
        victim.wait(10)

        wait_for(lambda: _all_succeeded(store, [job_id]), 45, "the job succeeded on the survivor")
        runs = store.runs(job_id)
        assert [(r.attempt, r.worker_id, r.state) for r in runs] == [
            (1, victim.worker_id, RunState.FAILED),
            (2, survivor.worker_id, RunState.SUCCEEDED),
        ]
        assert runs[0].failure_class == FailureClass.HOST_LOST
        wait_for_sweeps(store, [survivor.worker_id])  # nothing more happens to it
        assert len(store.runs(job_id)) == 2


def test_redis_restarted_mid_job_with_aof_loses_nothing(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """Redis with appendonly (everysec) killed with SIGKILL while a job runs and two wait, then started again:
    every job runs once. The sweeper is kept out of it (an hour's grace), so this is the broker's own doing."""
    with running_redis(tmp_path / "redis", appendonly=True) as redis_server:
        worker = FarmWorker(
            tmp_path,
            "steady",
            write_profile(tmp_path, "steady", lease_s=4.0),
            database_url=pg_url,
            broker_url=redis_server.url,
            FARM_ANNOUNCE_GRACE_S="3600",
            FARM_ANNOUNCE_STALE_S="3600",
        )
        farm_workers.append(worker)
        job_ids = submit_jobs(store, redis_server.url, n=3, plan=tiny_plan(decode_tokens=400))
        wait_for(lambda: _state(store, job_ids[0]) == JobState.RUNNING, 40, "the first job running")
        queue = queue_name(store.get_job(job_ids[0]).hardware_class).encode()
        wait_for(lambda: aof_contains(redis_server.directory, queue), 10, "the messages written to the AOF")
        redis_server.kill()
        redis_server.start()

        wait_for(lambda: _all_succeeded(store, job_ids), 50, "every job succeeded")
        for job_id in job_ids:
            assert [(r.attempt, r.state) for r in store.runs(job_id)] == [(1, RunState.SUCCEEDED)], job_id
        assert worker.events("job.announced") == []


def test_redis_restarted_without_persistence_the_sweeper_announces_again(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """Three announced jobs wait in a Redis without persistence; Redis restarts and they are gone from it. A
    worker that starts takes them straight from the store, or its sweeper finds them queued with no
    announcement and announces them again first: each runs once, by one way or the other."""
    with running_redis(tmp_path / "redis", appendonly=False) as redis_server:
        job_ids = submit_jobs(store, redis_server.url, n=3)
        client = redis_server.client()
        klass = store.get_job(job_ids[0]).hardware_class
        assert client.llen(queue_name(klass)) == 3
        redis_server.kill()
        redis_server.start()
        assert client.llen(queue_name(klass)) == 0  # lost, as FACTS measured
        client.close()

        worker = FarmWorker(
            tmp_path, "sweeper", write_profile(tmp_path, "sweeper"), database_url=pg_url, broker_url=redis_server.url
        )
        farm_workers.append(worker)
        wait_for(lambda: _all_succeeded(store, job_ids), 50, "every job succeeded")
        for job_id in job_ids:
            assert [(r.attempt, r.state) for r in store.runs(job_id)] == [(1, RunState.SUCCEEDED)], job_id
        announced = {e["job"] for e in worker.events("job.announced")}
        straight = {e["job"] for e in worker.events("task.claimed_next")}
        assert announced | straight == set(job_ids)


def test_results_wait_on_disk_while_postgres_is_unreachable_and_are_delivered_once(
    tmp_path: Path, farm_workers: list[FarmWorker]
) -> None:
    """The worker reaches PostgreSQL through a proxy that goes down mid-job: the results are spooled to
    the worker's disk, delivered by the sweeper once the proxy is back, and stored once."""
    proxy = TcpProxy(target_port=sa.engine.make_url(POSTGRES_URL).port or 5432)
    proxy.up()
    try:
        with (
            postgres_schema(port=proxy.port) as (direct_url, proxied_url),
            Store.open(direct_url) as store,
            running_redis(tmp_path / "redis") as redis_server,
        ):
            worker = FarmWorker(
                tmp_path,
                "cut-off",
                write_profile(tmp_path, "cut-off", lease_s=30.0),
                database_url=proxied_url,
                broker_url=redis_server.url,
            )
            farm_workers.append(worker)
            (job_id,) = submit_jobs(store, redis_server.url, plan=tiny_plan(decode_tokens=600))
            # Cut off once it has claimed: the engine and the sweep need no database; the results do.
            wait_for(lambda: _state(store, job_id) == JobState.RUNNING, 40, "the job running")
            proxy.down()
            spool = worker.data_dir / "spool" / "cut-off"
            wait_for(lambda: list(spool.glob("*.json")), 30, "the results spooled")
            assert _state(store, job_id) == JobState.RUNNING
            proxy.up()

            wait_for(lambda: _all_succeeded(store, [job_id]), 30, "the spooled results delivered")
            wait_for(lambda: not list(spool.glob("*.json")), 10, "the spool emptied")
            assert [(r.attempt, r.state) for r in store.runs(job_id)] == [(1, RunState.SUCCEEDED)]
            assert [f.summary.n for f in store.results(job_id) if f.key == "decode/code/decode_tok_s"] == [1]
            assert len(worker.events("job.results_spooled")) == 1
            assert len(worker.events("spool.delivered")) == 1
    finally:
        proxy.close()


def test_a_job_that_crashes_its_engine_everywhere_fails_after_its_budget(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """The engine dies mid-sweep on every worker: each attempt fails as engine_crashed and is announced again
    until the budget (3) is spent; then the job is failed and no message brings it back."""
    profile = write_profile(tmp_path, "crashy", faults=("--fault-crash-after", "0.5"))
    with running_redis(tmp_path / "redis") as redis_server:
        urls = {"database_url": pg_url, "broker_url": redis_server.url}
        farm_workers += [FarmWorker(tmp_path, "a", profile, **urls), FarmWorker(tmp_path, "b", profile, **urls)]
        (job_id,) = submit_jobs(store, redis_server.url, max_attempts=3, plan=tiny_plan(decode_tokens=2000))
        wait_for(lambda: _state(store, job_id) == JobState.FAILED, 55, "the job failed for good")
        job = store.get_job(job_id)
        assert (job.attempt, job.failure_class) == (3, FailureClass.ENGINE_CRASHED)
        wait_for_sweeps(store, ["a", "b"])
        runs = store.runs(job_id)
        assert [r.state for r in runs] == [RunState.FAILED] * 3
        assert {r.failure_class for r in runs} == {FailureClass.ENGINE_CRASHED}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("another_attempt", [False, True], ids=["delivered", "refused"])
def test_results_spooled_through_a_60_s_outage_with_a_10_s_lease_are_fenced_by_attempt(
    another_attempt: bool, tmp_path: Path, farm_workers: list[FarmWorker]
) -> None:
    """A worker cut off from PostgreSQL for 60 s, with a 10 s lease, finishes its job and spools the results.
    With no other worker, no other attempt starts: the results are delivered when the database is back, though
    the lease expired long before. With a second worker, its sweeper reaps the job and runs attempt 2: the
    spooled results of attempt 1 are refused, and the job keeps attempt 2's."""
    proxy = TcpProxy(target_port=sa.engine.make_url(POSTGRES_URL).port or 5432)
    proxy.up()
    try:
        with (
            postgres_schema(port=proxy.port) as (direct_url, proxied_url),
            Store.open(direct_url) as store,
            running_redis(tmp_path / "redis") as redis_server,
        ):
            cut_off = FarmWorker(
                tmp_path,
                "cut-off",
                write_profile(tmp_path, "cut-off", lease_s=10.0),
                database_url=proxied_url,
                broker_url=redis_server.url,
            )
            farm_workers.append(cut_off)
            (job_id,) = submit_jobs(store, redis_server.url, plan=tiny_plan(decode_tokens=600))
            wait_for(lambda: store.get_job(job_id).phase == "measuring", 60, "the job measuring")
            proxy.down()
            cut_at = time.monotonic()
            if another_attempt:
                other = FarmWorker(
                    tmp_path,
                    "other",
                    write_profile(tmp_path, "other", lease_s=10.0),
                    database_url=direct_url,
                    broker_url=redis_server.url,
                )
                farm_workers.append(other)
            spool = cut_off.data_dir / "spool" / "cut-off"
            wait_for(lambda: list(spool.glob("*.json")), 40, "the results spooled")
            if another_attempt:
                wait_for(lambda: _all_succeeded(store, [job_id]), 90, "attempt 2 succeeded elsewhere")
            # The outage itself lasts OUTAGE_S from the cut, whatever happened meanwhile.
            wait_for(lambda: time.monotonic() - cut_at >= OUTAGE_S, OUTAGE_S + 5, "the end of the outage")
            proxy.up()
            wait_for(lambda: not list(spool.glob("*.json")), 40, "the spool emptied")
            runs = store.runs(job_id)
            assert _state(store, job_id) == JobState.SUCCEEDED
            if another_attempt:
                assert [(r.attempt, r.worker_id, r.state) for r in runs] == [
                    (1, "cut-off", RunState.FAILED),
                    (2, "other", RunState.SUCCEEDED),
                ]
                assert runs[0].failure_class == FailureClass.HOST_LOST
                assert len(cut_off.events("spool.refused")) == 1
                assert cut_off.events("spool.delivered") == []
            else:
                assert [(r.attempt, r.worker_id, r.state) for r in runs] == [(1, "cut-off", RunState.SUCCEEDED)]
                assert len(cut_off.events("spool.delivered")) == 1
            assert [f.summary.n for f in store.results(job_id) if f.key == "decode/code/decode_tok_s"] == [1]
    finally:
        proxy.close()


@pytest.mark.timeout(300)
def test_beside_a_worker_whose_engine_never_starts_every_healthy_job_succeeds(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """Farm mode, three workers, one of them with an engine that dies at every start. Every job succeeds with a
    budget of two attempts, none on the broken host; the broken host is quarantined within K = 3 failed starts,
    stops consuming, and `farm workers` would show why."""
    env = {"FARM_QUARANTINE_AFTER": "3", "FARM_RETRY_BACKOFF_S": "1", "FARM_SELF_CHECK_INTERVAL_S": "3600"}
    with running_redis(tmp_path / "redis") as redis_server:
        urls = {"database_url": pg_url, "broker_url": redis_server.url}
        broken_profile = write_profile(tmp_path, "broken", sim_profile="does-not-exist")
        healthy_profile = write_profile(tmp_path, "healthy")
        farm_workers += [
            FarmWorker(tmp_path, "broken", broken_profile, **urls, **env),
            FarmWorker(tmp_path, "healthy-1", healthy_profile, **urls, **env),
            FarmWorker(tmp_path, "healthy-2", healthy_profile, **urls, **env),
        ]
        wait_for(lambda: len(store.list_workers()) == 3, 60, "three workers registered")
        job_ids: list[str] = []
        # Waves of jobs until the broken host has failed K starts (it may get fewer than K of the first wave):
        # it must be quarantined then, and never fail more.
        for _wave in range(5):
            job_ids += submit_jobs(store, redis_server.url, n=6, max_attempts=2)
            wait_for(functools.partial(_all_finished, store, list(job_ids)), 200, "every job finished")
            if store.quarantine_reason("broken") is not None:
                break
        states = {j: _state(store, j) for j in job_ids}
        assert set(states.values()) == {JobState.SUCCEEDED}, states
        runs = [r for j in job_ids for r in store.runs(j)]
        broken_runs = [r for r in runs if r.worker_id == "broken"]
        # A host's failed starts of one recipe are one strike until that recipe is seen to start on another host
        # (Store._host_attributed_failures: a bad recipe must not quarantine the only host that tried it). A worker
        # that starts free claims straight from the store, so the broken host may fail more of the first wave
        # than K before a healthy host's first job has ended; it is quarantined at its first failure after that.
        first_success = min(r.finished_at for r in runs if r.state == RunState.SUCCEEDED and r.finished_at)
        before = sum(1 for r in broken_runs if r.finished_at is not None and r.finished_at < first_success)
        assert 3 <= len(broken_runs) <= max(3, before + 2), (len(broken_runs), before)
        assert {r.failure_class for r in broken_runs} == {FailureClass.ENGINE_START_FAILED}
        succeeded_on = {r.worker_id for r in runs if r.state == RunState.SUCCEEDED}
        assert succeeded_on <= {"healthy-1", "healthy-2"}
        reason = store.quarantine_reason("broken")
        assert reason is not None
        assert f"{len(broken_runs)} times in a row" in reason, reason
        # Quarantined: it stops consuming, so the next jobs never reach it.
        wait_for(lambda: farm_workers[0].events("worker.consuming_paused"), 30, "the broken worker paused")
        more = submit_jobs(store, redis_server.url, n=4, max_attempts=1)
        wait_for(lambda: _all_succeeded(store, more), 120, "the jobs after the quarantine succeeded")
        assert all(r.worker_id != "broken" for j in more for r in store.runs(j))


@pytest.mark.timeout(300)
def test_a_recipe_whose_engine_cannot_start_quarantines_no_host_while_a_broken_host_is_quarantined(
    tmp_path: Path, store: Store, pg_url: str, farm_workers: list[FarmWorker]
) -> None:
    """Farm mode, three workers with K = 2. A recipe asking for more context than its model has (the simulator
    exits at start, as vLLM does) is submitted four times: every job fails as engine_start_failed after its
    budget, each healthy host fails two or more starts of it in a row, and none is quarantined, for each failure
    follows the recipe. The third host, whose engine dies at every start, is still quarantined by the healthy
    recipe's jobs, and those succeed elsewhere."""
    env = {"FARM_QUARANTINE_AFTER": "2", "FARM_RETRY_BACKOFF_S": "0.5", "FARM_SELF_CHECK_INTERVAL_S": "3600"}
    limit = {"max_position_embeddings": "32768"}
    with running_redis(tmp_path / "redis") as redis_server:
        urls = {"database_url": pg_url, "broker_url": redis_server.url}
        healthy_profile = write_profile(tmp_path, "healthy", overrides=limit)
        broken_profile = write_profile(tmp_path, "broken", sim_profile="does-not-exist")
        farm_workers += [
            FarmWorker(tmp_path, "healthy-1", healthy_profile, **urls, **env),
            FarmWorker(tmp_path, "healthy-2", healthy_profile, **urls, **env),
            FarmWorker(tmp_path, "broken", broken_profile, **urls, **env),
        ]
        wait_for(lambda: len(store.list_workers()) == 3, 60, "three workers registered")
        bad = submit_jobs(store, redis_server.url, n=4, max_attempts=2, options=("--max-model-len", "1000000"))
        wait_for(functools.partial(_all_finished, store, bad), 150, "every job of the bad recipe finished")
        bad_runs = [r for j in bad for r in store.runs(j)]
        assert {_state(store, j) for j in bad} == {JobState.FAILED}
        assert {r.failure_class for r in bad_runs} == {FailureClass.ENGINE_START_FAILED}
        per_host = {w: sum(r.worker_id == w for r in bad_runs) for w in ("healthy-1", "healthy-2")}
        assert max(per_host.values()) >= 2, per_host  # K of them in a row, no success in between
        assert store.quarantine_reason("healthy-1") is None
        assert store.quarantine_reason("healthy-2") is None
        good: list[str] = []
        for _wave in range(5):
            good += submit_jobs(store, redis_server.url, n=4, max_attempts=2)
            wait_for(functools.partial(_all_finished, store, list(good)), 150, "every healthy job finished")
            if store.quarantine_reason("broken") is not None:
                break
        assert {_state(store, j) for j in good} == {JobState.SUCCEEDED}
        assert store.quarantine_reason("broken") is not None
        assert store.quarantine_reason("healthy-1") is None
        assert store.quarantine_reason("healthy-2") is None
        log = " ".join(r.failure_message or "" for r in bad_runs)
        assert "greater than the derived max_model_len" in log or "exit" in log
