"""Claims, leases and the reaper on real SQLite and PostgreSQL, including claimers in separate processes."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from farm_harness import admin

from farm.domain import FailureClass, JobState, Phase
from farm.errors import LeaseLost, StoreError
from farm.recipes.model import Recipe
from farm.store import RunState, Store

HW = "rtx-pro-6000-blackwell-96gb x 2"
OTHER_HW = "rtx-4090-24gb x 1"
PLAN = {"repeats": 1}
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _submit(
    store: Store,
    recipe: Recipe,
    count: int = 1,
    *,
    max_attempts: int = 3,
    priority: int = 0,
    at: datetime = T0,
) -> list[str]:
    return store.submit(
        recipe, "seed", PLAN, "cd" * 32, max_attempts, simulated=False, count=count, priority=priority, now=at
    )


def test_claim_matches_hardware_class_only(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A worker claims only jobs of its hardware classes; the claim sets owner, attempt, lease and phase."""
    [big] = _submit(store, make_recipe())
    [small] = _submit(store, make_recipe("small", hardware_id="rtx-4090-24gb", hardware_count=1))
    assert store.claim("w-none", ["h100-80gb x 8"], lease_s=60) is None
    assert store.claim("w-none", [], lease_s=60) is None
    job = store.claim("w-small", [OTHER_HW], lease_s=60, now=T0)
    assert job is not None
    assert (job.id, job.attempt, job.owner, job.hardware_class) == (small, 1, "w-small", OTHER_HW)
    assert job.lease_expires_at == T0 + timedelta(seconds=60)
    assert Recipe.model_validate(job.recipe) == make_recipe("small", hardware_id="rtx-4090-24gb", hardware_count=1)
    assert job.plan == PLAN
    assert job.extra["sweep_name"] == "seed"
    assert store.claim("w-small", [OTHER_HW], lease_s=60) is None
    view = store.get_job(small)
    assert (view.state, view.owner, view.attempt, view.phase) == (JobState.RUNNING, "w-small", 1, "claimed")
    assert view.lease_expires_at == T0 + timedelta(seconds=60)
    assert store.get_job(big).state is JobState.QUEUED
    [run] = store.runs(small)
    assert (run.attempt, run.worker_id, run.state) == (1, "w-small", RunState.RUNNING)


def test_claim_order_is_priority_then_age(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Lower priority values go first; among equals, the oldest job."""
    [old] = _submit(store, make_recipe(), at=T0)
    [new] = _submit(store, make_recipe(), at=T0 + timedelta(seconds=1))
    [urgent] = _submit(store, make_recipe(), priority=-1, at=T0 + timedelta(seconds=2))
    claimed = [store.claim("w1", [HW], lease_s=60) for _ in range(3)]
    assert [job.id for job in claimed if job] == [urgent, old, new]


def test_claim_job_by_id(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A named claim takes the job once; a duplicate message, other hardware or an unknown id get None."""
    [job_id] = _submit(store, make_recipe())
    assert store.claim_job(job_id, "w1", [OTHER_HW], lease_s=60) is None
    assert store.claim_job("j-ffffffffff", "w1", [HW], lease_s=60) is None
    job = store.claim_job(job_id, "w1", [HW], lease_s=60)
    assert job is not None
    assert job.attempt == 1
    assert store.claim_job(job_id, "w2", [HW], lease_s=60) is None
    assert store.get_job(job_id).owner == "w1"


def test_a_host_of_several_classes_claims_by_priority_and_age_across_them(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """A host that serves two classes takes the next job of either, by priority, then age; it never takes a
    class it does not serve."""
    small = make_recipe("small", hardware_id="rtx-4090-24gb", hardware_count=1)
    [old_big] = _submit(store, make_recipe(), at=T0)
    [old_small] = _submit(store, small, at=T0 + timedelta(seconds=1))
    [urgent_small] = _submit(store, small, priority=-1, at=T0 + timedelta(seconds=2))
    [new_big] = _submit(store, make_recipe(), at=T0 + timedelta(seconds=3))
    _submit(store, make_recipe("h100", hardware_id="h100-sxm-80gb", hardware_count=1), priority=-5)
    claimed = [store.claim("w-both", [HW, OTHER_HW], lease_s=60) for _ in range(5)]
    assert [job.id if job else None for job in claimed] == [urgent_small, old_big, old_small, new_big, None]


def test_concurrent_claimers_of_several_classes_claim_each_job_once(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """Four threads, each serving both classes, drain 60 jobs of two classes between them: each job once (the head
    of the class a claim does not take stays locked until its statement ends, and other claimers skip it)."""
    small = make_recipe("small", hardware_id="rtx-4090-24gb", hardware_count=1)
    ids = _submit(store, make_recipe(), count=30) + _submit(store, small, count=30)
    barrier = threading.Barrier(4)
    claimed: list[str] = []

    def claimer(worker_id: str) -> None:
        barrier.wait()
        while (job := store.claim(worker_id, [HW, OTHER_HW], lease_s=600)) is not None:
            claimed.append(job.id)

    threads = [threading.Thread(target=claimer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(claimed) == sorted(ids)
    assert all([run.attempt for run in store.runs(job_id)] == [1] for job_id in ids)


def test_each_claim_gets_its_own_copy_of_the_recipe(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """The recipe document is kept by content hash between claims: a claimer that changes the one it got changes
    nobody else's, and a recipe of other content comes back as itself."""
    _submit(store, make_recipe(), count=2)
    [other] = _submit(store, make_recipe("other-recipe"), at=T0 + timedelta(seconds=1))
    first = store.claim("w1", [HW], lease_s=60)
    assert first is not None
    first.recipe["id"] = "changed by the claimer"
    second = store.claim("w1", [HW], lease_s=60)
    third = store.claim("w1", [HW], lease_s=60)
    assert second is not None
    assert third is not None
    assert third.id == other
    assert Recipe.model_validate(second.recipe) == make_recipe()
    assert Recipe.model_validate(third.recipe) == make_recipe("other-recipe")


def test_heartbeat_renews_the_lease(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A heartbeat from the owner extends the lease and records phase and progress."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=2, now=T0)
    assert job is not None
    for step in range(1, 9):  # a 2 s lease renewed every 0.5 s outlives its first expiry by far
        when = T0 + timedelta(seconds=0.5 * step)
        expires = store.heartbeat(job_id, 1, "w1", Phase.MEASURING, step / 8, lease_s=2, now=when)
        assert expires == when + timedelta(seconds=2)
        assert store.reap(now=when) == []
    view = store.get_job(job_id)
    assert (view.phase, view.progress, view.lease_expires_at) == ("measuring", 1.0, T0 + timedelta(seconds=6))


def test_heartbeat_is_fenced_by_attempt_not_by_clock(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A heartbeat cannot renew someone else's lease or another attempt's; the owner renews even an expired lease
    until a reaper takes the job back, and not after."""
    [job_id] = _submit(store, make_recipe())
    assert store.claim("w1", [HW], lease_s=60, now=T0) is not None
    with pytest.raises(LeaseLost, match="held by w1 in attempt 1"):
        store.heartbeat(job_id, 1, "w2", "measuring", None, lease_s=60, now=T0)
    with pytest.raises(LeaseLost, match="held by w1 in attempt 1"):
        store.heartbeat(job_id, 2, "w1", "measuring", None, lease_s=60, now=T0)
    late = T0 + timedelta(seconds=70)
    assert store.heartbeat(job_id, 1, "w1", "measuring", None, lease_s=60, now=late) == late + timedelta(seconds=60)
    assert store.reap(now=late + timedelta(seconds=61)) == [job_id]
    with pytest.raises(LeaseLost, match="taken back by the reaper"):
        store.heartbeat(job_id, 1, "w1", "measuring", None, lease_s=60, now=late + timedelta(seconds=62))


def test_expired_lease_is_reaped_and_claimed_again(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """An expired lease sends the job back to the queue; the next claim is attempt 2 of a new run."""
    [job_id] = _submit(store, make_recipe(), at=T0)
    [other] = _submit(store, make_recipe(), at=T0 + timedelta(seconds=1))
    assert store.claim("w1", [HW], lease_s=10, now=T0) is not None
    assert store.claim("w2", [HW], lease_s=100, now=T0) is not None
    assert store.reap(now=T0 + timedelta(seconds=9)) == []
    assert store.reap(now=T0 + timedelta(seconds=11)) == [job_id]
    view = store.get_job(job_id)
    assert (view.state, view.owner, view.failure_class) == (JobState.QUEUED, None, "host_lost")
    assert store.get_job(other).state is JobState.RUNNING
    again = store.claim("w3", [HW], lease_s=10, now=T0 + timedelta(seconds=12))
    assert again is not None
    assert (again.id, again.attempt) == (job_id, 2)
    assert [(run.attempt, run.worker_id, run.state, run.failure_class) for run in store.runs(job_id)] == [
        (1, "w1", RunState.FAILED, "host_lost"),
        (2, "w3", RunState.RUNNING, None),
    ]


def test_spent_budget_fails_with_host_lost(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A job whose last allowed attempt loses its lease ends failed with class host_lost."""
    [job_id] = _submit(store, make_recipe(), max_attempts=2)
    for attempt in (1, 2):
        start = T0 + timedelta(minutes=attempt)
        job = store.claim(f"w{attempt}", [HW], lease_s=10, now=start)
        assert job is not None
        assert job.attempt == attempt
        assert store.reap(now=start + timedelta(seconds=11)) == [job_id]
    view = store.get_job(job_id)
    assert (view.state, view.failure_class, view.attempt) == (JobState.FAILED, FailureClass.HOST_LOST, 2)
    assert store.claim("w3", [HW], lease_s=10, now=T0 + timedelta(minutes=5)) is None


def test_concurrent_reapers_reap_each_job_once(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Four reapers running at once over the same expired leases reap every job exactly once."""
    ids = _submit(store, make_recipe(), count=40)
    for _ in ids:
        assert store.claim("w1", [HW], lease_s=1, now=T0) is not None
    barrier = threading.Barrier(4)
    reaped: list[list[str]] = []

    def reaper() -> None:
        barrier.wait()
        reaped.append(store.reap(now=T0 + timedelta(seconds=5)))

    threads = [threading.Thread(target=reaper) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(reaped) == 4
    flat = [job_id for batch in reaped for job_id in batch]
    assert sorted(flat) == sorted(ids)
    assert all(len(store.runs(job_id)) == 1 for job_id in ids)


CLAIM_WORK_S = 0.002
"""The work a claimer does between two claims in the multi-process test: 2 ms, far below a real job."""


def claim_until_empty(url: str, worker_id: str, barrier: Barrier, results: Queue[tuple[str, list[str]]]) -> None:
    """Child process: open the store, wait for the others, claim until nothing is left, report the ids."""
    store = Store(url)
    claimed: list[str] = []
    try:
        store.queue_depth()  # connect and load the dialect now, so no claimer starts a connection behind the others
        barrier.wait(timeout=60)
        while (job := store.claim(worker_id, [HW], lease_s=600)) is not None:
            claimed.append(job.id)
            # As a worker would, look at what it got (a read, outside the write lock) before claiming again: a
            # tight loop of write transactions starves the other claimers on SQLite's busy handler.
            if store.get_job(job.id).owner != worker_id:
                claimed.append(f"not owned: {job.id}")
            # And a worker runs the job it claimed before it claims again. Without this pause a claimer that has
            # just released the write lock takes it again at once, while the others sleep in SQLite's busy
            # handler (backing off to 100 ms), and one process can drain all 200 jobs alone.
            time.sleep(CLAIM_WORK_S)
    finally:
        store.close()
        results.put((worker_id, claimed))


@pytest.mark.slow
def test_no_job_is_claimed_twice_by_concurrent_processes(
    store: Store, store_url: str, make_recipe: Callable[..., Recipe]
) -> None:
    """Four processes claiming from one store of 200 jobs claim each job exactly once, between them all."""
    ids = _submit(store, make_recipe(), count=200)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    results: Queue[tuple[str, list[str]]] = context.Queue()
    processes = [
        context.Process(target=claim_until_empty, args=(store_url, f"w{index}", barrier, results)) for index in range(4)
    ]
    for process in processes:
        process.start()
    batches = dict(results.get(timeout=90) for _ in processes)
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    claimed = [job_id for batch in batches.values() for job_id in batch]
    assert len(claimed) == len(set(claimed)) == 200
    assert set(claimed) == set(ids)
    assert sum(1 for batch in batches.values() if batch) >= 2, "the claimers did not overlap; nothing was tested"
    jobs = store.list_jobs(limit=500)
    assert all(job.state is JobState.RUNNING and job.attempt == 1 for job in jobs)
    owners = Counter(job.owner for job in jobs)
    assert owners == Counter({worker: len(batch) for worker, batch in batches.items() if batch})


# --- host-aware retries, quarantine, the database's clock ------------------------------------------------------


def _register(store: Store, *workers: str, at: datetime = T0) -> None:
    for worker in workers:
        store.register_worker(worker, host=f"host-{worker}", hardware_classes=[HW], now=at)


def test_a_retry_is_left_to_another_live_host(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """The host that failed a job does not claim its retry while another live host of its class has not failed it;
    that other host claims it at once, back-off or not."""
    _register(store, "broken", "healthy")
    [job_id] = _submit(store, make_recipe())
    assert store.claim("broken", [HW], lease_s=60, now=T0) is not None
    state = store.fail(job_id, 1, "broken", FailureClass.ENGINE_CRASHED, "exit 1", backoff_s=30, now=T0)
    assert state is JobState.QUEUED
    late = T0 + timedelta(seconds=40)  # past the back-off: still not for the host that failed it
    assert store.claim("broken", [HW], lease_s=60, now=late) is None
    assert store.claim_job(job_id, "broken", [HW], lease_s=60, now=late) is None
    assert store.skipped(job_id, "broken")
    retry = store.claim("healthy", [HW], lease_s=60, now=T0 + timedelta(seconds=1))
    assert retry is not None
    assert (retry.id, retry.attempt) == (job_id, 2)


def test_a_silent_or_quarantined_host_does_not_count_as_another_host(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """Only live, unquarantined hosts of the class are alternatives: with the other host silent past
    `live_within_s` (or quarantined), the host that failed the job takes it again after its back-off."""
    _register(store, "only")
    _register(store, "silent", at=T0 - timedelta(minutes=10))
    [job_id] = _submit(store, make_recipe())
    assert store.claim("only", [HW], lease_s=60, now=T0) is not None
    store.fail(job_id, 1, "only", FailureClass.MEASUREMENT_ERROR, "reset", backoff_s=30, now=T0)
    assert store.claim("only", [HW], lease_s=60, now=T0 + timedelta(seconds=10), live_within_s=120) is None
    again = store.claim("only", [HW], lease_s=60, now=T0 + timedelta(seconds=31), live_within_s=120)
    assert again is not None
    assert again.attempt == 2


def test_a_host_whose_broker_does_not_answer_does_not_hold_back_a_retry(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """A live host whose heartbeat says its broker does not answer cannot receive the job's message: the host that
    failed the job takes it again after its back-off instead of leaving it to that host; once the other host's
    broker answers again, the retry is left to it."""
    _register(store, "failed-it", "deaf")
    store.worker_heartbeat("deaf", broker_ok=False, now=T0)
    [job_id] = _submit(store, make_recipe())
    assert store.claim("failed-it", [HW], lease_s=60, now=T0) is not None
    store.fail(job_id, 1, "failed-it", FailureClass.MEASUREMENT_ERROR, "reset", backoff_s=30, now=T0)
    assert store.claim("failed-it", [HW], lease_s=60, now=T0 + timedelta(seconds=10)) is None  # the back-off
    after_backoff = T0 + timedelta(seconds=31)
    store.worker_heartbeat("deaf", broker_ok=True, now=after_backoff)
    assert store.claim("failed-it", [HW], lease_s=60, now=after_backoff) is None  # it hears again: left to it
    store.worker_heartbeat("deaf", broker_ok=False, now=after_backoff)
    again = store.claim("failed-it", [HW], lease_s=60, now=after_backoff)
    assert again is not None
    assert again.attempt == 2
    (deaf,) = [w for w in store.list_workers() if w.worker_id == "deaf"]
    assert deaf.broker_ok is False


def test_when_every_live_host_failed_a_job_any_may_retry_it(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Two hosts that both failed a job: neither waits for the other forever, each may take it after the
    back-off, and the budget ends it."""
    _register(store, "a", "b")
    [job_id] = _submit(store, make_recipe(), max_attempts=3)
    assert store.claim("a", [HW], lease_s=60, now=T0) is not None
    store.fail(job_id, 1, "a", FailureClass.ENGINE_CRASHED, "exit", backoff_s=5, now=T0)
    assert store.claim("b", [HW], lease_s=60, now=T0) is not None
    store.fail(job_id, 2, "b", FailureClass.ENGINE_CRASHED, "exit", backoff_s=5, now=T0 + timedelta(seconds=1))
    assert store.claim("a", [HW], lease_s=60, now=T0 + timedelta(seconds=2)) is None  # backing off
    third = store.claim("a", [HW], lease_s=60, now=T0 + timedelta(seconds=7))
    assert third is not None
    assert third.attempt == 3
    assert store.fail(job_id, 3, "a", FailureClass.ENGINE_CRASHED, "exit", now=T0 + timedelta(seconds=8)) is (
        JobState.FAILED
    )


def test_a_host_whose_engine_fails_to_start_k_times_is_quarantined_until_released(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """K failed starts in a row, of different recipes, quarantine the host: it claims nothing, `list_workers` says
    why, and `release_host` (by host name) returns it to rotation with its count reset."""
    _register(store, "broken")
    ids = [job_id for index in range(4) for job_id in _submit(store, make_recipe(f"recipe-{index}"))]
    for attempt_no in range(3):
        job = store.claim_job(ids[attempt_no], "broken", [HW], lease_s=60, now=T0)
        assert job is not None
        assert store.quarantine_reason("broken") is None
        store.fail(
            job.id, job.attempt, "broken", FailureClass.ENGINE_START_FAILED, f"exit {attempt_no}", quarantine_after=3
        )
    reason = store.quarantine_reason("broken")
    assert reason is not None
    assert "3 times in a row" in reason
    assert store.claim("broken", [HW], lease_s=60, now=T0) is None
    assert store.claim_job(ids[3], "broken", [HW], lease_s=60, now=T0) is None
    (view,) = store.list_workers()
    assert (view.start_failures, view.quarantine_reason) == (3, reason)
    assert view.quarantined_at is not None
    assert store.release_host("host-broken") == ["broken"]
    assert store.release_host("host-broken") == []
    assert store.quarantine_reason("broken") is None
    assert store.list_workers()[0].start_failures == 0
    assert store.claim("broken", [HW], lease_s=60, now=T0) is not None


def test_a_recipe_whose_engine_cannot_start_quarantines_no_host(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """A recipe whose engine fails at start on every host, submitted four times: every job ends failed, and no
    host is quarantined however low K is, for each of its failed starts follows the recipe (another run of the job,
    or of the recipe on another host, failed the same way)."""
    _register(store, "a", "b", "c")
    ids = _submit(store, make_recipe("bad"), count=4, max_attempts=2)
    for step in range(40):
        if all(store.get_job(job_id).state is JobState.FAILED for job_id in ids):
            break
        worker = "abc"[step % 3]
        job = store.claim(worker, [HW], lease_s=60, now=T0 + timedelta(seconds=step))
        if job is not None:
            store.fail(job.id, job.attempt, worker, FailureClass.ENGINE_START_FAILED, "exit 1", quarantine_after=2)
    assert {store.get_job(job_id).state for job_id in ids} == {JobState.FAILED}
    assert [store.quarantine_reason(worker) for worker in "abc"] == [None, None, None]
    assert max(view.start_failures for view in store.list_workers()) >= 2  # the raw run of failed starts


def test_a_bad_recipes_first_failure_stops_counting_once_another_host_fails_it(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """Host a fails recipe X first (nothing yet says it is X's fault), then host b fails X the same way: a's
    failure is X's from then on. a's own failures of recipes nobody else failed still count: three of them
    quarantine it."""
    _register(store, "a", "b")
    [x1, x2] = _submit(store, make_recipe("x"), count=2)
    others = [job_id for name in ("y", "z", "w") for job_id in _submit(store, make_recipe(name))]

    def fail(job_id: str, worker: str) -> None:
        job = store.claim_job(job_id, worker, [HW], lease_s=60, now=T0)
        assert job is not None
        store.fail(job.id, job.attempt, worker, FailureClass.ENGINE_START_FAILED, "exit 1", quarantine_after=3)

    fail(x1, "a")
    fail(x2, "b")
    fail(others[0], "a")
    fail(others[1], "a")
    assert store.quarantine_reason("a") is None  # x1, y, z in a row: x1 is the recipe's
    fail(others[2], "a")
    reason = store.quarantine_reason("a")
    assert reason is not None
    assert "3 times in a row" in reason
    assert store.quarantine_reason("b") is None


def test_a_start_that_succeeds_ends_the_run_of_failed_starts(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Failed starts count only in a row: an engine that served in between resets the count."""
    _register(store, "flaky")
    _submit(store, make_recipe(), count=3)
    for index in range(3):
        job = store.claim("flaky", [HW], lease_s=60, now=T0)
        assert job is not None
        failure = FailureClass.ENGINE_START_FAILED
        if index == 1:  # this one served, then crashed
            store.engine_started("flaky")
            failure = FailureClass.ENGINE_CRASHED
        store.fail(job.id, job.attempt, "flaky", failure, "exit", quarantine_after=2)
    assert store.list_workers()[0].start_failures == 1
    assert store.quarantine_reason("flaky") is None


def test_a_failed_start_is_not_charged_to_the_job_the_first_time(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """A job that never reached its engine keeps its budget on its first failed start (the host is the suspect);
    a second failed start elsewhere is charged (the job is)."""
    _register(store, "a", "b")
    [job_id] = _submit(store, make_recipe(), max_attempts=1)
    assert store.claim("a", [HW], lease_s=60, now=T0) is not None
    assert store.fail(job_id, 1, "a", FailureClass.ENGINE_START_FAILED, "exit 1", now=T0) is JobState.QUEUED
    assert store.claim("b", [HW], lease_s=60, now=T0) is not None
    assert store.fail(job_id, 2, "b", FailureClass.ENGINE_START_FAILED, "exit 1", now=T0) is JobState.FAILED


def test_leases_are_computed_by_the_database_clock(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Without a `now`, the lease expiry is the database's time plus the lease: within a second of a read of
    that clock here (same host), whatever the caller would have computed."""
    _submit(store, make_recipe())
    before = datetime.now(UTC)
    job = store.claim("w1", [HW], lease_s=600)
    after = datetime.now(UTC)
    assert job is not None
    slack = timedelta(seconds=1)
    assert before + timedelta(seconds=600) - slack <= job.lease_expires_at <= after + timedelta(seconds=600) + slack
    assert store.get_job(job.id).lease_expires_at == job.lease_expires_at


# --- the first open of a brand-new SQLite store ---------------------------------------------------------------


def open_new_store(url: str, barrier: Barrier, results: Queue[str]) -> None:
    """Child process: wait for the others, then open (and migrate) the store and read its revision."""
    try:
        barrier.wait(timeout=60)
        with Store.open(url, auto_upgrade=True) as store:
            results.put(f"ok {store.schema_revision()}")
    except Exception as exc:  # reported to the parent, which asserts on it
        results.put(f"error {type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_concurrent_first_opens_of_a_new_sqlite_store_all_succeed(tmp_path: Path) -> None:
    """Processes and threads opening one brand-new SQLite file at the same instant (the WAL switch, the first
    revision read and the migration all race) every one succeed, and agree on the head revision; two rounds,
    each on a fresh file."""
    from farm.store.migrate import head_revision

    context = multiprocessing.get_context("spawn")
    for round_no in range(2):
        url = f"sqlite:///{tmp_path / f'round-{round_no}' / 'farm.db'}"
        processes_n, threads_n = 6, 6
        barrier = context.Barrier(processes_n + threads_n)
        results: Queue[str] = context.Queue()
        processes = [context.Process(target=open_new_store, args=(url, barrier, results)) for _ in range(processes_n)]
        for process in processes:
            process.start()
        threads = [threading.Thread(target=open_new_store, args=(url, barrier, results)) for _ in range(threads_n)]
        for thread in threads:
            thread.start()
        outcomes = [results.get(timeout=120) for _ in range(processes_n + threads_n)]
        for thread in threads:
            thread.join(timeout=30)
        for process in processes:
            process.join(timeout=30)
        assert outcomes == [f"ok {head_revision()}"] * (processes_n + threads_n), outcomes


# --- PostgreSQL: a claim is one statement, and what a pooled connection is trusted with ---------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_claim_on_postgres_is_one_statement_outside_any_transaction(
    store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """On a connection used a moment ago, a claim (by the next in line or by id, the recipe known or not) sends
    exactly one statement, in autocommit: no BEGIN and COMMIT, no clock read, no ping, no separate read of the
    hosts or of the recipe; the run row is written by it too."""
    _submit(store, make_recipe(), count=3)
    [named] = _submit(store, make_recipe("named"), at=T0 + timedelta(seconds=1))
    sent: list[tuple[str, bool]] = []

    def record(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append((statement.split()[0], bool(conn.connection.dbapi_connection.autocommit)))  # type: ignore[union-attr]

    engine = store._engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        # The recipe not known yet (it comes with the claim), then known (not sent again), then a claim by id.
        for job_id in (None, None, named):
            store.ping()  # the connection was just used: no ping in front of the claim
            sent.clear()
            if job_id is None:
                job = store.claim("w1", [HW], lease_s=60)
            else:
                job = store.claim_job(job_id, "w1", [HW], lease_s=60)
            assert job is not None
            assert sent == [("WITH", True)]
            assert [(run.attempt, run.worker_id) for run in store.runs(job.id)] == [(1, "w1")]
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _backend_pid(store: Store) -> int:
    with store._engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_pooled_connection_idle_past_the_ping_window_is_pinged_and_replaced_when_dead(
    store: Store, make_recipe: Callable[..., Recipe], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection the database dropped while it lay idle longer than PING_AFTER_IDLE_S is found dead by its
    ping and replaced: the claim succeeds. Within the window the connection is trusted: a claim that meets one the
    database dropped a moment ago fails as a StoreError (as any call during an outage does), and the next call
    gets a new connection."""
    from farm.store import db

    _submit(store, make_recipe(), count=2)
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)
    admin(f"SELECT pg_terminate_backend({_backend_pid(store)})")
    assert store.claim("w1", [HW], lease_s=60) is not None
    monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 3600.0)
    admin(f"SELECT pg_terminate_backend({_backend_pid(store)})")
    with pytest.raises(StoreError, match="cannot claim a job"):
        store.claim("w1", [HW], lease_s=60)
    assert store.claim("w1", [HW], lease_s=60) is not None
