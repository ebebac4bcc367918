"""The demo: submit the demo sweep, run a local worker until that job is done, hand back the job's view."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import farm
from farm.domain import JobView
from farm.errors import FarmError, InputError
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

CHECKOUT = Path(farm.__file__).resolve().parent.parent
DEMO_SPEC = CHECKOUT / "jobs" / "demo.toml"
DEMO_PROFILE = CHECKOUT / "workers" / "demo-sim.toml"
VLLM_DEMO_SPEC = CHECKOUT / "jobs" / "tiny-llama-cpu.toml"
VLLM_DEMO_PROFILE = CHECKOUT / "workers" / "cpu.toml"
LLAMACPP_DEMO_SPEC = CHECKOUT / "jobs" / "smollm2-llamacpp-cpu.toml"
LLAMACPP_DEMO_PROFILE = CHECKOUT / "workers" / "llamacpp-cpu.toml"
STAND_IN_DEMOS = {
    name: (CHECKOUT / "jobs" / f"demo-{name}.toml", CHECKOUT / "workers" / f"demo-{name}.toml")
    for name in ("ollama", "lmstudio", "tabbyapi", "mlx")
}
"""`farm demo --engine E` for the engines no machine here runs: a registry recipe of E through E's adapter, with
the simulator standing in for E (farm.sim.standin); each engine's (sweep spec, worker profile)."""
LLAMACPP_INSTALLER = CHECKOUT / "deploy" / "install-llama-server.sh"
LLAMACPP_INSTALL_TIMEOUT_S = 3600.0
"""About 12 minutes on 2 cores the first time (a C++ build); instant after."""


def ensure_llama_server(installer: Path = LLAMACPP_INSTALLER) -> tuple[Path, Path]:
    """Build llama-server and fetch the SmolLM2 GGUF once per machine; return (binary, model file)."""
    import subprocess

    if not installer.exists():
        raise InputError("the llama-server installer is missing (run from a checkout)", source=installer)
    try:
        done = subprocess.run(
            ["bash", str(installer)], capture_output=True, text=True, timeout=LLAMACPP_INSTALL_TIMEOUT_S, check=True
        )
    except subprocess.CalledProcessError as exc:
        raise FarmError(f"{installer} failed (exit {exc.returncode}): {(exc.stderr or '')[-2000:]}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FarmError(f"{installer} did not finish: {exc}") from exc
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if len(lines) < 2:
        raise FarmError(f"{installer} printed no binary and model paths: {done.stdout[-500:]!r}")
    return Path(lines[-2]), Path(lines[-1])


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
