"""The demo: submit the demo sweep, run a local worker until that job is done, hand back the job's view."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import farm
from farm.domain import JobView
from farm.engines.base import EngineDemo
from farm.engines.registry import ENGINES
from farm.errors import FarmError, InputError
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

CHECKOUT = Path(farm.__file__).resolve().parent.parent
DEMO_SPEC = CHECKOUT / "jobs" / "demo.toml"
DEMO_PROFILE = CHECKOUT / "workers" / "demo-sim.toml"


def engine_demos() -> dict[str, tuple[Path, Path, EngineDemo]]:
    """`farm demo --engine E` for every engine whose table line has a demo: its (sweep spec, worker profile,
    demo) in the checkout. A stand-in demo runs a registry recipe of E through E's adapter with the simulator
    standing in for E (farm.sim.standin); the others run E itself on the CPU, prepared first."""
    return {
        name: (CHECKOUT / "jobs" / kind.demo.spec, CHECKOUT / "workers" / kind.demo.profile, kind.demo)
        for name, kind in ENGINES.items()
        if kind.demo is not None
    }


DEMO_DEADLINE_S = 600.0
"""Far above the demo's minute or two on a 2-core machine; a demo that hangs must still end."""


def run_demo(
    store: Store,
    data_dir: Path,
    *,
    spec: Path = DEMO_SPEC,
    profile: Path = DEMO_PROFILE,
    on_update: Callable[[JobView], None] = lambda _job: None,
    deadline_s: float = DEMO_DEADLINE_S,
    simulate: bool = True,
) -> JobView:
    """Submit the demo sweep (on simulated hardware unless `simulate` is off) and run a worker in this process
    until the job ends."""
    for path, what in ((spec, "sweep spec"), (profile, "worker profile")):
        if not path.exists():
            raise InputError(f"the demo's {what} is missing (run from a checkout, or pass it)", source=path)
    sweep = load_sweep(spec)
    worker_profile = load_profile(profile)
    (job_id,) = submit_sweep(store, sweep, simulate=simulate)
    worker = Worker(store, worker_profile, data_dir=data_dir)
    errors: list[BaseException] = []

    def _work() -> None:
        try:
            worker.run(only_jobs=[job_id])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=_work, name="demo-worker", daemon=True)
    thread.start()
    deadline = time.monotonic() + deadline_s
    try:
        while True:
            job = store.get_job(job_id)
            on_update(job)
            if job.state.finished:
                return job
            if errors:
                raise FarmError(f"the demo's worker stopped: {errors[0]}") from errors[0]
            if time.monotonic() > deadline:
                store.cancel(job_id)
                raise FarmError(f"the demo did not finish within {deadline_s:.0f} s; job {job_id} cancelled")
            time.sleep(0.25)
    finally:
        worker.shutdown()
        thread.join(timeout=30)
