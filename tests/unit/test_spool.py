"""The spool never drops a result: held in memory when the disk refuses it, written again at every pass, counted,
and no temporary file left behind (a full disk leaves a 0-byte one)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from farm.domain import Artifact, RunResult
from farm.worker.spool import Spool

RESULT = RunResult(
    figures=(),
    samples={},
    provenance={"worker_id": "w1"},
    artifacts=(Artifact("engine.log", "ok\n"),),
    total_requests=3,
)


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fsync fails as a full disk does (after the temporary file was created and written to)."""

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)  # the spool calls os.fsync


def test_a_result_the_disk_refuses_is_held_in_memory_and_no_temporary_file_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC: put returns None, the result is held (counted) and offered for delivery, its temp file is gone."""
    spool = Spool(tmp_path / "spool")
    _disk_full(monkeypatch)
    assert spool.put("j-1", 1, "w1", RESULT) is None
    assert spool.held == 1
    assert list((tmp_path / "spool").iterdir()) == []  # neither the .tmp nor a .json
    (pending,) = spool.pending()
    assert (pending.job_id, pending.attempt, pending.path, pending.result) == ("j-1", 1, None, RESULT)
    assert spool.held == 1  # still refused at that pass


def test_a_held_result_is_written_once_the_disk_takes_it_and_delivered_from_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next pass writes it (it leaves memory); a delivery then removes the file."""
    spool = Spool(tmp_path / "spool")
    with monkeypatch.context() as patched:
        _disk_full(patched)
        spool.put("j-1", 1, "w1", RESULT)
    (pending,) = spool.pending()
    assert spool.held == 0
    assert pending.path == tmp_path / "spool" / "j-1.1.json"
    assert pending.result == RESULT
    spool.remove(pending)
    assert spool.pending() == []


def test_a_held_result_delivered_from_memory_is_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delivered while the disk still refuses it: removing it clears it from memory."""
    spool = Spool(tmp_path / "spool")
    _disk_full(monkeypatch)
    spool.put("j-1", 1, "w1", RESULT)
    (pending,) = spool.pending()
    spool.remove(pending)
    assert (spool.held, spool.pending()) == (0, [])


def test_a_refused_result_set_aside_while_the_disk_refuses_it_stays_held_but_not_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set aside (the store refused it) while the disk is full: kept in memory as set aside, counted, not offered
    for delivery again."""
    spool = Spool(tmp_path / "spool")
    _disk_full(monkeypatch)
    spool.put("j-1", 1, "w1", RESULT)
    (pending,) = spool.pending()
    assert spool.set_aside(pending) is None
    assert (spool.held, spool.pending()) == (1, [])


def test_temporary_files_of_a_crashed_write_are_removed_when_the_spool_opens(tmp_path: Path) -> None:
    """A .tmp file is a write that never reached its rename: garbage, removed; results are kept."""
    directory = tmp_path / "spool"
    Spool(directory).put("j-1", 1, "w1", RESULT)
    (directory / "j-2.1.tmp").write_bytes(b"")
    (directory / "refused").mkdir()
    (directory / "refused" / "j-3.1.tmp").write_bytes(b'{"job_id": "j-3", "att')
    spool = Spool(directory)
    assert sorted(p.name for p in directory.rglob("*") if p.is_file()) == ["j-1.1.json"]
    assert [item.job_id for item in spool.pending()] == ["j-1"]
