"""Results that could not reach the database wait here, on the worker's disk, until they can be delivered."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.bench.records import figure_from_json, figure_to_json
from farm.domain import Artifact, RunResult


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
    }


def result_from_json(data: dict[str, Any]) -> RunResult:
    return RunResult(
        figures=tuple(figure_from_json(f) for f in data["figures"]),
        samples=data["samples"],
        provenance=data["provenance"],
        artifacts=tuple(Artifact(**a) for a in data["artifacts"]),
        failed_requests=int(data["failed_requests"]),
        total_requests=int(data["total_requests"]),
    )


class Spool:
    """One JSON file per (job, attempt), written atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, job_id: str, attempt: int, worker_id: str, result: RunResult) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{job_id}.{attempt}.json"
        tmp = path.with_suffix(".tmp")
        payload = {"job_id": job_id, "attempt": attempt, "worker_id": worker_id, "result": result_to_json(result)}
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        return path

    def pending(self) -> list[SpooledResult]:
        if not self.directory.exists():
            return []
        out = []
        for path in sorted(self.directory.glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append(
                SpooledResult(
                    job_id=data["job_id"],
                    attempt=int(data["attempt"]),
                    worker_id=data["worker_id"],
                    result=result_from_json(data["result"]),
                    path=path,
                )
            )
        return out

    def remove(self, item: SpooledResult) -> None:
        item.path.unlink(missing_ok=True)
