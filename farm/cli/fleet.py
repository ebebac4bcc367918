"""`farm workers`: the workers seen, their heartbeat and their job; and the queued jobs nobody can run.

`print_queue_overview` is also what `farm status` prints below its jobs.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import typer

from farm.cli.common import farm_errors, get_console, open_store, print_json, settings
from farm.errors import FarmError
from farm.queue.overview import SILENT_AFTER_S, ClassLine, WorkerLine, class_lines, worker_lines
from farm.store import Store


def workers(
    silent_after: float = typer.Option(SILENT_AFTER_S, help="seconds without a heartbeat before a worker is not live"),
    as_json: bool = typer.Option(False, "--json"),
    release: str | None = typer.Option(
        None, "--release", metavar="HOST", help="return a quarantined worker (its id or its host name) to rotation"
    ),
) -> None:
    """Workers seen (id, host, hardware classes, last heartbeat, state (live, broker-down, silent, quarantined)
    and its reason, current job and phase, results held in memory) and unserved queues; `--release HOST`
    returns a quarantined host to rotation."""
    s = settings()
    with farm_errors():
        store = open_store(s)
        if release is not None:
            released = store.release_host(release)
            if not released:
                raise FarmError(f"no quarantined worker with id or host name {release!r} (see `farm workers`)")
            get_console().print(f"released: {', '.join(released)}", markup=False, highlight=False)
            return
        lines, classes = read_overview(store, silent_after)
    if as_json:
        print_json(overview_json(lines, classes))
        return
    from rich.table import Table

    table = Table(title="workers")
    for column in ("worker", "host", "hardware classes", "heartbeat", "state", "job", "phase", "reason", "held"):
        table.add_column(column)
    for line in lines:
        table.add_row(
            line.worker_id,
            line.host,
            ", ".join(line.hardware_classes),
            f"{line.heartbeat_age_s:.0f} s ago",
            line.state,
            line.current_job or "",
            line.phase or "",
            line.quarantine_reason or ("its broker does not answer: it receives no jobs" if not line.receives else ""),
            str(line.spool_held) if line.spool_held else "",
        )
    get_console().print(table)
    print_class_lines(classes)


def read_overview(store: Store, silent_after_s: float = SILENT_AFTER_S) -> tuple[list[WorkerLine], list[ClassLine]]:
    """The workers and the queued classes, as of now."""
    lines = worker_lines(store.list_workers(), datetime.now(UTC), silent_after_s)
    return lines, class_lines(store.queue_depth(), lines)


def overview_json(lines: list[WorkerLine], classes: list[ClassLine]) -> dict[str, Any]:
    return {
        "workers": [asdict(line) | {"state": line.state, "receives": line.receives} for line in lines],
        "queues": [asdict(c) | {"unserved": c.unserved} for c in classes],
    }


def print_class_lines(classes: list[ClassLine]) -> None:
    """Queued jobs per hardware class, and a warning line for each class no live worker takes."""
    if not classes:
        return
    get_console().print(
        "queued per hardware class: " + ", ".join(f"{c.hardware_class}: {c.queued}" for c in classes),
        markup=False,
        highlight=False,
    )
    for c in classes:
        if c.unserved:
            get_console().print(
                f"warning: {c.queued} queued job(s) for {c.hardware_class} and no live worker takes that class",
                markup=False,
                highlight=False,
                style="bold yellow",
            )


def read_queue_overview(store: Store, silent_after_s: float = SILENT_AFTER_S) -> list[dict[str, Any]]:
    """For `farm status --json`: the queue depth per class, each saying whether no live worker takes it."""
    _, classes = read_overview(store, silent_after_s)
    return [asdict(c) | {"unserved": c.unserved} for c in classes]


def print_queue_overview(store: Store, silent_after_s: float = SILENT_AFTER_S) -> None:
    """For `farm status`: print the queue depth per class and warn about classes no live worker takes."""
    _, classes = read_overview(store, silent_after_s)
    print_class_lines(classes)
