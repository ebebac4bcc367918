"""Results that could not reach the database wait here, on the worker's disk, until they can be delivered.

Results the database answered with a refusal (farm.errors.StoreRefused), and spool files that cannot be read, are
set aside in `refused/`: kept for an operator, out of the way of delivery, which would otherwise stop at them on
every pass.

The spool never drops a result: when the disk refuses one (full, read-only, gone), it is held in this process's
memory, logged with its job, counted in the worker's heartbeat (`held`), offered for delivery with the rest, and
written to disk again at every pass until the disk takes it. A temporary file that a failed write leaves (a full
disk leaves a 0-byte one) is removed at once, and those a crashed write left are removed when the spool opens.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from farm.bench.records import figure_from_json, figure_to_json
from farm.domain import Artifact, RunResult, RunSignature
from farm.logs import get_logger
from farm.private_files import open_private, private_directory

log = get_logger(__name__)

REFUSED = "refused"
"""The spool's sub-directory of results set aside."""


@dataclass(frozen=True)
class SpooledResult:
    job_id: str
    attempt: int
    worker_id: str
    result: RunResult
    path: Path | None
    """Its file; None while it is held in memory (the disk refused it)."""


def result_to_json(result: RunResult) -> dict[str, Any]:
    return {
        "figures": [figure_to_json(f) for f in result.figures],
        "samples": result.samples,
        "provenance": result.provenance,
        "artifacts": [{"name": a.name, "content": a.content, "media_type": a.media_type} for a in result.artifacts],
        "failed_requests": result.failed_requests,
        "total_requests": result.total_requests,
        "signature": asdict(result.signature) if result.signature is not None else None,
    }


def result_from_json(data: dict[str, Any]) -> RunResult:
    return RunResult(
        figures=tuple(figure_from_json(f) for f in data["figures"]),
        samples=data["samples"],
        provenance=data["provenance"],
        artifacts=tuple(Artifact(**a) for a in data["artifacts"]),
        failed_requests=int(data["failed_requests"]),
        total_requests=int(data["total_requests"]),
        signature=RunSignature(**data["signature"]) if data.get("signature") else None,
    )


class Spool:
    """One JSON file per (job, attempt), written atomically (temp file, fsync, rename); in memory while the disk
    refuses it (the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[tuple[str, int, bool], SpooledResult] = {}
        """(job, attempt, aside) → a result the disk refused, by the key it would be written under."""
        self._lock = threading.Lock()
        for stale in (*directory.glob("*.tmp"), *(directory / REFUSED).glob("*.tmp")):
            stale.unlink(missing_ok=True)  # a write that crashed before its rename

    @property
    def held(self) -> int:
        """Results held in memory because the disk refused them (aside ones included)."""
        return len(self._held)

    def put(self, job_id: str, attempt: int, worker_id: str, result: RunResult, *, aside: bool = False) -> Path | None:
        """Write one result to the spool (to `refused/` with `aside`): atomically, and on disk before returning
        its path. When the disk refuses it, it is held in memory instead (logged) and None is returned."""
        try:
            path = self._write(job_id, attempt, worker_id, result, aside=aside)
        except OSError as exc:
            with self._lock:
                self._held[(job_id, attempt, aside)] = SpooledResult(job_id, attempt, worker_id, result, None)
            log.error(
                "spool.held_in_memory",
                job=job_id,
                attempt=attempt,
                aside=aside,
                error=f"{type(exc).__name__}: {exc}",
                held=self.held,
                note="the disk refused the results; kept in memory, written again at every pass",
            )
            return None
        return path

    def _write(self, job_id: str, attempt: int, worker_id: str, result: RunResult, *, aside: bool) -> Path:
        directory = self.directory / REFUSED if aside else self.directory
        private_directory(directory)
        path = directory / f"{job_id}.{attempt}.json"
        tmp = path.with_suffix(".tmp")
        payload = {"job_id": job_id, "attempt": attempt, "worker_id": worker_id, "result": result_to_json(result)}
        try:
            with open_private(tmp, "w", encoding="utf-8") as fh:
                json.dump(payload, fh)
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves a 0-byte file, a failed fsync a partial one
            raise
        return path

    def retry_held(self) -> None:
        """Write the results held in memory to disk again; those the disk takes leave memory."""
        with self._lock:
            held = list(self._held.items())
        for key, item in held:
            _, _, aside = key
            try:
                path = self._write(item.job_id, item.attempt, item.worker_id, item.result, aside=aside)
            except OSError as exc:
                log.warning(
                    "spool.still_held", job=item.job_id, attempt=item.attempt, error=f"{type(exc).__name__}: {exc}"
                )
                continue
            with self._lock:
                self._held.pop(key, None)
            log.info("spool.written", job=item.job_id, attempt=item.attempt, path=str(path))

    def pending(self) -> list[SpooledResult]:
        """The results waiting for delivery (those held in memory first, then the files, oldest name first); a
        file that cannot be read is set aside."""
        self.retry_held()
        with self._lock:
            out = [item for (_, _, aside), item in self._held.items() if not aside]
        if not self.directory.exists():
            return out
        for path in sorted(self.directory.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                item = SpooledResult(
                    job_id=str(data["job_id"]),
                    attempt=int(data["attempt"]),
                    worker_id=str(data["worker_id"]),
                    result=result_from_json(data["result"]),
                    path=path,
                )
            except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                kept = self._move_aside(path)
                log.error("spool.unreadable", kept=str(kept), error=f"{type(exc).__name__}: {exc}")
                continue
            except OSError as exc:
                log.error("spool.unreadable", path=str(path), error=f"{type(exc).__name__}: {exc}")
                continue
            out.append(item)
        return out

    def remove(self, item: SpooledResult) -> None:
        """Forget a delivered (or refused) result: its file, or its place in memory."""
        if item.path is None:
            with self._lock:
                self._held.pop((item.job_id, item.attempt, False), None)
            return
        item.path.unlink(missing_ok=True)

    def set_aside(self, item: SpooledResult) -> Path | None:
        """Move a result out of the way of delivery into `refused/`, where it is kept; its new path (None: the
        disk refused it, and it is held in memory as set aside)."""
        if item.path is None:
            self.remove(item)
            return self.put(item.job_id, item.attempt, item.worker_id, item.result, aside=True)
        try:
            return self._move_aside(item.path)
        except OSError as exc:
            log.error("spool.not_set_aside", job=item.job_id, path=str(item.path), error=f"{type(exc).__name__}: {exc}")
            return item.path  # kept where it is

    def _move_aside(self, path: Path) -> Path:
        target = self.directory / REFUSED / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)
        return target
