"""The simulator's process: wait out the start-up delay, listen, arm the faults, serve until told to stop.

The parts: `farm.sim.engine` (the engine's state and slots), `farm.sim.routes` (the HTTP endpoints),
`farm.sim.faults` (what goes wrong, and when), `farm.sim.scheduler` (every stream's chunks on time),
`farm.sim.http` (the HTTP/1.1 server). `serve` runs them in this event loop; `run_server` blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable
from time import perf_counter_ns

from farm.logs import get_logger
from farm.sim.faults import FaultPlan, arm_faults
from farm.sim.http import new_event_loop
from farm.sim.profile import SimProfile
from farm.sim.routes import build_app
from farm.sim.scheduler import DEFAULT_SPIN_US

__all__ = ["build_app", "run_server", "serve"]

GC_THRESHOLDS = (50_000, 50, 100)
"""Young collections every 50k allocations instead of 700: the per-chunk work allocates little that lives."""

log = get_logger("farm.sim")


async def serve(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    spin_us: int = DEFAULT_SPIN_US,
    stop: asyncio.Event | None = None,
    exit_process_on_crash: bool = True,
    clock: Callable[[], int] = perf_counter_ns,
) -> None:
    """Wait out the start-up delay, listen, arm the faults, serve until `stop` is set (or SIGTERM/SIGINT)."""
    faults = faults or FaultPlan()
    delay = profile.startup_s if faults.startup_delay_s is None else faults.startup_delay_s
    log.info("starting", profile=profile.name, model=profile.served_model_name, startup_delay_s=delay)
    app = build_app(profile, faults, spin_us=spin_us, clock=clock)
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(app.protocol_factory(), host, port, backlog=1024, reuse_address=True)
    app.start()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread there are no signal handlers: the caller stops us through `stop`.
        with contextlib.suppress(RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    arm_faults(app.state, exit_process=exit_process_on_crash)
    bound = server.sockets[0].getsockname() if server.sockets else (host, port)
    # The simulator is a clock: a garbage-collection pause would be lateness that no real engine shows. What
    # exists at start-up is frozen out of collection, and young collections run far less often.
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    log.info("listening", host=host, port=int(bound[1]), url=f"http://{bound[0]}:{bound[1]}")
    try:
        await stop.wait()
    finally:
        server.close()
        await app.stop()
        await server.wait_closed()


def run_server(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    spin_us: int = DEFAULT_SPIN_US,
) -> None:
    """Run the simulator in this process until SIGTERM or SIGINT (blocking), arrivals stamped at poll time."""
    loop, clock = new_event_loop()
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(serve(profile, faults, host=host, port=port, spin_us=spin_us, clock=clock))
