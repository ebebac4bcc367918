"""A worker in farm mode (`farm worker` with FARM_BROKER_URL set): a Celery worker on the queues of the
profile's hardware classes.

One job at a time (one thread, prefetch of one), the same Worker and store code as the polling loop, a sweeper
thread (farm.worker.sweeper) beside Celery's consumer. A worker that starts, or finishes a job, claims the next
one straight from the store (farm.worker.celery) and goes back to the broker only when none is queued for it. SIGTERM is
Celery's warm shutdown: the job in hand is finished (and no next one claimed), or handed back to the queue first
when the on_sigterm policy says "release".

Whatever the broker does, the worker is gone within its profile's grace (`[engine] stop_grace_s` and
STOP_MARGIN_S) once the job in hand has ended: a Celery consumer waiting on a broker that accepts connections and
never answers does not see its shutdown flag, so a watchdog started by SIGTERM ends the process itself then
(logged as `worker.forced_exit`), after the sweeper stopped and the spool was written.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery, signals

from farm.logs import get_logger
from farm.provenance import HostInfo
from farm.queue.announce import Announcer
from farm.queue.celery_app import queue_name
from farm.settings import Settings
from farm.store import Store
from farm.worker import celery as tasks
from farm.worker.daemon import Worker
from farm.worker.profile import WorkerProfile, load_profile
from farm.worker.sweeper import Sweeper

log = get_logger(__name__)


class CeleryConsumerSwitch(tasks.ConsumerSwitch):
    """Pauses and resumes this worker's queues through Celery's remote control (a broadcast that the worker's
    own consumer thread carries out: kombu's channels are not to be touched from another thread)."""

    def __init__(self, app: Celery, hostname: str, queues: list[str]) -> None:
        self.app = app
        self.hostname = hostname
        self.queues = queues

    def pause(self) -> None:
        for queue in self.queues:
            self.app.control.cancel_consumer(queue, destination=[self.hostname], reply=False)

    def resume(self) -> None:
        for queue in self.queues:
            self.app.control.add_consumer(queue, destination=[self.hostname], reply=False)


STOP_MARGIN_S = 5.0
"""Beyond the profile's engine stop grace, what a stopping worker is given to finish Celery's shutdown."""


def stop_grace_s(profile: WorkerProfile) -> float:
    """How long after its job ended a stopping worker may take to exit (module docstring)."""
    return profile.engine.stop_grace_s + STOP_MARGIN_S


def exit_watchdog(
    runtime: tasks.FarmRuntime,
    grace_s: float,
    exited: threading.Event,
    last_words: Callable[[], None],
    *,
    force_exit: Callable[[int], None] = os._exit,
) -> None:
    """Wait for the job in hand to end, then `grace_s` for the worker to exit by itself (`exited`); if it has
    not, say why, run `last_words` and end the process."""
    while runtime.busy and not exited.is_set():
        time.sleep(0.2)
    if exited.wait(grace_s):
        return
    log.error(
        "worker.forced_exit",
        grace_s=grace_s,
        reason="Celery's shutdown did not end within the grace (a broker that does not answer?)",
    )
    try:
        last_words()
    except Exception:  # exiting anyway: what could not be done is logged
        log.exception("worker.last_words_failed")
    sys.stderr.flush()
    force_exit(0)


def on_sigterm_policy(profile: WorkerProfile, settings: Settings) -> tasks.OnSigterm:
    """FARM_ON_SIGTERM when set (both are validated Literals), else the profile's `[worker] on_sigterm`."""
    return settings.on_sigterm or profile.worker.on_sigterm


def run_farm_worker(settings: Settings, profile_path: Path, *, worker_id: str | None = None) -> int:
    """Run a farm-mode worker until it is stopped; returns Celery's exit code."""
    assert settings.broker_url, "farm mode needs FARM_BROKER_URL"
    profile = load_profile(profile_path)
    # The embedded default is created and migrated on first use; a farm's database is migrated by `farm db upgrade`.
    store = Store.open(settings.resolved_database_url, auto_upgrade=settings.database_url is None)
    worker = Worker(store, profile, data_dir=settings.data_dir, worker_id=worker_id, settings=settings)
    announcer = Announcer.from_url(settings.broker_url, settings)
    app = announcer.app
    queues = [queue_name(c) for c in worker.hardware_classes]
    hostname = f"farm@{worker.worker_id}"
    runtime = tasks.FarmRuntime(
        worker,
        announcer,
        on_sigterm=on_sigterm_policy(profile, settings),
        consumer=CeleryConsumerSwitch(app, hostname, queues),
    )
    tasks.install(runtime)
    tasks.register(app)
    exited = threading.Event()
    watchdog: list[threading.Thread] = []

    def last_words() -> None:
        sweeper.stop(timeout_s=2.0)
        worker.spool.retry_held()
        if worker.spool.held:
            log.error("spool.lost_on_exit", held=worker.spool.held, note="the disk refused them to the end")

    def on_shutting_down(sig: str | None = None, how: str | None = None, **_: Any) -> None:
        log.info("worker.shutting_down", signal=sig, how=how, on_sigterm=runtime.on_sigterm)
        runtime.stopping = True  # the job in hand ends (or is released); no next one is claimed
        if sig == "SIGTERM" and runtime.on_sigterm == "release":
            # Off the signal handler: the release is a database write.
            threading.Thread(target=runtime.release_current, args=("the worker was stopped (SIGTERM)",)).start()
        if not watchdog:
            thread = threading.Thread(
                target=exit_watchdog,
                args=(runtime, stop_grace_s(profile), exited, last_words),
                name="exit-watchdog",
                daemon=True,
            )
            watchdog.append(thread)
            thread.start()

    signals.worker_shutting_down.connect(on_shutting_down, weak=False)

    def start_claims() -> None:
        try:
            ran = runtime.run_queued()
        except Exception:  # the message path and the sweepers carry on
            log.exception("worker.start_claims_failed")
            return
        log.info("worker.start_claims_done", ran=ran)

    def on_ready(**_: Any) -> None:
        # A worker that starts free claims straight from the store (beside Celery's consumer: a task that comes
        # meanwhile waits for the job slot), instead of waiting for a message or a sweeper's announcement.
        threading.Thread(target=start_claims, name="start-claims", daemon=True).start()

    signals.worker_ready.connect(on_ready, weak=False)

    store.register_worker(worker.worker_id, host=HostInfo.read().name, hardware_classes=list(worker.hardware_classes))
    log.info("worker.start", mode="farm", queues=queues, worker=worker.worker_id, on_sigterm=runtime.on_sigterm)
    sweeper = Sweeper(
        store,
        announcer,
        worker.hardware_classes,
        settings,
        deliver_spooled=worker.deliver_spooled,
        idle_heartbeat=runtime.idle_heartbeat,
        check_host=runtime.check_host,
        on_broker=worker.broker_answered,
        watch=worker.store_watch,
        worker_id=worker.worker_id,
    )
    sweeper.start()
    try:
        celery_worker = app.Worker(
            hostname=hostname,
            queues=queues,
            pool_cls="threads",
            concurrency=1,
            prefetch_multiplier=1,
            without_gossip=True,  # nothing in the farm reads gossip; the store knows the workers
            without_mingle=True,  # and nothing to synchronise at start-up: revoked ids are unused
            loglevel=settings.log_level.upper(),
            quiet=True,
        )
        celery_worker.start()
        code: int = celery_worker.exitcode or 0
    finally:
        exited.set()
        sweeper.stop()
        worker.deliver_spooled()
        announcer.close()
        store.close()
    log.info("worker.stop", mode="farm", exit_code=code)
    return code
