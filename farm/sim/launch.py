"""The one way to start the simulator as its own process and wait until it serves.

`sim_serve_argv` is the command line (`python -m farm sim serve ...`); `launch_sim` starts it as an
`EngineProcess` (its own process group, a log file, readiness by /health and a tiny completion, stop by
TERM then KILL), optionally pinned to a set of CPUs; `running_sim` does both as a context manager. The
worker's simulator engine (`farm.engines.sim.adapter`) and bench/ and the tests all start it through here.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from farm.engines.process import EngineProcess
from farm.net import free_port

SIM_ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
"""The simulator needs no secrets; it gets only what Python needs to start."""

READY_TIMEOUT_S = 60.0
"""Start-up of the simulator: a fraction of a second when idle, several seconds on a loaded 2-core machine."""


def sim_serve_argv(
    *,
    profile: str = "test",
    host: str = "127.0.0.1",
    port: int,
    model: str | None = None,
    overrides: Mapping[str, str] | Sequence[str] = (),
    faults: Sequence[str] = (),
    max_model_len: int | None = None,
) -> tuple[str, ...]:
    """The simulator's command line (through the farm's CLI, as the worker has always recorded it).

    `overrides` are profile fields (`key=value` strings or a mapping); `max_model_len` is the recipe's, which the
    simulator checks at start against its model's limit, as vLLM does."""
    argv = [sys.executable, "-m", "farm", "sim", "serve", "--profile", profile, "--host", host, "--port", str(port)]
    if model is not None:
        argv += ["--model", model]
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    items = (
        [f"{key}={value}" for key, value in sorted(overrides.items())] if isinstance(overrides, Mapping) else overrides
    )
    for item in items:
        argv += ["--set", item]
    argv += list(faults)
    return tuple(argv)


def sim_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key in SIM_ENV_ALLOWLIST}


def sim_process(
    argv: Sequence[str], *, host: str, port: int, model: str, log_path: Path, stop_grace_s: float = 5.0
) -> EngineProcess:
    """An (unstarted) simulator process for `argv`, serving `model` at http://host:port."""
    return EngineProcess(
        argv,
        env=sim_environment(),
        log_path=log_path,
        base_url=f"http://{host}:{port}",
        served_model=model,
        simulated=True,
        stop_grace_s=stop_grace_s,
    )


def launch_sim(
    *,
    profile: str = "test",
    model: str = "sim-test",
    overrides: Mapping[str, str] | Sequence[str] = (),
    faults: Sequence[str] = (),
    cpus: set[int] | None = None,
    log_path: Path | None = None,
    host: str = "127.0.0.1",
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> EngineProcess:
    """Start a simulator on a free port (pinned to `cpus` when given) and return it once it serves."""
    port = free_port(host)
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="farm-sim-")) / "sim.log"
    argv = sim_serve_argv(profile=profile, host=host, port=port, model=model, overrides=overrides, faults=faults)
    process = sim_process(argv, host=host, port=port, model=model, log_path=log_path)
    process.start()
    try:
        if cpus and process.pid is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(process.pid, cpus)
        process.wait_ready(ready_timeout_s)
    except BaseException:
        process.stop()
        raise
    return process


@contextmanager
def running_sim(
    *,
    profile: str = "test",
    model: str = "sim-test",
    overrides: Mapping[str, str] | Sequence[str] = (),
    faults: Sequence[str] = (),
    cpus: set[int] | None = None,
    log_path: Path | None = None,
) -> Iterator[EngineProcess]:
    """A started simulator for the `with` block, stopped (its whole process group) afterwards; its log is kept
    at `log_path`, or in a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="farm-sim-") as scratch:
        process = launch_sim(
            profile=profile,
            model=model,
            overrides=overrides,
            faults=faults,
            cpus=cpus,
            log_path=log_path or Path(scratch) / "sim.log",
        )
        try:
            yield process
        finally:
            process.stop()
