"""Results that could not reach the database wait here, on the worker's disk, until they can be delivered.

Results the database answered with a refusal (farm.errors.StoreRefused), and spool files that cannot be read, are
set aside in `refused/`: kept for an operator, out of the way of delivery, which would otherwise stop at them on
every pass."""

from __future__ import annotations

import json
import os
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
    path: Path


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
    """One JSON file per (job, attempt), written atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, job_id: str, attempt: int, worker_id: str, result: RunResult, *, aside: bool = False) -> Path:
        """Write one result to the spool (to `refused/` with `aside`): atomically, and on disk before returning."""
        directory = self.directory / REFUSED if aside else self.directory
        private_directory(directory)
        path = directory / f"{job_id}.{attempt}.json"
        tmp = path.with_suffix(".tmp")
        payload = {"job_id": job_id, "attempt": attempt, "worker_id": worker_id, "result": result_to_json(result)}
        with open_private(tmp, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        return path

    def pending(self) -> list[SpooledResult]:
        """The results waiting for delivery, oldest name first; a file that cannot be read is set aside."""
        if not self.directory.exists():
            return []
        out = []
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
            out.append(item)
        return out

    def remove(self, item: SpooledResult) -> None:
        item.path.unlink(missing_ok=True)

    def set_aside(self, item: SpooledResult) -> Path:
        """Move a result out of the way of delivery into `refused/`, where it is kept; its new path."""
        return self._move_aside(item.path)

    def _move_aside(self, path: Path) -> Path:
        target = self.directory / REFUSED / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.replace(target)
        return target
