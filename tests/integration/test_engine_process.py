"""Engine process supervision with stand-in executables: failure classes, start-up timeout, a group that ignores
SIGTERM, a crash mid-run, and the GPU-free check after stop."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from farm.domain import FailureClass
from farm.engines.process import group_alive
from farm.engines.vllm.process import VllmEngineProcess
from farm.errors import EngineError
from farm.net import free_port

pytestmark = pytest.mark.slow

FAKES = Path(__file__).resolve().parents[1] / "fixtures" / "fake_engines"


def fake_engine(
    tmp_path: Path, script: str, *args: str, port: int = 1, grace: float = 2.0, **kw: object
) -> VllmEngineProcess:
    """A VllmEngineProcess running one of the stand-in scripts with this interpreter."""
    return VllmEngineProcess(
        (sys.executable, str(FAKES / script), *args),
        env={"PATH": os.environ.get("PATH", "")},
        log_path=tmp_path / "engine.log",
        base_url=f"http://127.0.0.1:{port}",
        served_model="m",
        stop_grace_s=grace,
        **kw,  # type: ignore[arg-type]
    )


def wait_for(path: Path, timeout_s: float = 10.0) -> str:
    """The content of a file another process writes, once it is there."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text()


def test_bad_argument(tmp_path: Path) -> None:
    """An engine that rejects its arguments ends the readiness wait at once, classed bad_argument, log quoted."""
    engine = fake_engine(tmp_path, "bad_argument.py", "--bogus")
    engine.start()
    started = time.monotonic()
    with pytest.raises(EngineError) as caught:
        engine.wait_ready(30)
    assert time.monotonic() - started < 10
    assert caught.value.failure_class == FailureClass.BAD_ARGUMENT
    assert "unrecognized arguments: --bogus" in caught.value.log_tail
    assert engine.stop() == 2


def test_port_in_use(tmp_path: Path) -> None:
    """'Address already in use' in the log is port_in_use."""
    engine = fake_engine(tmp_path, "port_in_use.py")
    engine.start()
    with pytest.raises(EngineError) as caught:
        engine.wait_ready(30)
    assert caught.value.failure_class == FailureClass.PORT_IN_USE
    engine.stop()


def test_startup_timeout(tmp_path: Path) -> None:
    """An engine that never listens is a startup_timeout at the deadline, and stop ends it."""
    engine = fake_engine(tmp_path, "never_ready.py", port=free_port())
    engine.start()
    with pytest.raises(EngineError) as caught:
        engine.wait_ready(1.0)
    assert caught.value.failure_class == FailureClass.STARTUP_TIMEOUT
    assert "loading weights" in caught.value.log_tail
    pgid = engine.pid
    assert pgid is not None
    engine.stop()
    assert not group_alive(pgid)


def test_group_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    """A leader and a child that both ignore SIGTERM are killed after the grace period: no process of the group
    is left (os.killpg(pgid, 0) finds none)."""
    pids_file = tmp_path / "pids"
    engine = fake_engine(tmp_path, "stubborn.py", str(pids_file), grace=0.5)
    engine.start()
    leader, child = (int(p) for p in wait_for(pids_file).split())
    pgid = engine.pid
    assert pgid == leader
    assert os.getpgid(child) == pgid
    started = time.monotonic()
    status = engine.stop()
    assert status == -signal.SIGKILL
    assert time.monotonic() - started >= 0.5
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    assert engine.stop() == status  # a second stop is harmless


def test_crash_mid_run(tmp_path: Path) -> None:
    """An engine that was ready and then died is seen dead and classed engine_crashed."""
    port = free_port()
    engine = fake_engine(tmp_path, "serving.py", "--port", str(port), port=port)
    engine.start()
    engine.wait_ready(30)
    assert engine.version() == "fake-0.0"
    assert engine.alive()
    assert engine.pid is not None
    os.kill(engine.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while engine.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not engine.alive()
    assert engine.classify(started=True) == FailureClass.ENGINE_CRASHED
    assert engine.stop() == -signal.SIGKILL


def test_clean_stop(tmp_path: Path) -> None:
    """An engine that honours SIGTERM stops within the grace period with its own status."""
    port = free_port()
    engine = fake_engine(tmp_path, "serving.py", "--port", str(port), port=port, grace=10)
    engine.start()
    engine.wait_ready(30)
    started = time.monotonic()
    assert engine.stop() == 0
    assert time.monotonic() - started < 5
    assert "shutting down" in engine.log_text()


class GroupProbe:
    """A probe that sees the engine's group on the GPU while any of it lives, or always when `stuck`."""

    def __init__(self, stuck: bool = False) -> None:
        self.pgid: int | None = None
        self.stuck = stuck

    def report(self) -> object:
        raise NotImplementedError

    def compute_processes(self) -> tuple[int, ...]:
        if self.pgid is not None and (self.stuck or group_alive(self.pgid)):
            return (self.pgid,)
        return ()

    def memory_used_mib(self) -> tuple[int, ...]:
        return (90000,) if self.compute_processes() else (300,)


def test_gpus_checked_free_after_stop(tmp_path: Path) -> None:
    """After stop the cards are checked: the group is gone, so they are free and stop returns normally."""
    probe = GroupProbe()
    engine = fake_engine(tmp_path, "never_ready.py", probe=probe, gpu_free_deadline_s=2)
    engine.start()
    probe.pgid = engine.pid
    assert probe.compute_processes() == (engine.pid,)
    assert engine.stop() is not None


def test_gpus_still_busy_after_stop(tmp_path: Path) -> None:
    """A process still on the cards after the deadline is gpu_busy; a second stop only returns the status."""
    probe = GroupProbe(stuck=True)
    engine = fake_engine(tmp_path, "never_ready.py", probe=probe, gpu_free_deadline_s=0.3)
    engine.start()
    probe.pgid = engine.pid
    with pytest.raises(EngineError) as caught:
        engine.stop()
    assert caught.value.failure_class == FailureClass.GPU_BUSY
    assert engine.stop() is not None
