"""Reads for results people use (aggregation, exports, reports, the HTTP API): succeeded runs with every figure.

Only the succeeded run of a succeeded job is read: failed, cancelled and released attempts never count, and a
job that is still running has no results yet. What comes out is frozen records (farm.bench.records.Figure and
`RunMeasurements`), never ORM rows. The functions take a Store and open one read-only transaction on it
(through its package-private `_read`, which is why they live in this package).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from farm.bench.records import Figure, Summary
from farm.domain import JobState
from farm.store.models import Job, Measurement, RecipeRow, Run
from farm.store.records import RunState
from farm.store.store import Store


@dataclass(frozen=True)
class RunMeasurements:
    """One succeeded run: who and what it measured, how many repeats its plan asked for, and every figure.

    `engine_name` and `engine_version` are what the run's provenance read from the engine (the simulator says
    `sim`), falling back to the recipe's. `simulated` is set when the job or its provenance says so.
    """

    job_id: str
    attempt: int
    worker_id: str
    sweep_name: str
    recipe_id: str
    recipe_sha256: str
    model_id: str
    hardware_id: str
    hardware_count: int
    hardware_class: str
    engine_name: str
    engine_version: str | None
    simulated: bool
    measured_at: datetime
    requested_repeats: int | None
    recipe_argv: tuple[str, ...]
    tensor_parallel: int | None
    max_context_tokens: int | None
    provenance: dict[str, Any]
    figures: tuple[Figure, ...]


def run_measurements(
    store: Store,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    job_ids: Sequence[str] = (),
) -> list[RunMeasurements]:
    """Every succeeded run measured in [since, until] (either end open), optionally only of `job_ids`,
    oldest first."""
    query = (
        select(
            Run.id,
            Run.job_id,
            Run.attempt,
            Run.worker_id,
            Run.finished_at,
            Run.started_at,
            Run.provenance,
            Job.sweep_name,
            Job.hardware_class,
            Job.simulated,
            Job.plan,
            RecipeRow.recipe_id,
            RecipeRow.sha256,
            RecipeRow.model_id,
            RecipeRow.hardware_id,
            RecipeRow.hardware_count,
            RecipeRow.engine_name,
            RecipeRow.engine_version,
            RecipeRow.document,
        )
        .join(Job, Job.id == Run.job_id)
        .join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256)
        .where(Run.state == RunState.SUCCEEDED.value, Job.state == JobState.SUCCEEDED.value)
        .order_by(Run.finished_at, Run.id)
    )
    if since is not None:
        query = query.where(Run.finished_at >= since)
    if until is not None:
        query = query.where(Run.finished_at <= until)
    if job_ids:
        query = query.where(Run.job_id.in_(list(job_ids)))
    with store._read("cannot read results") as conn:
        rows = conn.execute(query).all()
        figures: dict[int, list[Figure]] = defaultdict(list)
        run_ids = [row.id for row in rows]
        if run_ids:
            for m in conn.execute(select(Measurement).where(Measurement.run_id.in_(run_ids)).order_by(Measurement.key)):
                figures[m.run_id].append(
                    Figure(
                        kind=m.kind,
                        key=m.key,
                        metric=m.metric,
                        unit=m.unit,
                        values=tuple(float(value) for value in m.values),
                        summary=Summary(
                            n=m.n, mean=m.mean, median=m.median, min=m.min, max=m.max, stdev=m.stdev, spread=m.spread
                        ),
                        workload=m.workload,
                        params=dict(m.params),
                        requested_repeats=m.requested_repeats,
                    )
                )
    return [_run_measurements(row, tuple(figures.get(row.id, ()))) for row in rows]


def _run_measurements(row: Any, figures: tuple[Figure, ...]) -> RunMeasurements:
    provenance: dict[str, Any] = dict(row.provenance or {})
    engine = provenance.get("engine") or {}
    document: dict[str, Any] = dict(row.document or {})
    serving = document.get("serving") or {}
    repeats = (row.plan or {}).get("repeats")
    return RunMeasurements(
        job_id=row.job_id,
        attempt=row.attempt,
        worker_id=row.worker_id,
        sweep_name=row.sweep_name,
        recipe_id=row.recipe_id,
        recipe_sha256=row.sha256,
        model_id=row.model_id,
        hardware_id=row.hardware_id,
        hardware_count=row.hardware_count,
        hardware_class=row.hardware_class,
        engine_name=str(engine.get("name") or row.engine_name),
        engine_version=engine.get("version") or row.engine_version,
        simulated=bool(row.simulated or provenance.get("simulated")),
        measured_at=row.finished_at or row.started_at,
        requested_repeats=int(repeats) if isinstance(repeats, int) else None,
        recipe_argv=tuple(str(arg) for arg in document.get("argv") or ()),
        tensor_parallel=serving.get("tensor_parallel"),
        max_context_tokens=serving.get("max_context_tokens"),
        provenance=provenance,
        figures=figures,
    )
