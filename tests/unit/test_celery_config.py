"""Farm mode's Celery settings, queue names, the task's claim-or-drop logic and the sweeper, through fakes.

The real broker and real workers are tested in tests/integration/test_farm_mode.py and test_farm_failures.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from farm.domain import ClaimedJob, JobState, JobView
from farm.errors import BrokerError, StoreError
from farm.queue.celery_app import (
    RUN_JOB_TASK,
    FarmModeSettings,
    celery_config,
    create_app,
    queue_name,
)
from farm.settings import Settings
from farm.worker import celery as tasks
from farm.worker.celery import ConsumerSwitch, FarmRuntime
from farm.worker.profile import WorkerProfile
from farm.worker.sweeper import Sweeper


def test_settings_for_long_jobs_whose_messages_may_come_twice() -> None:
    """JSON only, late acks, prefetch of one, one job at a time, no result backend, and the connection-loss
    choice made explicitly."""
    config = celery_config("redis://:secret@redis:6379/0")
    assert config["task_serializer"] == config["result_serializer"] == "json"
    assert config["accept_content"] == ["json"]
    assert config["task_acks_late"] is True
    assert config["task_reject_on_worker_lost"] is True
    assert config["worker_prefetch_multiplier"] == 1
    assert config["worker_concurrency"] == 1
    assert config["worker_cancel_long_running_tasks_on_connection_loss"] is False
    assert config["broker_connection_retry_on_startup"] is True
    assert config["task_ignore_result"] is True
    assert config["result_backend"] is None
    assert config["worker_redirect_stdouts"] is False


def test_the_visibility_timeout_is_the_settings_and_checked_within_it_on_every_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app that producers and workers share carries FARM_VISIBILITY_TIMEOUT_S, and every worker looks for
    messages past it a quarter of it apart (at most 10 s, at least 1 s), on every check (no throttle): a dead
    worker's message is back within the timeout and a few seconds, not a day later."""
    monkeypatch.setenv("FARM_VISIBILITY_TIMEOUT_S", "8")
    app = create_app("redis://127.0.0.1:1/0")
    options = app.conf.broker_transport_options
    assert (options["visibility_timeout"], options["unacked_restore_interval"]) == (8.0, 2.0)
    assert options["unacked_restore_throttle"] == 1
    assert app.conf.task_acks_late is True
    assert app.conf.worker_prefetch_multiplier == 1
    app.close()
    monkeypatch.delenv("FARM_VISIBILITY_TIMEOUT_S")
    default = celery_config("redis://127.0.0.1:1/0")["broker_transport_options"]
    assert (default["visibility_timeout"], default["unacked_restore_interval"]) == (3600.0, 10.0)


def test_every_broker_wait_is_bounded_by_the_broker_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connect and socket timeouts on the transport and on connecting, from FARM_BROKER_TIMEOUT_S; keepalive
    and a health check of idle connections."""
    monkeypatch.setenv("FARM_BROKER_TIMEOUT_S", "1.5")
    config = celery_config("redis://127.0.0.1:1/0")
    options = config["broker_transport_options"]
    assert (options["socket_timeout"], options["socket_connect_timeout"]) == (1.5, 1.5)
    assert config["broker_connection_timeout"] == 1.5
    assert options["socket_keepalive"] is True
    assert 0 < options["health_check_interval"] <= 10
    monkeypatch.setenv("FARM_BROKER_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="broker_timeout_s"):
        celery_config("redis://127.0.0.1:1/0")


@pytest.mark.parametrize(
    ("hardware_class", "queue"),
    [
        ("rtx-pro-6000-blackwell-96gb x 2", "farm.rtx-pro-6000-blackwell-96gb.x2"),
        ("rtx-pro-6000-blackwell-96gb x 1", "farm.rtx-pro-6000-blackwell-96gb.x1"),
        ("sim:rtx-pro-6000-blackwell-96gb x 2", "farm.sim.rtx-pro-6000-blackwell-96gb.x2"),
        ("h100-sxm-80gb x 8", "farm.h100-sxm-80gb.x8"),
        ("cpu x 1", "farm.cpu.x1"),
    ],
)
def test_queue_names(hardware_class: str, queue: str) -> None:
    """One queue per hardware class; simulated hardware has queues of its own."""
    assert queue_name(hardware_class) == queue


@pytest.mark.parametrize("bad", ["", "rtx x 0", "rtx x two", "RTX x 2", "a.b x 1", "sim: rtx x 1", "rtx x 2 "])
def test_queue_name_refuses_what_is_not_a_hardware_class(bad: str) -> None:
    """Anything that could make two classes share a queue is refused."""
    with pytest.raises(ValueError, match="not a hardware class"):
        queue_name(bad)


def test_farm_mode_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """FARM_SWEEP_INTERVAL_S, FARM_ANNOUNCE_GRACE_S, FARM_ON_SIGTERM reach the settings; bad values are refused."""
    monkeypatch.setenv("FARM_SWEEP_INTERVAL_S", "0.5")
    monkeypatch.setenv("FARM_ON_SIGTERM", "release")
    settings = FarmModeSettings()
    assert (settings.sweep_interval_s, settings.on_sigterm, settings.announce_grace_s) == (0.5, "release", 10.0)
    monkeypatch.setenv("FARM_ON_SIGTERM", "abandon")
    with pytest.raises(ValueError, match="on_sigterm"):
        FarmModeSettings()


# --- the task, through fakes ------------------------------------------------------------------------------------

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _view(
    job_id: str,
    state: JobState = JobState.QUEUED,
    attempt: int = 0,
    klass: str = "sim:h200-141gb x 1",
    age_s: float = 60,
) -> JobView:
    return JobView(
        id=job_id,
        state=state,
        recipe_id="r",
        sweep_name="s",
        hardware_class=klass,
        attempt=attempt,
        max_attempts=3,
        created_at=NOW - timedelta(seconds=age_s),
        updated_at=NOW - timedelta(seconds=age_s),
    )


@dataclass
class FakeStore:
    """The Store calls the task and the sweeper make, with canned answers."""

    claimable: set[str] = field(default_factory=set)
    claim_error: bool = False
    after_run: JobState = JobState.SUCCEEDED
    queued: list[JobView] = field(default_factory=list)
    reaped: list[str] = field(default_factory=list)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    left_to_others: set[str] = field(default_factory=set)
    quarantined: str | None = None
    next_in_line: list[str] = field(default_factory=list)
    """What `claim` (the next queued job of the classes, straight from the store) takes, in order."""
    next_error: bool = False

    def claim(self, worker_id: str, classes: Any, lease_s: float, *, live_within_s: float) -> ClaimedJob | None:
        self.calls.append(("claim",))
        if self.next_error:
            raise StoreError("connection refused")
        if self.quarantined is not None or not self.next_in_line:
            return None
        job_id = self.next_in_line.pop(0)
        return ClaimedJob(job_id, 1, worker_id, "sim:h200-141gb x 1", {}, {}, NOW)

    def claim_job(
        self, job_id: str, worker_id: str, classes: Any, lease_s: float, *, live_within_s: float
    ) -> ClaimedJob | None:
        self.calls.append(("claim_job", job_id))
        if self.claim_error:
            raise StoreError("connection refused")
        if job_id not in self.claimable:
            return None
        self.claimable.discard(job_id)
        return ClaimedJob(job_id, 1, worker_id, "sim:h200-141gb x 1", {}, {}, NOW)

    def skipped(self, job_id: str, worker_id: str) -> bool:
        return job_id in self.left_to_others

    def get_job(self, job_id: str) -> JobView:
        self.calls.append(("get_job", job_id))
        if job_id in self.reaped:
            return _view(job_id, JobState.QUEUED, attempt=1, klass="sim:rtx-pro-6000-blackwell-96gb x 2")
        if job_id in self.left_to_others:
            return _view(job_id, JobState.QUEUED, attempt=1)
        return _view(job_id, self.after_run, attempt=1)

    def queued_jobs(self, classes: Any, limit: int) -> list[JobView]:
        return [job for job in self.queued if job.hardware_class in classes]

    def release(self, job_id: str, attempt: int, worker_id: str, reason: str) -> JobState:
        self.calls.append(("release", job_id, attempt))
        return JobState.QUEUED

    def reap(self) -> list[str]:
        self.calls.append(("reap",))
        return list(self.reaped)

    def ping(self) -> None:
        self.calls.append(("ping",))

    def worker_heartbeat(
        self, worker_id: str, job_id: str | None = None, phase: str | None = None, **health: Any
    ) -> None:
        self.calls.append(("worker_heartbeat", worker_id, job_id))


@dataclass
class FakeWorker:
    store: FakeStore
    worker_id: str = "w1"
    hardware_classes: tuple[str, ...] = ("sim:h200-141gb x 1",)
    lease_s: float = 60.0
    settings: Settings = field(default_factory=Settings)
    ran: list[str] = field(default_factory=list)

    spooled: frozenset[str] = frozenset()
    """Jobs whose results wait in this worker's spool (the store does not take them)."""

    ended: JobState | None = None
    """What run_job says of how each job ended (None: it does not know; the runtime asks the store)."""

    def run_job(self, job: ClaimedJob) -> JobState | None:
        self.ran.append(job.id)
        return self.ended

    def deliver_spooled(self) -> frozenset[str]:
        return self.spooled

    def check_quarantine(self) -> str | None:
        return self.store.quarantined

    def report_alive(self, job_id: str | None = None, phase: str | None = None) -> None:
        self.store.worker_heartbeat(self.worker_id, job_id=job_id, phase=phase)


@dataclass
class FakeAnnouncer:
    announced: list[tuple[str, str, int]] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    due: set[str] = field(default_factory=set)
    queue_lengths: dict[str, int] = field(default_factory=dict)

    fail_after: int | None = None
    """Raise BrokerError from this many announcements on (None: never)."""
    tries: int = 0

    def announce(self, job_id: str, hardware_class: str, attempt: int) -> bool:
        self._maybe_fail()
        self.announced.append((job_id, hardware_class, attempt))
        return True

    def _maybe_fail(self) -> None:
        self.tries += 1
        if self.fail_after is not None and self.tries > self.fail_after:
            raise BrokerError("connection refused")

    def forget(self, job_id: str) -> None:
        self.forgotten.append(job_id)

    withdrawn: dict[str, int] = field(default_factory=dict)
    """Jobs whose announcement was withdrawn (claimed straight), with the attempt claimed."""

    def withdraw(self, job_id: str, attempt: int) -> None:
        self.withdrawn[job_id] = attempt

    def announcement_stands(self, job_id: str) -> bool:
        return job_id not in self.withdrawn

    def announce_if_due(self, job: JobView, *, now: float, grace_s: float, stale_s: float, queue_empty: bool) -> bool:
        self._maybe_fail()
        if job.id in self.due:
            self.announced.append((job.id, job.hardware_class, job.attempt))
            return True
        return False

    def queue_length(self, hardware_class: str) -> int:
        return self.queue_lengths.get(hardware_class, 0)

    turn_held_by_another: bool = False
    """take_turn: another worker's sweeper holds every class's announcing turn."""

    def take_turn(self, hardware_class: str, worker_id: str, seconds: float) -> bool:
        return not self.turn_held_by_another

    broker_error: str | None = None
    """What ping() answers: None while the broker answers."""

    def ping(self) -> str | None:
        return self.broker_error


def _runtime(store: FakeStore, **kwargs: Any) -> tuple[FarmRuntime, FakeWorker, FakeAnnouncer]:
    worker, announcer = FakeWorker(store), FakeAnnouncer()
    return FarmRuntime(worker, announcer, **kwargs), worker, announcer  # type: ignore[arg-type]


def test_a_message_for_a_job_that_cannot_be_claimed_is_a_duplicate() -> None:
    """claim_job returns None (claimed, finished, cancelled, unknown, other hardware): nothing runs."""
    runtime, worker, announcer = _runtime(FakeStore())
    assert runtime.handle("j-1") == "duplicate"
    assert worker.ran == []
    assert announcer.announced == []


def test_the_first_message_runs_the_job_and_the_second_is_dropped() -> None:
    """The same job id twice: one run."""
    runtime, worker, _ = _runtime(FakeStore(claimable={"j-1"}))
    assert [runtime.handle("j-1"), runtime.handle("j-1")] == ["ran", "duplicate"]
    assert worker.ran == ["j-1"]
    assert not runtime.busy


def test_a_free_worker_claims_the_next_queued_job_straight_from_the_store_until_none_is_left() -> None:
    """After its message's job, the task claims the next ones from the store (no message per job) and runs them in
    order, one at a time; it returns once a claim finds nothing, and asks the store once more then, not in a loop."""
    store = FakeStore(claimable={"j-1"}, next_in_line=["j-2", "j-3"])
    runtime, worker, _ = _runtime(store)
    assert runtime.handle("j-1") == "ran"
    assert worker.ran == ["j-1", "j-2", "j-3"]
    assert [c for c in store.calls if c[0] in ("claim", "claim_job")] == [("claim_job", "j-1")] + [("claim",)] * 3
    assert not runtime.busy


def test_a_message_whose_job_was_taken_wakes_the_worker_for_the_next_job_in_line() -> None:
    """A duplicate (its job claimed straight by a busy worker) is a wake-up: the idle worker takes the queued job
    next in line rather than waiting for that job's own message."""
    runtime, worker, _ = _runtime(FakeStore(next_in_line=["j-7"]))
    assert runtime.handle("j-1") == "ran"
    assert worker.ran == ["j-7"]


@pytest.mark.parametrize(
    ("why", "setup"),
    [
        ("stopping", lambda runtime, worker, store: setattr(runtime, "stopping", True)),
        ("paused", lambda runtime, worker, store: setattr(runtime, "paused", True)),
        ("spooled results wait", lambda runtime, worker, store: setattr(worker, "spooled", frozenset({"j-0"}))),
        ("store error", lambda runtime, worker, store: setattr(store, "next_error", True)),
        ("quarantined", lambda runtime, worker, store: setattr(store, "quarantined", "3 failed starts")),
    ],
)
def test_no_next_job_is_claimed_when_the_worker_should_take_none(why: str, setup: Any) -> None:
    """A stopping (SIGTERM), paused or quarantined worker, one whose spool holds results (a claim could fence them
    out) and one whose store fails runs only its message's job; no error escapes the task."""
    store = FakeStore(claimable={"j-1"}, next_in_line=["j-2"])
    runtime, worker, _ = _runtime(store)
    setup(runtime, worker, store)
    assert runtime.handle("j-1") == "ran"
    assert worker.ran == ["j-1"]
    assert store.next_in_line == ["j-2"]


def test_a_job_back_in_the_queue_after_its_run_is_announced_again() -> None:
    """A retried failure or a release ends `queued`: the task announces its new attempt at once."""
    runtime, _, announcer = _runtime(FakeStore(claimable={"j-1"}, after_run=JobState.QUEUED))
    runtime.handle("j-1")
    assert announcer.announced == [("j-1", "sim:h200-141gb x 1", 1)]


def test_a_store_outage_at_claim_time_leaves_the_job_to_the_sweeper() -> None:
    """The message is spent; the announcement is forgotten so that a sweeper announces the job again later."""
    runtime, worker, announcer = _runtime(FakeStore(claimable={"j-1"}, claim_error=True))
    assert runtime.handle("j-1") == "store_unavailable"
    assert (worker.ran, announcer.forgotten) == ([], ["j-1"])


def test_a_job_whose_results_wait_in_the_spool_is_not_claimed_again() -> None:
    """Results of the job spooled through an outage and not yet taken: no claim, which would start a later attempt
    and fence them out; the announcement is forgotten, nothing runs."""
    runtime, worker, announcer = _runtime(FakeStore(claimable={"j-1"}))
    worker.spooled = frozenset({"j-1"})
    assert runtime.handle("j-1") == "spooled"
    assert (worker.ran, announcer.forgotten) == ([], ["j-1"])
    worker.spooled = frozenset()
    assert runtime.handle("j-1") == "ran"


def test_a_job_left_to_another_host_is_sent_back_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim refused a job that is still queued (this host failed it, or is quarantined): its message is
    sent back, after a pause, for another worker; nothing runs here."""
    monkeypatch.setattr(tasks, "SKIP_PAUSE_S", 0.0)
    runtime, worker, announcer = _runtime(FakeStore(left_to_others={"j-1"}))
    assert runtime.handle("j-1") == "skipped"
    assert worker.ran == []
    assert (announcer.forgotten, announcer.announced) == (["j-1"], [("j-1", "sim:h200-141gb x 1", 1)])


@dataclass
class RecordingSwitch(ConsumerSwitch):
    moves: list[str] = field(default_factory=list)

    def pause(self) -> None:
        self.moves.append("pause")

    def resume(self) -> None:
        self.moves.append("resume")


def test_a_quarantined_worker_stops_consuming_until_it_is_back_in_rotation() -> None:
    """The sweeper's host check pauses the queues once when the host is quarantined, and resumes them once
    when it is released; nothing changes while a job is in hand."""
    store = FakeStore(quarantined="the engine failed to start 3 times in a row")
    switch = RecordingSwitch()
    runtime, _, _ = _runtime(store, consumer=switch)
    runtime.check_host()
    runtime.check_host()
    assert switch.moves == ["pause"]
    store.quarantined = None
    runtime.current = ClaimedJob("j-2", 1, "w1", "sim:h200-141gb x 1", {}, {}, NOW)
    runtime.check_host()
    assert switch.moves == ["pause"]
    runtime.current = None
    runtime.check_host()
    assert switch.moves == ["pause", "resume"]


def test_release_hands_back_the_job_in_hand_only() -> None:
    """No job in hand: nothing to release. A job in hand: released with its attempt."""
    store = FakeStore()
    runtime, _, _ = _runtime(store, on_sigterm="release")
    assert runtime.release_current("stop") is None
    runtime.current = ClaimedJob("j-2", 3, "w1", "sim:h200-141gb x 1", {}, {}, NOW)
    assert runtime.release_current("stop") == "j-2"
    assert ("release", "j-2", 3) in store.calls


def test_a_message_whose_announcement_was_withdrawn_is_dropped_without_a_claim() -> None:
    """Its job was claimed straight from the store (the announcement withdrawn): no claim query, nothing runs,
    and nothing is forgotten or announced."""
    store = FakeStore(claimable={"j-1"}, next_in_line=["j-2"])
    runtime, worker, announcer = _runtime(store)
    announcer.withdrawn["j-1"] = 1
    assert runtime.handle("j-1") == "withdrawn"
    assert (worker.ran, store.calls, announcer.forgotten, announcer.announced) == ([], [], [], [])


def test_each_job_claimed_straight_withdraws_its_message_and_a_message_claim_does_not() -> None:
    """The jobs claimed straight leave their messages in the queue: each is withdrawn with the attempt claimed.
    The message's own job consumed its message: nothing to withdraw."""
    runtime, worker, announcer = _runtime(FakeStore(claimable={"j-1"}, next_in_line=["j-2", "j-3"]))
    assert runtime.handle("j-1") == "ran"
    assert worker.ran == ["j-1", "j-2", "j-3"]
    assert announcer.withdrawn == {"j-2": 1, "j-3": 1}


def test_a_worker_that_starts_free_claims_straight_from_the_store() -> None:
    """No message, no sweeper pass: at its start the worker runs what is queued for it, one job after another,
    and says whether it ran any; with nothing queued it asks once."""
    store = FakeStore(next_in_line=["j-1", "j-2"])
    runtime, worker, announcer = _runtime(store)
    assert runtime.run_queued()
    assert worker.ran == ["j-1", "j-2"]
    assert announcer.withdrawn == {"j-1": 1, "j-2": 1}
    store.calls.clear()
    assert not runtime.run_queued()
    assert store.calls == [("claim",)]


def test_a_task_that_waited_for_the_start_claims_of_a_stopping_worker_claims_nothing() -> None:
    """A message that arrives while the start's straight claims run waits for them; when the worker was stopped
    meanwhile it claims nothing, and its announcement goes (the message is spent) so that a sweeper makes another."""
    import threading

    store = FakeStore(claimable={"j-9"})
    runtime, worker, announcer = _runtime(store)
    outcome: list[str] = []
    with runtime._slot:  # the start's straight claims hold the job slot
        task = threading.Thread(target=lambda: outcome.append(runtime.handle("j-9")))
        task.start()
        task.join(timeout=0.2)
        assert task.is_alive()  # it waits for the slot
        runtime.stopping = True
    task.join(timeout=5)
    assert outcome == ["stopping"]
    assert (worker.ran, announcer.forgotten, store.calls) == ([], ["j-9"], [])


@pytest.mark.parametrize(
    ("ended", "looked_up"),
    [(JobState.SUCCEEDED, False), (JobState.FAILED, False), (JobState.QUEUED, True), (None, True)],
)
def test_only_a_job_that_may_be_back_in_the_queue_is_looked_up_after_its_run(
    ended: JobState | None, looked_up: bool
) -> None:
    """A job the worker wrote as succeeded or failed for good is not read back before the next claim (a read in
    front of every pickup); a retried one, or one whose end the worker does not know, is."""
    store = FakeStore(claimable={"j-1"}, after_run=JobState.QUEUED if ended is None else ended)
    runtime, worker, _ = _runtime(store)
    worker.ended = ended
    assert runtime.handle("j-1") == "ran"
    assert (("get_job", "j-1") in store.calls) is looked_up


def test_idle_heartbeat_only_while_idle() -> None:
    """A busy worker's heartbeat belongs to its job (with the phase); the sweeper's idle one must not clear it."""
    store = FakeStore()
    runtime, _, _ = _runtime(store)
    runtime.idle_heartbeat()
    runtime.current = ClaimedJob("j-2", 1, "w1", "sim:h200-141gb x 1", {}, {}, NOW)
    runtime.idle_heartbeat()
    assert [c for c in store.calls if c[0] == "worker_heartbeat"] == [("worker_heartbeat", "w1", None)]


def test_on_sigterm_policy_defaults_to_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset everywhere: finish. FARM_ON_SIGTERM overrides the profile."""
    from farm.worker.farm_mode import on_sigterm_policy

    profile = WorkerProfile.model_validate({"name": "p", "hardware": {"hardware_id": "h200-141gb", "count": 1}})
    assert on_sigterm_policy(profile, FarmModeSettings()) == "finish"
    monkeypatch.setenv("FARM_ON_SIGTERM", "release")
    assert on_sigterm_policy(profile, FarmModeSettings()) == "release"


# --- the sweeper, through fakes ----------------------------------------------------------------------------------


def _sweeper(store: FakeStore, announcer: FakeAnnouncer, **hooks: Any) -> Sweeper:
    settings = FarmModeSettings(sweep_interval_s=1, announce_grace_s=5, announce_stale_s=60, reap_grace_s=0)
    return Sweeper(store, announcer, ("sim:h200-141gb x 1",), settings, **hooks)  # type: ignore[arg-type]


def test_the_first_pass_waits_a_random_part_of_an_interval_and_the_spool_is_offered_at_once() -> None:
    """A fleet started at once does not sweep in step: the first pass comes a random part of an interval after the
    start (here drawn as 0.6 of it), while spooled results are offered for delivery at the start itself."""
    import random
    import time

    store = FakeStore()
    offered: list[float] = []

    def deliver() -> frozenset[str]:
        offered.append(time.monotonic())
        return frozenset()

    sweeper = _sweeper(store, FakeAnnouncer(), deliver_spooled=deliver)

    class Drawn(random.Random):
        def uniform(self, a: float, b: float) -> float:
            assert (a, b) == (0.0, 1.0)  # within one sweep interval
            return 0.6

    sweeper._random = Drawn()
    started = time.monotonic()
    sweeper.start()
    try:
        wait = time.monotonic() + 5
        while ("reap",) not in store.calls and time.monotonic() < wait:
            time.sleep(0.01)
        first_pass = time.monotonic()
    finally:
        sweeper.stop()
    assert offered[0] - started < 0.3
    assert 0.6 <= first_pass - started < 2.0


def test_the_sweeper_announces_reaped_jobs_at_once_and_due_ones_of_its_classes() -> None:
    """A reaped job is announced whatever its class; of the others only the due ones of the worker's classes."""
    store = FakeStore(
        reaped=["j-reaped"],
        queued=[
            _view("j-due"),
            _view("j-waiting"),
            _view("j-other-class", klass="h100-sxm-80gb x 1"),
        ],
    )
    announcer = FakeAnnouncer(due={"j-due", "j-other-class"})
    report = _sweeper(store, announcer).sweep(now=NOW.timestamp())
    assert report.reaped == ["j-reaped"]
    assert report.announced == ["j-reaped", "j-due"]
    assert announcer.announced == [
        ("j-reaped", "sim:rtx-pro-6000-blackwell-96gb x 2", 1),
        ("j-due", "sim:h200-141gb x 1", 0),
    ]


def test_a_sweeper_without_the_announcing_turn_reaps_but_looks_at_no_queued_job() -> None:
    """Another worker's sweeper holds the class's turn: this one still reaps and announces what it reaped, but
    reads no queued jobs and announces none of them (one sweeper of the fleet does, per interval)."""
    store = FakeStore(reaped=["j-reaped"], queued=[_view("j-due")])
    announcer = FakeAnnouncer(due={"j-due"}, turn_held_by_another=True)
    report = _sweeper(store, announcer).sweep(now=NOW.timestamp())
    assert report.announced == ["j-reaped"]
    assert [job for job, _, _ in announcer.announced] == ["j-reaped"]


def test_the_sweeper_stops_announcing_for_the_pass_after_a_broker_failure() -> None:
    """With the broker gone, one failed announcement ends the pass's announcing: no timeout per queued job."""
    store = FakeStore(queued=[_view(f"j-{n}") for n in range(5)])
    announcer = FakeAnnouncer(due={f"j-{n}" for n in range(5)}, fail_after=1)
    report = _sweeper(store, announcer).sweep(now=NOW.timestamp())
    assert report.broker_down
    assert report.announced == ["j-0"]
    assert announcer.tries == 2
    assert len(report.errors) == 1


def test_the_sweeper_delivers_spooled_results_first_and_survives_a_store_outage() -> None:
    """Spooled results go before the reaper (a late delivery must not lose to its own reaping); an unreachable
    store is reported, not raised."""
    order: list[str] = []

    class DownStore(FakeStore):
        def reap(self) -> list[str]:
            order.append("reap")
            raise StoreError("connection refused")

    def deliver() -> frozenset[str]:
        order.append("deliver")
        return frozenset()

    sweeper = _sweeper(DownStore(), FakeAnnouncer(), deliver_spooled=deliver)
    report = sweeper.sweep()
    assert order == ["deliver", "reap"]
    assert report.errors == ["connection refused"]


def test_the_sweeper_delivers_again_once_the_store_answers_and_never_announces_a_spooled_job() -> None:
    """The first delivery after an outage failed, the reap answered: the spool is delivered again before any
    announcement; a job whose results still wait is not announced (its announcement would start a later attempt
    here and fence them out), reaped or due."""
    store = FakeStore(reaped=["j-spooled", "j-other"], queued=[_view("j-spooled-due")])
    answers = [frozenset({"j-spooled", "j-spooled-due"}), frozenset({"j-spooled", "j-spooled-due"})]
    calls: list[str] = []

    def deliver() -> frozenset[str]:
        calls.append("deliver")
        return answers.pop(0)

    announcer = FakeAnnouncer(due={"j-spooled-due"})
    report = _sweeper(store, announcer, deliver_spooled=deliver).sweep(now=NOW.timestamp())
    assert calls == ["deliver", "deliver"]
    assert report.announced == ["j-other"]
    delivered = _sweeper(FakeStore(reaped=["j-spooled"]), FakeAnnouncer(), deliver_spooled=lambda: frozenset())
    assert delivered.sweep(now=NOW.timestamp()).announced == ["j-spooled"]


def test_task_name() -> None:
    """The one task of farm mode is `farm.run_job`; producers send it by name."""
    assert RUN_JOB_TASK == "farm.run_job"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_after_a_database_outage_the_sweeper_reaps_only_once_the_owners_had_their_grace() -> None:
    """The sweeper starts (a start counts as a return: it reaps nothing for the grace), the database goes away
    (nothing reaped while it does not answer), comes back: the grace is measured from that answer, not from the
    leases, and only then are expired leases reaped and announced."""
    from farm.worker.outage import StoreWatch

    clock = Clock()
    watch = StoreWatch(30.0, clock=clock)

    class FlakyStore(FakeStore):
        down: bool = False

        def reap(self) -> list[str]:
            if self.down:
                raise StoreError("connection refused")
            return super().reap()

        def ping(self) -> None:
            if self.down:
                raise StoreError("connection refused")
            super().ping()

    store = FlakyStore(reaped=["j-expired"])
    announcer = FakeAnnouncer()
    sweeper = _sweeper(store, announcer, watch=watch)
    assert sweeper.sweep().reap_held  # just started
    clock.now += 31
    assert sweeper.sweep().reaped == ["j-expired"]  # the grace since the start is over
    store.reaped, announcer.announced = ["j-owner-spooled"], []
    store.down = True
    first = sweeper.sweep()  # the reap is what finds the database gone
    assert (first.reaped, first.errors, watch.down) == ([], ["connection refused"], True)
    clock.now += 120  # an outage far past every lease
    report = sweeper.sweep()
    assert (report.reap_held, report.reaped) == (True, [])
    store.down = False
    clock.now += 5
    back = sweeper.sweep()  # the database answers: the grace starts now
    assert (back.reap_held, back.reaped, announcer.announced) == (True, [], [])
    clock.now += 29
    assert sweeper.sweep().reap_held
    clock.now += 2
    assert sweeper.sweep().reaped == ["j-owner-spooled"]
    assert announcer.announced == [("j-owner-spooled", "sim:rtx-pro-6000-blackwell-96gb x 2", 1)]


def test_the_sweeper_reports_whether_the_broker_answers_and_announces_nothing_when_it_does_not() -> None:
    """One ping per pass; its answer goes to the worker (on_broker), and a broker that does not answer is asked
    for nothing more in the pass (no timeout per queued or reaped job)."""
    store = FakeStore(reaped=["j-reaped"], queued=[_view("j-due")])
    announcer = FakeAnnouncer(due={"j-due"}, broker_error="TimeoutError: Timeout reading from socket")
    answers: list[str | None] = []
    sweeper = _sweeper(store, announcer, on_broker=answers.append)
    report = sweeper.sweep(now=NOW.timestamp())
    assert (report.broker_down, report.announced, announcer.tries) == (True, [], 0)
    assert answers == ["TimeoutError: Timeout reading from socket"]
    announcer.broker_error = None
    store.reaped = []
    assert sweeper.sweep(now=NOW.timestamp()).announced == ["j-due"]
    assert answers[-1] is None


def test_a_task_that_fails_before_its_claim_resolves_forgets_the_announcement() -> None:
    """Anything that goes wrong before the claim resolves (here the spool cannot be read) spends the message: the
    job's announcement is forgotten at once, so the next sweep announces it again instead of after
    FARM_ANNOUNCE_STALE_S."""
    runtime, worker, announcer = _runtime(FakeStore(claimable={"j-1"}))

    def broken_spool() -> frozenset[str]:
        raise PermissionError("spool directory unreadable")

    worker.deliver_spooled = broken_spool  # type: ignore[method-assign]
    assert runtime.handle("j-1") == "error"
    assert (worker.ran, announcer.forgotten) == ([], ["j-1"])


def test_a_skip_check_the_store_does_not_answer_forgets_the_announcement() -> None:
    """The claim said no and the store then does not say whether the job is still queued: the message is spent,
    so the announcement goes (a sweeper announces the job again if it is queued)."""

    class SkipCheckDown(FakeStore):
        def skipped(self, job_id: str, worker_id: str) -> bool:
            raise StoreError("connection refused")

    runtime, _, announcer = _runtime(SkipCheckDown())
    assert runtime.handle("j-1") == "skipped"
    assert announcer.forgotten == ["j-1"]


def test_a_stopping_worker_is_ended_within_its_grace_once_its_job_is_over_whatever_celery_does() -> None:
    """The SIGTERM watchdog waits for the job in hand (finish means finish), then gives Celery the grace to exit;
    a Celery stuck on a silent broker is ended then, after the last words. One that exits is left alone."""
    import threading
    import time

    from farm.worker.farm_mode import exit_watchdog

    runtime, _, _ = _runtime(FakeStore())
    runtime.current = ClaimedJob("j-2", 1, "w1", "sim:h200-141gb x 1", {}, {}, NOW)
    exited, codes, words = threading.Event(), list[int](), list[str]()
    watchdog = threading.Thread(
        target=exit_watchdog,
        args=(runtime, 0.2, exited, lambda: words.append("spool written")),
        kwargs={"force_exit": codes.append},
    )
    watchdog.start()
    time.sleep(0.6)
    assert codes == []  # the job is still in hand
    runtime.current = None
    watchdog.join(timeout=5)
    assert (codes, words) == ([0], ["spool written"])

    exited.set()  # this time Celery exits by itself
    calm = threading.Thread(
        target=exit_watchdog, args=(runtime, 0.2, exited, words.clear), kwargs={"force_exit": codes.append}
    )
    calm.start()
    calm.join(timeout=5)
    assert (codes, words) == ([0], ["spool written"])
