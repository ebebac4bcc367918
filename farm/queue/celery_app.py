"""Farm mode's Celery app: its settings, and the queue of each hardware class.

The broker only wakes workers up: a message carries one job id, and the worker claims that job through the
store, which is the only truth about it. So every Celery setting below is chosen for jobs of minutes to hours
whose message may arrive twice:

- JSON only, both ways: a message is a job id, and no pickle ever reaches a worker.
- `task_acks_late` with a prefetch of one and one job at a time: a message is acknowledged after its job, so
  a worker that dies mid-job leaves the message in Redis' unacked set instead of losing it; and a busy worker
  holds no second message that an idle one could have taken.
- The visibility timeout is FARM_VISIBILITY_TIMEOUT_S, on the producer and the worker alike (kombu reads it on
  each client), and every worker checks for messages past it every RESTORE_CHECKS_PER_TIMEOUT-th of it (at most
  every 10 s), so the message a dead worker held goes back to its queue within the timeout and a few seconds,
  not kombu's default of ten checks later. A running job longer than the timeout has its message handed to
  another worker too (FACTS: a long task was started three times): harmless here, the claim of a job that is
  already running or finished returns nothing, and the task logs "duplicate" and returns.
- Every broker call is bounded by FARM_BROKER_TIMEOUT_S (connect and socket timeouts, and a health check of
  the consumer's connection), so a broker that accepts connections and never answers costs a timeout and a
  reconnect, never a hang; publishing is one attempt (`send_task(retry=False)` in farm.queue.announce): the
  sweepers announce again what a failed send left out.
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


RESTORE_CHECKS_PER_TIMEOUT = 4
"""How many times per visibility timeout each worker looks for messages that have passed it (at most every
MAX_RESTORE_INTERVAL_S): one ZRANGE on Redis per worker each time."""

MAX_RESTORE_INTERVAL_S = 10.0

HEALTH_CHECK_INTERVAL_S = 10
"""kombu pings a connection idle this long before using it, and drops a BRPOP whose reply is this long overdue
(a half-open connection: the broker went silent without closing it), instead of its default 25 s."""


def transport_options(settings: Settings) -> dict[str, Any]:
    """kombu's Redis transport options of farm mode (the module docstring says why)."""
    timeout = settings.broker_timeout_s
    visibility = settings.visibility_timeout_s
    return {
        "visibility_timeout": visibility,
        "unacked_restore_interval": max(1.0, min(MAX_RESTORE_INTERVAL_S, visibility / RESTORE_CHECKS_PER_TIMEOUT)),
        "unacked_restore_throttle": 1,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
    }


def celery_config(broker_url: str, settings: Settings | None = None) -> dict[str, Any]:
    """The Celery settings of farm mode (the module docstring says why each one); `settings` default to the
    process's (FARM_*)."""
    settings = settings or Settings()
    return {
        "broker_url": broker_url,
        "broker_transport_options": transport_options(settings),
        "broker_connection_timeout": settings.broker_timeout_s,
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


def create_app(broker_url: str, settings: Settings | None = None) -> Celery:
    """A Celery app for farm mode on `broker_url` (producers and workers use the same one)."""
    app = Celery("farm", set_as_current=False)
    app.conf.update(celery_config(broker_url, settings))
    return app
