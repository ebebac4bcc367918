"""The operators' view: which workers count as live, and which queued classes no live worker takes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from farm.queue.overview import ClassLine, class_lines, worker_lines
from farm.store import WorkerView

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _worker(worker_id: str, classes: tuple[str, ...], age_s: float, job: str | None = None) -> WorkerView:
    return WorkerView(
        worker_id=worker_id,
        host_name=f"host-{worker_id}",
        hardware_classes=classes,
        version="0.1.0",
        started_at=NOW - timedelta(hours=1),
        last_heartbeat=NOW - timedelta(seconds=age_s),
        current_job_id=job,
        phase="measuring" if job else None,
    )


def test_live_workers_first_with_their_heartbeat_age() -> None:
    """A worker silent for longer than the threshold is listed, after the live ones, as not live."""
    lines = worker_lines(
        [_worker("b-silent", ("x 1",), 600), _worker("a-busy", ("x 2",), 3, job="j-1")], NOW, silent_after_s=120
    )
    assert [(w.worker_id, w.live, w.heartbeat_age_s, w.current_job, w.phase) for w in lines] == [
        ("a-busy", True, 3.0, "j-1", "measuring"),
        ("b-silent", False, 600.0, None, None),
    ]


def test_a_queued_class_with_only_silent_workers_is_unserved() -> None:
    """Queue depth per class; a class is unserved when no live worker declares it (silent ones do not count)."""
    workers = worker_lines(
        [
            _worker("rtx", ("sim:rtx x 2", "sim:rtx x 1"), 2),
            _worker("old-h200", ("h200-141gb x 1",), 3600),
        ],
        NOW,
        silent_after_s=120,
    )
    lines = class_lines({"sim:rtx x 1": 2, "h200-141gb x 1": 1, "empty x 1": 0}, workers)
    assert lines == [
        ClassLine("h200-141gb x 1", 1, ()),
        ClassLine("sim:rtx x 1", 2, ("rtx",)),
    ]
    assert [line.unserved for line in lines] == [True, False]


def test_a_quarantined_worker_shows_its_reason_and_serves_no_class() -> None:
    """A quarantined host is listed as such with the reason, and a class only it declares is unserved."""
    broken = WorkerView(
        worker_id="broken",
        host_name="host-broken",
        hardware_classes=("sim:rtx x 2",),
        version="0.1.0",
        started_at=NOW - timedelta(hours=1),
        last_heartbeat=NOW - timedelta(seconds=2),
        start_failures=3,
        quarantined_at=NOW - timedelta(seconds=30),
        quarantine_reason="the engine failed to start 3 times in a row",
    )
    (line,) = worker_lines([broken], NOW, silent_after_s=120)
    assert (line.state, line.quarantine_reason) == ("quarantined", "the engine failed to start 3 times in a row")
    assert class_lines({"sim:rtx x 2": 4}, [line]) == [ClassLine("sim:rtx x 2", 4, ())]


def test_a_worker_whose_broker_does_not_answer_is_shown_apart_and_serves_no_class() -> None:
    """Alive (its heartbeat is fresh) but its broker does not answer: shown as broker-down, not live, and a class
    only it declares is unserved; an embedded worker (no broker: None) and one whose broker answers receive."""
    deaf = replace(_worker("deaf", ("sim:rtx x 2",), 2), broker_ok=False, spool_held=1)
    hearing = replace(_worker("hearing", ("sim:rtx x 1",), 2), broker_ok=True)
    embedded = _worker("embedded", ("sim:rtx x 1",), 2)
    lines = {line.worker_id: line for line in worker_lines([deaf, hearing, embedded], NOW, silent_after_s=120)}
    assert [(w, lines[w].state, lines[w].receives) for w in ("deaf", "embedded", "hearing")] == [
        ("deaf", "broker-down", False),
        ("embedded", "live", True),
        ("hearing", "live", True),
    ]
    assert lines["deaf"].live
    assert lines["deaf"].spool_held == 1
    assert class_lines({"sim:rtx x 2": 3, "sim:rtx x 1": 1}, list(lines.values())) == [
        ClassLine("sim:rtx x 1", 1, ("embedded", "hearing")),
        ClassLine("sim:rtx x 2", 3, ()),
    ]
