"""Reads of the store, each on a connection the caller opened, each returning records rather than ORM rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, func, or_, select

from farm.domain import Artifact, Figure, JobState, JobView, Summary
from farm.errors import JobNotFound
from farm.store.models import ArtifactRow, Job, MeasurementRow, RecipeRow, Run, Sample
from farm.store.records import RunState, RunView
from farm.store.sample_codec import decode as decode_samples

_JOB_VIEW_COLUMNS = (
    Job.id,
    Job.state,
    RecipeRow.recipe_id,
    Job.sweep_name,
    Job.hardware_class,
    Job.attempt,
    Job.max_attempts,
    Job.created_at,
    Job.updated_at,
    Job.owner,
    Job.phase,
    Job.progress,
    Job.lease_expires_at,
    Job.failure_class,
    Job.failure_message,
    Job.simulated,
)


def _job_view(row: Row[*tuple[Any, ...]]) -> JobView:
    return JobView(
        id=row.id,
        state=JobState(row.state),
        recipe_id=row.recipe_id,
        sweep_name=row.sweep_name,
        hardware_class=row.hardware_class,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
        owner=row.owner,
        phase=row.phase,
        progress=row.progress,
        lease_expires_at=row.lease_expires_at,
        failure_class=row.failure_class,
        failure_message=row.failure_message,
        simulated=row.simulated,
    )


def get_job(conn: Connection, job_id: str) -> JobView:
    row = conn.execute(
        select(*_JOB_VIEW_COLUMNS).join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256).where(Job.id == job_id)
    ).first()
    if row is None:
        raise JobNotFound(f"no job {job_id!r}")
    return _job_view(row)


def list_jobs(
    conn: Connection,
    states: Iterable[JobState | str] | None,
    sweep_name: str | None,
    limit: int,
    after: tuple[datetime, str] | None = None,
) -> list[JobView]:
    query = select(*_JOB_VIEW_COLUMNS).join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256)
    if after is not None:
        created, job_id = after
        query = query.where(or_(Job.created_at < created, and_(Job.created_at == created, Job.id > job_id)))
    if states is not None:
        query = query.where(Job.state.in_([JobState(state).value for state in states]))
    if sweep_name is not None:
        query = query.where(Job.sweep_name == sweep_name)
    query = query.order_by(Job.created_at.desc(), Job.id).limit(limit)
    return [_job_view(row) for row in conn.execute(query)]


def _require_job(conn: Connection, job_id: str) -> None:
    if conn.execute(select(Job.id).where(Job.id == job_id)).first() is None:
        raise JobNotFound(f"no job {job_id!r}")


def runs(conn: Connection, job_id: str) -> list[RunView]:
    _require_job(conn, job_id)
    names: dict[int, list[str]] = defaultdict(list)
    for run_id, name in conn.execute(
        select(ArtifactRow.run_id, ArtifactRow.name)
        .join(Run, Run.id == ArtifactRow.run_id)
        .where(Run.job_id == job_id)
        .order_by(ArtifactRow.name)
    ):
        names[run_id].append(name)
    rows = conn.execute(select(Run).where(Run.job_id == job_id).order_by(Run.attempt))
    return [
        RunView(
            job_id=row.job_id,
            attempt=row.attempt,
            worker_id=row.worker_id,
            state=RunState(row.state),
            started_at=row.started_at,
            finished_at=row.finished_at,
            failure_class=row.failure_class,
            failure_message=row.failure_message,
            provenance=row.provenance,
            failed_requests=row.failed_requests,
            total_requests=row.total_requests,
            artifacts=tuple(names.get(row.id, ())),
        )
        for row in rows
    ]


def succeeded_run_id(conn: Connection, job_id: str) -> int | None:
    """The run that completed the job (the latest succeeded attempt), if any."""
    _require_job(conn, job_id)
    return conn.execute(
        select(Run.id)
        .where(Run.job_id == job_id, Run.state == RunState.SUCCEEDED.value)
        .order_by(Run.attempt.desc())
        .limit(1)
    ).scalar()


def figures(conn: Connection, run_id: int) -> list[Figure]:
    rows = conn.execute(select(MeasurementRow).where(MeasurementRow.run_id == run_id).order_by(MeasurementRow.key))
    return [
        Figure(
            kind=row.kind,
            key=row.key,
            metric=row.metric,
            unit=row.unit,
            values=tuple(float(value) for value in row.values),
            summary=Summary(
                n=row.n,
                mean=row.mean,
                median=row.median,
                min=row.min,
                max=row.max,
                stdev=row.stdev,
                spread=row.spread,
            ),
            workload=row.workload,
            params=dict(row.params),
            requested_repeats=row.requested_repeats,
        )
        for row in rows
    ]


def samples(conn: Connection, run_id: int) -> dict[str, list[list[dict[str, Any]]]]:
    out: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for row in conn.execute(
        select(Sample.figure_key, Sample.samples, Sample.data)
        .where(Sample.run_id == run_id)
        .order_by(Sample.figure_key, Sample.repeat_index)
    ):
        # Rows written before revision 0002 hold JSON in `samples`; newer ones hold the compact form in `data`.
        out[row.figure_key].append(decode_samples(row.data) if row.data is not None else list(row.samples or ()))
    return dict(out)


def artifacts(conn: Connection, job_id: str, attempt: int) -> list[Artifact]:
    _require_job(conn, job_id)
    rows = conn.execute(
        select(ArtifactRow.name, ArtifactRow.content, ArtifactRow.media_type)
        .join(Run, Run.id == ArtifactRow.run_id)
        .where(Run.job_id == job_id, Run.attempt == attempt)
        .order_by(ArtifactRow.name)
    )
    return [Artifact(name=row.name, content=row.content, media_type=row.media_type) for row in rows]


def queue_depth(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        select(Job.hardware_class, func.count())
        .where(Job.state == JobState.QUEUED.value)
        .group_by(Job.hardware_class)
        .order_by(Job.hardware_class)
    )
    return {hardware: int(count) for hardware, count in rows}
