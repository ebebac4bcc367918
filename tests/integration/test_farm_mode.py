"""Farm mode through real processes: Celery workers on a private Redis, the store on PostgreSQL, the simulator.

Each job runs only on hardware that matches it, exactly once; a job for hardware nobody has stays queued and the
operators' view says so; a message delivered more than once runs its job once; a job stored but never announced
is announced by the sweeper; SIGTERM finishes the job in hand (or hands it back, when asked to).
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
from farm_harness import (
    H100,
    H200,
    RTX,
    FarmWorker,
    RedisServer,
    postgres_schema,
    running_redis,
    store_jobs,
    submit_jobs,
    tiny_plan,
    wait_for,
    worker_processes,
    write_profile,
)

from farm.domain import JobState
from farm.queue.announce import Announcer
from farm.queue.celery_app import RUN_JOB_TASK, queue_name
from farm.settings import Settings
from farm.store import RunState, Store

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(60)]

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
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis (no persistence) on a free port."""
    with running_redis(tmp_path / "redis") as server:
        yield server


@pytest.fixture
def farm_workers() -> Iterator[list[FarmWorker]]:
    """The worker processes the test starts, stopped at the end."""
    with worker_processes() as started:
        yield started


def _succeeded(store: Store, job_ids: list[str]) -> bool:
    return all(store.get_job(j).state == JobState.SUCCEEDED for j in job_ids)


def test_jobs_run_only_on_matching_hardware_exactly_once(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """Two hosts: a 2-GPU RTX PRO 6000 one that also takes 1-GPU jobs, and a 1-GPU H100 one. Every job runs once,
    on a host of its hardware; the H200 job stays queued, and `farm workers` says no live worker takes it."""
    rtx_profile = write_profile(tmp_path, "rtx", hardware_id=RTX, count=2, also_serve_counts=(1,))
    h100_profile = write_profile(tmp_path, "h100", hardware_id=H100, count=1)
    urls = {"database_url": pg_url, "broker_url": redis_server.url}
    farm_workers += [
        FarmWorker(tmp_path, "host-rtx", rtx_profile, **urls),
        FarmWorker(tmp_path, "host-h100", h100_profile, **urls),
    ]
    rtx_x2 = submit_jobs(store, redis_server.url, RTX, 2, n=2)
    rtx_x1 = submit_jobs(store, redis_server.url, RTX, 1, n=1)
    h100_x1 = submit_jobs(store, redis_server.url, H100, 1, n=2)
    (h200_x1,) = submit_jobs(store, redis_server.url, H200, 1, n=1)

    expected = {job: "host-rtx" for job in rtx_x2 + rtx_x1} | {job: "host-h100" for job in h100_x1}
    wait_for(lambda: _succeeded(store, list(expected)), 50, "every matching job succeeded")

    for job_id, worker_id in expected.items():
        runs = store.runs(job_id)
        assert [(r.attempt, r.worker_id, r.state) for r in runs] == [(1, worker_id, RunState.SUCCEEDED)], job_id
    waiting = store.get_job(h200_x1)
    assert (waiting.state, waiting.attempt, store.runs(h200_x1)) == (JobState.QUEUED, 0, [])

    env = {**os.environ, "FARM_DATABASE_URL": pg_url}
    shown = subprocess.run(
        [sys.executable, "-m", "farm", "workers", "--json"], env=env, capture_output=True, text=True, timeout=30
    )
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    workers = {w["worker_id"]: w for w in view["workers"]}
    assert workers["host-rtx"]["hardware_classes"] == [f"sim:{RTX} x 2", f"sim:{RTX} x 1"]
    assert workers["host-h100"]["hardware_classes"] == [f"sim:{H100} x 1"]
    assert all(w["live"] for w in workers.values())
    assert view["queues"] == [{"hardware_class": f"sim:{H200} x 1", "queued": 1, "live_workers": [], "unserved": True}]
    plain = subprocess.run(
        [sys.executable, "-m", "farm", "workers"], env=env, capture_output=True, text=True, timeout=30
    )
    assert "no live worker takes that class" in plain.stdout
    assert f"sim:{H200} x 1" in plain.stdout


def test_a_message_delivered_several_times_runs_its_job_once(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """The same message sent twice (same task id), a third message for the same job and one for an unknown job:
    one run. The worker takes the job either through a message or straight from the store as it starts; the
    other messages do nothing: dropped as duplicates (the claim found the job taken) or, with no announcement
    standing (the unknown job's; the job's own once the straight claim withdrew it), without a claim."""
    (job_id,), klass = store_jobs(store)
    announcer = Announcer.from_url(redis_server.url)
    try:
        announcer.redis.set(f"farm:announced:{job_id}", f"0 {time.time()}")  # as the announcer writes it
        queue = queue_name(klass)
        for task_id in ("same-message", "same-message", "another-message"):
            announcer.app.send_task(RUN_JOB_TASK, args=[job_id], queue=queue, task_id=task_id)
        announcer.app.send_task(RUN_JOB_TASK, args=["j-0000000000"], queue=queue)
    finally:
        announcer.close()
    # The sweeper must not add messages of its own here: a job without an announcement waits an hour for one.
    worker = FarmWorker(
        tmp_path,
        "only",
        write_profile(tmp_path, "only"),
        database_url=pg_url,
        broker_url=redis_server.url,
        FARM_ANNOUNCE_GRACE_S="3600",
    )
    farm_workers.append(worker)
    wait_for(lambda: _succeeded(store, [job_id]), 40, "the job succeeded")
    straight = any(e.get("job") == job_id for e in worker.events("task.claimed_next"))
    surplus = 4 if straight else 3

    def dropped() -> list[str]:
        return [e["job"] for e in worker.events("task.duplicate") + worker.events("task.withdrawn")]

    wait_for(lambda: len(dropped()) == surplus, 20, f"{surplus} messages dropped")
    assert [r.state for r in store.runs(job_id)] == [RunState.SUCCEEDED]
    assert sorted(dropped()) == sorted([job_id] * (surplus - 1) + ["j-0000000000"])
    assert [e["job"] for e in worker.events("task.withdrawn") if e["job"] != job_id] == ["j-0000000000"]
    assert len(worker.events("job.succeeded")) == 1


def test_the_sweeper_announces_a_job_that_was_stored_but_never_announced(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """A submitter that died between storing and announcing, while the worker waits for messages: the worker's
    sweeper announces the job after its grace period, and it runs once."""
    worker = FarmWorker(
        tmp_path, "sweeping", write_profile(tmp_path, "sweeping"), database_url=pg_url, broker_url=redis_server.url
    )
    farm_workers.append(worker)
    wait_for(lambda: worker.events("worker.start_claims_done"), 30, "the worker's start claims found nothing")
    assert worker.events("worker.start_claims_done")[0]["ran"] is False
    (job_id,), klass = store_jobs(store)
    client = redis_server.client()
    assert client.llen(queue_name(klass)) == 0
    wait_for(lambda: _succeeded(store, [job_id]), 40, "the job succeeded")
    assert [r.state for r in store.runs(job_id)] == [RunState.SUCCEEDED]
    assert [e["job"] for e in worker.events("job.announced")] == [job_id]
    announced = client.get(f"farm:announced:{job_id}")
    assert isinstance(announced, bytes)
    assert announced.split(b" ")[0] == b"0"  # announced at attempt 0
    client.close()


def test_a_worker_that_starts_free_claims_a_queued_job_without_a_message(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """A job stored and never announced, the sweepers told to wait an hour before announcing it: a worker that
    starts claims it straight from the store at once, and no message is sent for it."""
    (job_id,), _ = store_jobs(store)
    worker = FarmWorker(
        tmp_path,
        "starting",
        write_profile(tmp_path, "starting"),
        database_url=pg_url,
        broker_url=redis_server.url,
        FARM_ANNOUNCE_GRACE_S="3600",
    )
    farm_workers.append(worker)
    wait_for(lambda: _succeeded(store, [job_id]), 40, "the job succeeded")
    assert [e["job"] for e in worker.events("task.claimed_next")] == [job_id]
    assert worker.events("job.announced") == []
    assert [r.state for r in store.runs(job_id)] == [RunState.SUCCEEDED]
    wait_for(lambda: worker.events("worker.start_claims_done"), 10, "the start claims ended")
    assert worker.events("worker.start_claims_done")[0]["ran"] is True


def test_sigterm_finishes_the_job_in_hand(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """SIGTERM mid-measurement: the worker finishes the job (its results are stored), then exits 0, and takes
    no other job."""
    first, second = submit_jobs(store, redis_server.url, n=2, plan=tiny_plan(decode_tokens=600))
    worker = FarmWorker(
        tmp_path, "graceful", write_profile(tmp_path, "graceful"), database_url=pg_url, broker_url=redis_server.url
    )
    farm_workers.append(worker)
    wait_for(lambda: store.get_job(first).phase == "measuring", 40, "the first job measuring")
    worker.signal(signal.SIGTERM)
    assert worker.wait(40) == 0, worker.tail()
    assert [(r.worker_id, r.state) for r in store.runs(first)] == [("graceful", RunState.SUCCEEDED)]
    assert store.results(first)
    assert (store.get_job(second).state, store.runs(second)) == (JobState.QUEUED, [])


def test_sigterm_with_release_hands_the_job_back(
    tmp_path: Path, store: Store, pg_url: str, redis_server: RedisServer, farm_workers: list[FarmWorker]
) -> None:
    """on_sigterm = release: SIGTERM mid-measurement hands the job back at once (its attempt is not charged),
    the worker exits 0, and the next worker runs the job to success."""
    (job_id,) = submit_jobs(store, redis_server.url, max_attempts=1, plan=tiny_plan(decode_tokens=1000))
    profile = write_profile(tmp_path, "releasing", lease_s=2.0)
    urls = {"database_url": pg_url, "broker_url": redis_server.url}
    leaving = FarmWorker(tmp_path, "leaving", profile, FARM_ON_SIGTERM="release", **urls)
    farm_workers.append(leaving)
    wait_for(lambda: store.get_job(job_id).phase == "measuring", 40, "the job measuring")
    leaving.signal(signal.SIGTERM)
    assert leaving.wait(30) == 0, leaving.tail()
    (released,) = store.runs(job_id)
    assert (released.worker_id, released.state) == ("leaving", RunState.RELEASED)
    assert store.get_job(job_id).state == JobState.QUEUED

    farm_workers.append(FarmWorker(tmp_path, "arriving", profile, **urls))
    wait_for(lambda: _succeeded(store, [job_id]), 45, "the job succeeded on the next worker")
    assert [(r.attempt, r.worker_id, r.state) for r in store.runs(job_id)] == [
        (1, "leaving", RunState.RELEASED),
        (2, "arriving", RunState.SUCCEEDED),
    ]


def test_a_recipe_for_hardware_outside_the_catalogue_is_refused_at_submit(tmp_path: Path) -> None:
    """`farm submit` of a sweep whose recipe names an unknown hardware id exits 2 naming the field, and queues
    nothing (farm mode or not: the recipe parser refuses it before the store or the broker is touched)."""
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'name = "unknown-hardware"\nrecipe = "{ROOT / "tests/fixtures/bad/unknown_hardware_id.json"}"\n'
        "[plan.short_ttft]\nprompt_tokens = 16\n"
    )
    database = tmp_path / "farm.db"
    env = {
        **os.environ,
        "FARM_DATABASE_URL": f"sqlite:///{database}",
        "FARM_BROKER_URL": "redis://127.0.0.1:1/0",  # nothing listens there: nothing may be announced
    }
    done = subprocess.run(
        [sys.executable, "-m", "farm", "submit", str(spec), "--simulate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert "hardware_id" in done.stderr
    assert "unknown hardware" in done.stderr.lower()
    assert not database.exists() or Store.open(f"sqlite:///{database}").list_jobs() == []


def test_the_seed_sweep_can_be_submitted_to_postgres(store: Store) -> None:
    """The demo sweep (the seed's recipe) is stored by PostgreSQL as by SQLite."""
    from farm.recipes.spec import load_sweep
    from farm.submit import submit_sweep

    (job_id,) = submit_sweep(store, load_sweep(ROOT / "jobs" / "demo.toml"), simulate=True, broker_url=None)
    assert store.get_job(job_id).state == JobState.QUEUED


def test_one_sweeper_of_the_fleet_holds_a_classes_announcing_turn_per_interval(redis_server: RedisServer) -> None:
    """On real Redis: of two workers' sweepers the first takes the class's turn and keeps it, the second is
    refused while it stands and takes it once it has expired; another class's turn is apart; a broker that is
    gone answers False, not an error."""
    first, second = Announcer.from_url(redis_server.url), Announcer.from_url(redis_server.url)
    try:
        assert first.take_turn("sim:h200-141gb x 1", "w1", 0.5)
        assert first.take_turn("sim:h200-141gb x 1", "w1", 0.5)  # the holder keeps its turn
        assert not second.take_turn("sim:h200-141gb x 1", "w2", 0.5)
        assert second.take_turn("sim:h200-141gb x 2", "w2", 0.5)
        time.sleep(0.7)
        assert second.take_turn("sim:h200-141gb x 1", "w2", 0.5)
        assert not first.take_turn("sim:h200-141gb x 1", "w1", 0.5)
        redis_server.kill()
        assert not first.take_turn("sim:h200-141gb x 1", "w1", 0.5)
    finally:
        first.close()
        second.close()


def test_a_job_claimed_straight_has_its_announcement_withdrawn_with_the_next_ping(redis_server: RedisServer) -> None:
    """On real Redis: a withdrawal is held until the announcer's next ping and then deletes the job's
    announcement if it names an earlier attempt than the one claimed; an announcement made since for that attempt
    (the job came back and was announced again) stands. Withdrawals held while the broker is gone are kept for the
    next ping that gets through; a broker that does not answer leaves the claim to decide."""
    announcer = Announcer.from_url(redis_server.url, Settings(broker_timeout_s=0.5))
    klass = "sim:h200-141gb x 1"
    assert redis_server.proc is not None
    try:
        assert announcer.announce("j-straight", klass, 0)
        assert announcer.announce("j-again", klass, 1)  # claimed as attempt 1, reaped, announced again at 1
        assert announcer.announcement_stands("j-straight")
        announcer.withdraw("j-straight", 1)
        announcer.withdraw("j-again", 1)
        assert announcer.announcement_stands("j-straight")  # held: nothing sent before the ping
        assert announcer.ping() is None
        assert not announcer.announcement_stands("j-straight")
        assert announcer.announcement_stands("j-again")
        assert announcer.last_announcement("j-again") is not None
        assert announcer.announce("j-later", klass, 0)
        announcer.withdraw("j-later", 1)
        redis_server.proc.send_signal(signal.SIGSTOP)  # a broker that accepts and never answers
        try:
            assert announcer.ping() is not None
            assert announcer.announcement_stands("j-later")  # no answer: the claim decides
        finally:
            redis_server.proc.send_signal(signal.SIGCONT)
        assert announcer.ping() is None
        assert not announcer.announcement_stands("j-later")
    finally:
        announcer.close()
