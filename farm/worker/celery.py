"""The farm-mode task `farm.run_job(job_id)` and the per-process runtime it runs with.

The task does what a polling worker does after its claim, through the same code: claim the named job through
the store (`claim_job`), and when that wins, hand it to `Worker.run_job`. A claim that finds the job running,
finished, cancelled, unknown or for other hardware is a duplicate message: logged and dropped. So a message
delivered twice (a redelivery past the visibility timeout, the restore after a lost connection, a sweeper's
second announcement) runs the job once. A claim that finds the job still queued left it to another host (this
one failed it, or is quarantined): its message is sent back after a pause.

The runtime (the Worker, built once per worker process from its profile and store, and the announcer) is the
one piece of process-global state of farm mode, set by `install` before the Celery worker starts and fenced
into this module.

A free worker claims straight from the store before it goes back to the broker: once a job ends, the task claims
the next queued job of its classes (`Store.claim`, SKIP LOCKED, priority order) and runs it in the same task,
for as long as there is one; and a message whose own job was taken already (a duplicate) claims the next queued
job instead of doing nothing. So a message is a wake-up for the class, not a ticket for one job: with a backlog,
a worker that finishes a job picks up the next one in one claim query, without acknowledging, fetching and
matching a message (bench/fleet.py measures the difference), and an idle worker woken by any message of its
class takes the job next in line. Every message still stands for a queued job that nobody claimed through it, so
the messages in a queue are never fewer than its unclaimed jobs; the surplus (messages of jobs claimed straight)
are surplus. The worker withdraws the announcement of each job it claims straight (farm.queue.announce, sent
with its sweeper's next broker ping), and a message whose announcement is gone is dropped without a claim query
(`withdrawn`); one that comes before the withdrawal is a duplicate that costs one claim query. The chain stops
when nothing is queued for this host, when the worker is stopping (SIGTERM: the job in hand is finished, and no
next one is taken), quarantined or paused, when results wait in its spool (a claim could start a later attempt
of their own job), and on any store error (the message path and the sweepers take over).

A worker that starts free claims straight from the store too (`run_queued`, started beside Celery's consumer
when the worker is ready), rather than waiting for a message or a sweeper's announcement; a task that arrives
meanwhile waits for the job slot (one job at a time), and claims nothing if the worker was stopped meanwhile.
Between two jobs of a chain the store is asked whether the ended job went back to the queue only when the
worker does not know how it ended (`run_job` says succeeded or failed for good): a pickup is one claim query.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import structlog
from celery import Celery, signals

from farm.domain import ClaimedJob, JobState
from farm.errors import BrokerError, LeaseLost, StoreError
from farm.logs import get_logger
from farm.queue.announce import Announcer
from farm.queue.celery_app import RUN_JOB_TASK
from farm.settings import Settings
from farm.store import Store

log = get_logger(__name__)

Outcome = Literal["ran", "duplicate", "withdrawn", "skipped", "store_unavailable", "spooled", "stopping", "error"]
OnSigterm = Literal["finish", "release"]

SKIP_PAUSE_S = 1.0
"""A worker that leaves a job to another host (it failed the job, or it is quarantined) waits this long before
sending the job's message back, so that an idle healthy worker, not itself, takes it (and a farm where only
busy hosts could take it sees at most one such message a second)."""


class ConsumerSwitch:
    """Stops and resumes a worker's consumption of its queues (a quarantined host must not take messages)."""

    def pause(self) -> None:
        """Stop taking messages."""

    def resume(self) -> None:
        """Take messages again."""


class TaskWorker(Protocol):
    """What the task needs of its worker: farm.worker.daemon.Worker (engines, spool, heartbeats), or the light one
    of bench/fleet.py whose jobs run no engine."""

    @property
    def store(self) -> Store: ...

    @property
    def worker_id(self) -> str: ...

    @property
    def hardware_classes(self) -> tuple[str, ...]: ...

    @property
    def lease_s(self) -> float: ...

    @property
    def settings(self) -> Settings: ...

    def deliver_spooled(self) -> frozenset[str]: ...

    def run_job(self, job: ClaimedJob) -> JobState | None:
        """Run a claimed job; the state this worker's own last write left it in, None when it does not know (its
        lease was lost, its results were spooled): the runtime then asks the store whether the job is back in
        the queue."""
        ...

    def check_quarantine(self) -> str | None: ...

    def report_alive(self, job_id: str | None = None, phase: str | None = None) -> None: ...


@dataclass
class FarmRuntime:
    """What the task needs in a worker process: the Worker, the announcer, and the job in hand."""

    worker: TaskWorker
    announcer: Announcer
    on_sigterm: OnSigterm = "finish"
    consumer: ConsumerSwitch = field(default_factory=ConsumerSwitch)
    current: ClaimedJob | None = None
    paused: bool = False
    stopping: bool = False
    """Set when the worker is shutting down: the job in hand ends, and no next one is claimed."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _slot: threading.Lock = field(default_factory=threading.Lock)
    """Held while a task or the start's straight claims run jobs: one job at a time on a host."""

    @property
    def busy(self) -> bool:
        return self.current is not None

    def handle(self, job_id: str) -> Outcome:
        """Claim the job and run it; the body of `farm.run_job`.

        A message whose announcement was withdrawn (its job was claimed straight from the store: `withdraw`) is
        dropped without asking the store. A message consumed without a claim must not leave the job's
        announcement standing (the job would wait FARM_ANNOUNCE_STALE_S for a sweeper to take the announcement
        as lost): every way out before the claim resolves forgets it, so the next sweep announces the job again,
        an unexpected error included."""
        if not self.announcer.announcement_stands(job_id):
            log.info("task.withdrawn", job=job_id)
            return "withdrawn"
        if not self._slot.acquire(blocking=False):
            self._slot.acquire()  # the start's straight claims held it (run_queued)
            if self.stopping:  # and the worker was stopped meanwhile: no new job. The message is spent (it is
                self._slot.release()  # acknowledged on return), so its announcement goes; a sweeper makes one anew.
                self.announcer.forget(job_id)
                return "stopping"
        try:
            try:
                job = self._claim(job_id)
            except Exception:
                log.exception("task.failed_before_claim", job=job_id)
                self.announcer.forget(job_id)
                return "error"
            if job == "duplicate":
                job = self.claim_next() or job  # the message is a wake-up for the class: the job next in line
            if isinstance(job, str):
                return job
            self._chain(job)
        finally:
            self._slot.release()
        return "ran"

    def run_queued(self) -> bool:
        """Claim straight from the store and run, for as long as a job is queued for this worker: what a worker
        that starts free does before it takes any message (a message, or a sweeper's pass, is a wait it need not
        pay). True when it ran a job."""
        with self._slot:
            job = self.claim_next()
            if job is None:
                return False
            self._chain(job)
        return True

    def _chain(self, job: ClaimedJob) -> None:
        """Run `job`, then each next job claimed straight from the store, until none is queued for this worker."""
        next_job: ClaimedJob | None = job
        while next_job is not None:
            ended = next_job
            state = self._run(ended)
            next_job = self.claim_next()
            # After the next claim, so a pickup is one query: the ended job, if it went back to the queue, is
            # announced for the other hosts a claim query later (this host may even have taken it again).
            if state is None or state is JobState.QUEUED:
                self.announce_if_requeued(ended.id)

    def _run(self, job: ClaimedJob) -> JobState | None:
        with self._lock:
            self.current = job
        try:
            return self.worker.run_job(job)
        finally:
            with self._lock:
                self.current = None

    def claim_next(self) -> ClaimedJob | None:
        """The next queued job of this worker's classes, claimed straight from the store (module docstring), or
        None when there is none for this host or the worker should take none now."""
        if self.stopping or self.paused:
            return None
        worker = self.worker
        try:
            if worker.deliver_spooled():
                return None  # results wait in the spool: a claim could start a later attempt of their own job
            job = worker.store.claim(
                worker.worker_id, worker.hardware_classes, worker.lease_s, live_within_s=worker.settings.live_within_s
            )
        except StoreError as exc:
            log.warning("task.claim_next_failed", error=str(exc))
            return None
        except Exception:  # the message path and the sweepers carry on; this worker just takes no next job now
            log.exception("task.claim_next_failed")
            return None
        if job is not None:
            log.info("task.claimed_next", job=job.id, attempt=job.attempt)
            # Its message, still in the queue, is withdrawn (at this worker's next sweep): whoever takes it drops it
            # without a claim query.
            self.announcer.withdraw(job.id, job.attempt)
        return job

    def _claim(self, job_id: str) -> ClaimedJob | Outcome:
        """The claimed job, or the outcome of a message that claimed nothing."""
        worker = self.worker
        if job_id in worker.deliver_spooled():
            # This worker's results for the job wait in its spool (the store did not take them yet): a claim would
            # start a later attempt, and that attempt would fence them out. The sweeper announces the job again
            # only if the store refuses them.
            log.info("task.results_spooled", job=job_id)
            self.announcer.forget(job_id)
            return "spooled"
        try:
            job = worker.store.claim_job(
                job_id,
                worker.worker_id,
                worker.hardware_classes,
                worker.lease_s,
                live_within_s=worker.settings.live_within_s,
            )
        except StoreError as exc:
            # The message is spent (acknowledged when the task returns); the sweeper announces the job again
            # once the store answers, so a store outage does not spin messages through the broker.
            log.warning("task.claim_failed", job=job_id, error=str(exc))
            self.announcer.forget(job_id)
            return "store_unavailable"
        if job is None:
            if self.left_to_another(job_id):
                return "skipped"
            log.info("task.duplicate", job=job_id)
            return "duplicate"
        return job

    def left_to_another(self, job_id: str) -> bool:
        """A claim that found the job still queued left it to another host: send its message back, after a
        pause (SKIP_PAUSE_S). True when that was the case."""
        try:
            if not self.worker.store.skipped(job_id, self.worker.worker_id):
                return False
            view = self.worker.store.get_job(job_id)
        except StoreError as exc:
            # Nobody knows whether the job is queued: the message is spent, so its announcement goes, and the
            # next sweep that reaches the store announces the job again if it is.
            log.warning("task.skip_check_failed", job=job_id, error=str(exc))
            self.announcer.forget(job_id)
            return True
        log.info("task.left_to_another_host", job=job_id)
        time.sleep(SKIP_PAUSE_S)
        self.announcer.forget(job_id)
        try:
            self.announcer.announce(view.id, view.hardware_class, view.attempt)
        except BrokerError as exc:
            log.warning("task.reannounce_failed", job=job_id, error=str(exc))  # the sweeper will
        return True

    def check_host(self) -> None:
        """The sweeper's check of this host's quarantine: a quarantined worker stops consuming (and runs its
        self-check when one is due); one back in rotation consumes again."""
        if self.busy:
            return
        quarantined = self.worker.check_quarantine() is not None
        if quarantined and not self.paused:
            log.error("worker.consuming_paused", reason="quarantined")
            self.consumer.pause()
            self.paused = True
        elif not quarantined and self.paused:
            log.info("worker.consuming_resumed")
            self.consumer.resume()
            self.paused = False

    def announce_if_requeued(self, job_id: str) -> None:
        """A job that went back to the queue (a retried failure, a release) is announced again at once."""
        try:
            view = self.worker.store.get_job(job_id)
            if view.state == JobState.QUEUED:
                self.announcer.announce(view.id, view.hardware_class, view.attempt)
        except (StoreError, BrokerError) as exc:
            log.warning("task.reannounce_failed", job=job_id, error=str(exc))  # the sweeper will

    def release_current(self, reason: str) -> str | None:
        """Hand the job in hand back to the queue (SIGTERM with on_sigterm = "release"); returns its id.

        The store's release fences the worker out: its next heartbeat finds the lease gone, which stops the
        sweep and the engine, and its results would be refused. The job is announced again when the task ends.
        """
        with self._lock:
            job = self.current
        if job is None:
            return None
        try:
            self.worker.store.release(job.id, job.attempt, self.worker.worker_id, reason)
        except (LeaseLost, StoreError) as exc:
            log.warning("worker.release_failed", job=job.id, error=str(exc))
            return None
        log.info("worker.released", job=job.id, attempt=job.attempt)
        return job.id

    def idle_heartbeat(self) -> None:
        """Say the worker is alive while it has no job (a busy one is reported by the job's heartbeat)."""
        if not self.busy:
            self.worker.report_alive()


_runtime: FarmRuntime | None = None


def install(runtime: FarmRuntime) -> None:
    """Set the process's runtime (once, before the Celery worker starts consuming)."""
    global _runtime
    _runtime = runtime


def runtime() -> FarmRuntime:
    if _runtime is None:
        raise RuntimeError(
            "farm.run_job needs a runtime: start workers with `farm worker` (farm.worker.celery.install)"
        )
    return _runtime


def run_job(job_id: str) -> str:
    """`farm.run_job`: claim `job_id` and run it; a duplicate does nothing."""
    return runtime().handle(job_id)


def register(app: Celery) -> None:
    """Register the task and the signal handlers that bind each task's log context."""
    app.task(name=RUN_JOB_TASK, ignore_result=True)(run_job)
    signals.task_prerun.connect(_bind_log_context, weak=False)
    signals.task_postrun.connect(_unbind_log_context, weak=False)


def _bind_log_context(task_id: str | None = None, args: Any = None, **_: Any) -> None:
    job_id = args[0] if args else None
    structlog.contextvars.bind_contextvars(task_id=task_id, job=job_id)


def _unbind_log_context(**_: Any) -> None:
    structlog.contextvars.unbind_contextvars("task_id", "job")
