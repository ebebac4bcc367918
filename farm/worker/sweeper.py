"""The sweeper: the periodic pass of a farm worker (a thread beside Celery's consumer).

Each pass delivers the worker's spooled results (before the reap: results of an attempt that no other attempt
followed are still taken), reaps expired leases (announcing each reaped job at once) unless a database outage
ended less than FARM_REAP_GRACE_S ago (farm.worker.outage: the owners deliver first), checks the host's
quarantine (a quarantined worker stops consuming and runs its self-check), checks that the broker answers (one
bounded ping; the answer goes into the worker's heartbeat, and a broker that does not answer is not asked to
announce anything in this pass), announces what its hardware classes need (farm.queue.announce says when a job
needs it; the sweeper lists only the queued jobs of its classes, and after one broker failure it stops trying
for the rest of the pass), and says the worker is alive when it is idle.

While results wait in the spool, the next pass comes after SPOOL_RETRY_S rather than a whole sweep interval: the
owner delivers as soon as the database answers again.

The first pass comes a random part of a sweep interval after the sweeper starts (the spool is offered at once).
The broker ping of each pass carries the withdrawals of announcements whose jobs the worker claimed straight
from the store (farm.queue.announce).
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from farm.domain import JobState, JobView
from farm.errors import BrokerError, FarmError, StoreError
from farm.logs import get_logger
from farm.queue.announce import Announcer
from farm.settings import Settings
from farm.store import Store
from farm.worker.outage import StoreWatch

log = get_logger(__name__)

SWEEP_LIMIT = 100
"""Queued jobs of its classes a sweep looks at, oldest first: the ones next in line, which the hosts claim next
(a free worker claims the next in line, and messages are sent oldest first). A lost wake-up deeper in a backlog
is found when the job rises this far. Each one looked at is a Lua call on Redis: looking at every queued job, a
backlog of 10,000 (bench/fleet.py) would make 10,000 calls per sweep interval and class."""

SPOOL_RETRY_S = 0.5
"""The pause between passes while spooled results wait for the database (instead of the sweep interval)."""


@dataclass
class SweepReport:
    """What one sweep did (for logs and tests)."""

    delivered: bool = True
    reaped: list[str] = field(default_factory=list)
    announced: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    broker_down: bool = False
    """The broker failed in this pass, so the pass stopped announcing."""
    reap_held: bool = False
    """The reap was held back: the database was away, or answers again since less than the reap grace."""
    waiting: frozenset[str] = frozenset()
    """Jobs whose results still wait in this worker's spool after the pass."""


class Sweeper:
    """The periodic pass of a farm worker (module docstring); `start()` runs it on a daemon thread."""

    def __init__(
        self,
        store: Store,
        announcer: Announcer,
        hardware_classes: Sequence[str],
        settings: Settings,
        *,
        deliver_spooled: Callable[[], Collection[str]] = frozenset,
        idle_heartbeat: Callable[[], None] = lambda: None,
        check_host: Callable[[], None] = lambda: None,
        on_broker: Callable[[str | None], None] = lambda _error: None,
        watch: StoreWatch | None = None,
        worker_id: str = "",
    ) -> None:
        self.store = store
        self.worker_id = worker_id or f"sweeper-{id(self):x}"
        """Who holds a class's announcing turn (Announcer.take_turn)."""
        self.announcer = announcer
        self.hardware_classes = tuple(hardware_classes)
        self.settings = settings
        self.deliver_spooled = deliver_spooled
        self.idle_heartbeat = idle_heartbeat
        self.check_host = check_host
        self.on_broker = on_broker
        self.watch = watch or StoreWatch(settings.reap_grace_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._random = random.Random()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        # The first pass comes a random part of an interval after the start, so that a fleet started at once does
        # not sweep in step (100 workers' first passes in one instant were the start's largest burst of queries);
        # results waiting in the spool are offered at once. Nothing else is lost by the wait: the reap is held
        # for FARM_REAP_GRACE_S after a start anyway, and a worker that starts free claims straight from the store.
        first_s = self._random.uniform(0.0, self.settings.sweep_interval_s)
        if self._deliver(SweepReport()):
            first_s = min(first_s, SPOOL_RETRY_S)
        self._stop.wait(first_s)
        while not self._stop.is_set():
            interval = self.settings.sweep_interval_s
            try:
                if self.sweep().waiting:
                    interval = min(interval, SPOOL_RETRY_S)
            except Exception:  # the sweeper must outlive any one bad pass; the next one tries again
                log.exception("sweep.unexpected_error")
            self._stop.wait(interval)

    def sweep(self, *, now: float | None = None) -> SweepReport:
        """One pass: deliver spooled results, reap, announce what is due, heartbeat when idle."""
        report = SweepReport()
        interval_s = self.settings.sweep_interval_s
        waiting = self._deliver(report)
        report.waiting = frozenset(waiting)
        try:
            held_for = self.watch.reap_held_for_s()
            if held_for == 0.0:
                report.reaped = self.store.reap()
            else:
                report.reap_held = True
                self.store.ping()  # does the database answer again? (the reap grace starts from that answer)
            self.watch.answered()
            if held_for != 0.0:
                log.info("sweep.reap_held", for_s=round(self.watch.reap_held_for_s(), 1))
            if waiting:
                # The store answers again though the delivery failed (a first call after an outage can fail on a
                # stale connection): the spooled results go in before anything is announced. An announcement of
                # their own job would start a later attempt here, and that attempt would fence them out.
                waiting = self._deliver(report)
                report.waiting = frozenset(waiting)
            # Reaped jobs of any class are announced here (this sweeper took them back); queued ones only of the
            # classes this worker serves, through the claim index (state, hardware_class).
            reaped_jobs = [self.store.get_job(job_id) for job_id in report.reaped]
            turns = [c for c in self.hardware_classes if self.announcer.take_turn(c, self.worker_id, interval_s)]
            queued = self.store.queued_jobs(turns, limit=SWEEP_LIMIT) if turns else []
        except StoreError as exc:
            self.watch.failed()
            log.warning("sweep.store_unavailable", error=str(exc))
            report.errors.append(str(exc))
            return report
        try:
            self.check_host()
        except FarmError as exc:
            report.errors.append(str(exc))
        broker_error = self.announcer.ping()
        self.on_broker(broker_error)
        if broker_error is not None:
            log.warning("sweep.broker_unreachable", error=broker_error, note="nothing announced this pass")
            report.errors.append(broker_error)
            report.broker_down = True
        for reaped_job in reaped_jobs:
            if reaped_job.id in waiting:
                continue  # its results wait in this worker's spool: announced once they are in, or refused
            if reaped_job.state == JobState.QUEUED:  # else reaped for good (its budget was spent): nothing to announce
                self._try(report, reaped_job.id, functools.partial(self._announce_reaped, reaped_job))
        when = time.time() if now is None else now
        empty: dict[str, bool] = {}
        for job in queued:
            if job.hardware_class not in turns or job.id in report.reaped or job.id in waiting:
                continue

            def due(job: JobView = job) -> bool:
                if job.hardware_class not in empty:
                    empty[job.hardware_class] = self.announcer.queue_length(job.hardware_class) == 0
                return self.announcer.announce_if_due(
                    job,
                    now=when,
                    grace_s=self.settings.announce_grace_s,
                    stale_s=self.settings.announce_stale_s,
                    queue_empty=empty[job.hardware_class],
                )

            self._try(report, job.id, due)
        try:
            self.idle_heartbeat()
        except StoreError as exc:
            self.watch.failed()
            report.errors.append(str(exc))
        if report.reaped or report.announced:
            log.info("sweep.done", reaped=report.reaped, announced=report.announced)
        return report

    def _deliver(self, report: SweepReport) -> Collection[str]:
        """Deliver the spooled results; the ids of the jobs whose results still wait in the spool."""
        try:
            return self.deliver_spooled()
        except FarmError as exc:
            report.delivered = False
            report.errors.append(str(exc))
            return frozenset()

    def _announce_reaped(self, job: JobView) -> bool:
        return self.announcer.announce(job.id, job.hardware_class, job.attempt)

    @staticmethod
    def _try(report: SweepReport, job_id: str, action: Callable[[], bool]) -> None:
        """Announce one job unless the broker already failed in this pass (the next pass tries again: a dead
        broker costs one timeout per pass, not one per queued job)."""
        if report.broker_down:
            return
        try:
            if action():
                report.announced.append(job_id)
        except BrokerError as exc:
            log.warning("sweep.announce_failed", job=job_id, error=str(exc), note="no more tries this pass")
            report.errors.append(str(exc))
            report.broker_down = True
