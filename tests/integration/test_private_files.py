"""Files that can hold what an engine printed before the scrubber saw it are the worker's own: an engine log
(written by the real engine process, the simulator here, and by the recording fake through the worker) and a
spooled result are 0600 in a 0700 directory, an older, looser file too once it is opened again."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import pytest

from farm.domain import Artifact, RunResult
from farm.engines.process import EngineProcess
from farm.private_files import open_private
from farm.worker.spool import Spool


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.timeout(30)
def test_an_engine_log_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The engine's own output goes to a 0600 file in a 0700 directory, whatever the umask; a log left 0644 by an
    older worker is tightened when the next engine appends to it."""
    log = tmp_path / "runs" / "j-1" / "engine.log"
    argv = (sys.executable, "-c", "print('HF_TOKEN=hf_abcdefghijklmnop from the engine')")
    engine = EngineProcess(
        argv, env={}, log_path=log, base_url="http://127.0.0.1:1", served_model="m", simulated=True, stop_grace_s=1
    )
    engine.start()
    try:
        deadline = time.monotonic() + 20
        while "from the engine" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        engine.stop()
    assert "hf_abcdefghijklmnop" in log.read_text()  # the raw log on the worker's disk ...
    assert _mode(log) == 0o600  # ... which only the worker's user reads
    assert _mode(log.parent) == 0o700
    log.chmod(0o644)
    with open_private(log) as handle:
        handle.write(b"more\n")
    assert _mode(log) == 0o600


def test_a_spooled_result_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The spool holds results (artifacts, provenance) until the store takes them: 0600 too."""
    result = RunResult(figures=(), samples={}, artifacts=(Artifact("engine.log", "x"),), provenance={})
    path = Spool(tmp_path / "spool").put("j-1", 1, "w", result)
    assert _mode(path) == 0o600
