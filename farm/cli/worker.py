"""`farm worker`: run a worker daemon on this host (embedded mode: it polls the store)."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

import typer

from farm.cli.common import farm_errors, open_store, settings
from farm.logs import get_logger
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

log = get_logger(__name__)


def worker(
    profile: Path = typer.Option(..., "--profile", "-p", help="a worker host profile, e.g. workers/demo-sim.toml"),
    max_jobs: int | None = typer.Option(None, help="exit after this many jobs"),
    idle_exit: float | None = typer.Option(None, help="exit after this many seconds without a job"),
    worker_id: str | None = typer.Option(
        None, help="override the worker id (default: <hostname>-<profile name>, stable across restarts)"
    ),
) -> None:
    """Claim jobs that match this host's hardware and run them, one at a time, until stopped."""
    s = settings()
    if s.broker_url:  # farm mode: a Celery worker on this host's hardware-class queues
        from farm.worker.farm_mode import run_farm_worker

        with farm_errors():
            raise typer.Exit(run_farm_worker(s, profile, worker_id=worker_id))
    with farm_errors():
        prof = load_profile(profile)
        store = open_store(s)
        daemon = Worker(store, prof, data_dir=s.data_dir, worker_id=worker_id, settings=s)

        def _graceful(signum: int, _frame: FrameType | None) -> None:
            log.info("worker.signal", signal=signal.Signals(signum).name)
            daemon.shutdown()

        signal.signal(signal.SIGTERM, _graceful)
        signal.signal(signal.SIGINT, _graceful)
        daemon.run(max_jobs=max_jobs, idle_exit_s=idle_exit)
