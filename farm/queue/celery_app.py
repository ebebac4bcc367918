"""Farm mode's Celery app: its settings, and the queue of each hardware class.

The broker only wakes workers up: a message carries one job id, and the worker claims that job through the
store, which is the only truth about it. So every Celery setting below is chosen for jobs of minutes to hours
whose message may arrive twice:

- JSON only, both ways: a message is a job id, and no pickle ever reaches a worker.
- `task_acks_late` with a prefetch of one and one job at a time: a message is acknowledged after its job, so
  a worker that dies mid-job leaves the message in Redis' unacked set instead of losing it; and a busy worker
  holds no second message that an idle one could have taken.
- The visibility timeout is above the longest job (VISIBILITY_TIMEOUT_S), on the producer and the worker
  alike (kombu reads it on each client): below it Redis hands a running job's message to another worker
  (FACTS: a long task was started three times). A redelivery is harmless anyway: the claim of a job that is
  already running or finished returns nothing, and the task logs "duplicate" and returns.
- `worker_cancel_long_running_tasks_on_connection_loss` is False, on purpose: the job's lease lives in the
  database, not in the broker, so a lost Redis connection takes nothing from the running job. Cancelling it
  would throw away up to hours of measurement for a wake-up channel hiccup; the message that Redis restores
  after the loss is a duplicate and does nothing.
- The `threads` pool with one thread: the job runs in the worker's own process (so the Worker object, its
  store and its heartbeat thread are built once, and a SIGKILL of the worker takes its engine down through
  the engine's parent-death signal, exactly as in embedded mode), while Celery's consumer keeps its
  connection, its shutdown handling and its events going on the main thread.
- No result backend: a job's outcome is in the store.
"""

from __future__ import annotations

import re
from typing import Any

from celery import Celery

from farm.settings import Settings

RUN_JOB_TASK = "farm.run_job"
"""The one task of farm mode: `farm.run_job(job_id)`."""

VISIBILITY_TIMEOUT_S = 24 * 3600
"""Redis gives an unacknowledged message to another worker after this long. Above the longest job a farm runs
(a 20-minute model load plus a sweep whose default time budget is one hour), so a running job's message is not
redelivered while it runs; a redelivery past it is still harmless (the claim refuses it). It also bounds how
long the message of a worker killed mid-job stays parked: the reaper and the sweeper (farm.queue.announce)
bring that job back long before."""

BROKER_CONNECTION_MAX_RETRIES = None
"""Retry the broker forever: a worker in the middle of a job must not exit because Redis is away for a while."""

QUEUE_PREFIX = "farm"
"""Every farm queue is named `farm.<hardware id>.x<count>` (`farm.sim.` for simulated hardware)."""

_CLASS = re.compile(r"^(?P<sim>sim:)?(?P<hardware_id>[a-z0-9][a-z0-9-]*) x (?P<count>[1-9][0-9]*)$")


def queue_name(hardware_class: str) -> str:
    """The Celery queue of a hardware class: "rtx-pro-6000-blackwell-96gb x 2" → "farm.rtx-pro-6000-blackwell-96gb.x2",
    "sim:rtx-pro-6000-blackwell-96gb x 2" → "farm.sim.rtx-pro-6000-blackwell-96gb.x2".

    One name per class and one class per name (catalogue ids have no dots), so a message can only reach workers
    that declared the class. ValueError for a string that is not a hardware class.
    """
    match = _CLASS.match(hardware_class)
    if match is None:
        raise ValueError(f"not a hardware class: {hardware_class!r} (expected '<hardware id> x <count>')")
    sim = "sim." if match["sim"] else ""
    return f"{QUEUE_PREFIX}.{sim}{match['hardware_id']}.x{match['count']}"


FarmModeSettings = Settings
"""Farm mode's settings (sweep interval, announce grace and staleness, on_sigterm) live in farm.settings.Settings
with every other default; this name stays for existing imports."""


def celery_config(broker_url: str) -> dict[str, Any]:
    """The Celery settings of farm mode (the module docstring says why each one)."""
    return {
        "broker_url": broker_url,
        "broker_transport_options": {"visibility_timeout": VISIBILITY_TIMEOUT_S},
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": BROKER_CONNECTION_MAX_RETRIES,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "result_backend": None,
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": 1,
        "worker_pool": "threads",
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # Flower shows what the workers do from their events; a few events per job cost nothing.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        # The farm logs JSON lines through structlog to stderr; Celery keeps its own lines there too and must
        # neither take over the root logger nor wrap stdout/stderr (it would re-log every farm line as a warning).
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        "enable_utc": True,
        "timezone": "UTC",
    }


def create_app(broker_url: str) -> Celery:
    """A Celery app for farm mode on `broker_url` (producers and workers use the same one)."""
    app = Celery("farm", set_as_current=False)
    app.conf.update(celery_config(broker_url))
    return app
