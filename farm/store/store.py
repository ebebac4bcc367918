"""The Store: the one seam between the farm and its database (SQLite embedded, PostgreSQL in farm mode).

The lease protocol, in one place:

- `claim` is one conditional UPDATE of a queued row (PostgreSQL: `... WHERE id = (SELECT ... FOR UPDATE
  SKIP LOCKED LIMIT 1) RETURNING`; SQLite: the same statement inside `BEGIN IMMEDIATE`). It sets the
  owner, a lease expiry and `attempt + 1`, and inserts the run row for (job, attempt). The attempt number
  only ever grows, so it fences out every older owner.
- A caller owns a job while the row is `running` with its worker id and attempt. `heartbeat` and
  `complete` also need the lease not to have expired: an expired lease is lost even before the reaper has
  run (FACTS: "an owner whose lease had expired was refused at completion"). `fail` and `release` only
  give the job back, so they are accepted from the owner of an expired but not yet reaped lease, which
  keeps the worker's failure class instead of the reaper's `host_lost`.
- `reap` requeues running jobs whose lease expired (one conditional UPDATE, so any number of reapers can
  run at once) while attempts remain, and fails them with `host_lost` once the budget is spent.
- `release` (a graceful worker shutdown) hands the job back without spending its budget: the attempt
  number still grows (it is the fencing token) but the release is counted and not charged against
  `max_attempts`.
- `cancel` ends a queued or running job at once; the owner of a running one gets LeaseLost on its next
  heartbeat and its results are refused.

Every write is one transaction; every SQLAlchemy or driver error comes out as farm.errors.StoreError. The
lease operations (heartbeat, complete, fail, release) raise LeaseLost for a job that does not exist too, so
a worker has one exception to stop on.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Row, and_, case, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

import farm
from farm.domain import (
    NOT_RETRIED,
    Artifact,
    ClaimedJob,
    FailureClass,
    Figure,
    JobState,
    JobView,
    Phase,
    RunResult,
    split_key,
)
from farm.errors import InvalidTransition, JobNotFound, LeaseLost, StoreError
from farm.store import migrate, queries
from farm.store.db import READ_ONLY, create_store_engine, is_sqlite, normalise_url, translate_errors
from farm.store.models import ArtifactRow, GroupFigureStat, Host, Job, Measurement, RecipeRow, Run, RunSummary, Sample
from farm.store.records import LeaderboardRow, RunState, RunView, WorkerView
from farm.store.sample_codec import encode as encode_samples
from farm.store.summaries import run_summary_values

if TYPE_CHECKING:
    from farm.recipes.model import Recipe  # only named in signatures: the store's readers start without pydantic

DEFAULT_LIST_LIMIT = 100
"""How many jobs `list_jobs` returns unless asked: a screenful of the newest."""


def recipe_sha256(recipe: Recipe) -> str:
    """The sha256 of the recipe's canonical JSON: equal recipes share a row, a changed one gets a new row."""
    canonical = json.dumps(recipe.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def new_job_id() -> str:
    """A short readable unique id: "j-" and 10 hex digits (40 random bits)."""
    return f"j-{secrets.token_hex(5)}"


def _utc(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError(f"naive datetime {now!r}: pass a timezone-aware UTC time")
    return now.astimezone(UTC)


def _lease_expiry(now: datetime, lease_s: float) -> datetime:
    if lease_s <= 0:
        raise ValueError(f"lease_s must be positive, not {lease_s}")
    return now + timedelta(seconds=lease_s)


def _owned_by(job_id: str, attempt: int, worker_id: str) -> ColumnElement[bool]:
    return and_(
        Job.id == job_id,
        Job.owner == worker_id,
        Job.attempt == attempt,
        Job.state == JobState.RUNNING.value,
        Job.cancel_requested.is_(False),
    )


class Store:
    """The farm's database. `Store(url)` opens it unchecked; `Store.open` also checks the schema revision."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = normalise_url(url)
        self.url_for_display = parsed.render_as_string(hide_password=True)
        """The URL with any password hidden, for messages and logs."""
        self.is_sqlite = is_sqlite(parsed)
        self._engine = create_store_engine(url)

    @classmethod
    def open(cls, url: str, *, auto_upgrade: bool | None = None, check_schema: bool = True) -> Store:
        """A store whose schema is at this farm's head revision.

        A database behind it is upgraded when `auto_upgrade` is true, and refused with a StoreError that
        says to run `farm db upgrade` when it is false. None (the default) upgrades SQLite (the embedded
        store, which has no one else to run the upgrade) and refuses PostgreSQL (shared by a farm, upgraded
        by its operator). `check_schema=False` skips the check (for `farm db upgrade` itself).
        """
        store = cls(url)
        if not check_schema:
            return store
        try:
            migrate.ensure_current(
                store._engine,
                auto_upgrade=store.is_sqlite if auto_upgrade is None else auto_upgrade,
                where=store.url_for_display,
            )
        except BaseException:
            store.close()
            raise
        return store

    def upgrade(self) -> None:
        """Migrate the database to the newest schema (`farm db upgrade`)."""
        migrate.upgrade(self._engine)

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (None when it was never migrated)."""
        return migrate.current_revision(self._engine)

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url_for_display!r})"

    @contextmanager
    def _write(self, what: str) -> Iterator[Connection]:
        with translate_errors(what), self._engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self, what: str) -> Iterator[Connection]:
        with (
            translate_errors(what),
            self._engine.connect().execution_options(**READ_ONLY) as conn,
            conn.begin(),
        ):
            yield conn

    # --- recipes and submission -----------------------------------------------------------------------------

    def _insert_recipe(self, conn: Connection, recipe: Recipe, now: datetime) -> str:
        sha = recipe_sha256(recipe)
        values = {
            "sha256": sha,
            "recipe_id": recipe.id,
            "source_format": recipe.provenance.source_format,
            "source_sha256": recipe.provenance.content_sha256,
            "model_id": recipe.model_id,
            "hardware_id": recipe.hardware_id,
            "hardware_count": recipe.hardware_count,
            "engine_name": recipe.engine.name,
            "engine_version": recipe.engine.version,
            "document": recipe.model_dump(mode="json"),
            "created_at": now,
        }
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(dialect.insert(RecipeRow).values(**values).on_conflict_do_nothing(index_elements=["sha256"]))
        return sha

    def add_recipe(self, recipe: Recipe, *, now: datetime | None = None) -> str:
        """Store a recipe once per content; returns its content sha256 (the same for the same content)."""
        with self._write(f"cannot store recipe {recipe.id!r}") as conn:
            return self._insert_recipe(conn, recipe, _utc(now))

    def submit(
        self,
        recipe: Recipe,
        sweep_name: str,
        plan: Mapping[str, Any],
        spec_sha256: str,
        max_attempts: int,
        simulated: bool,
        count: int = 1,
        priority: int = 0,
        *,
        hardware_class: str | None = None,
        now: datetime | None = None,
    ) -> list[str]:
        """Queue `count` jobs of one sweep in one transaction (the recipe too, when new); returns their ids.

        The jobs need `hardware_class` (by default the recipe's; a simulated job names the simulator's class).
        Lower `priority` values are claimed first (0 by default, negative jumps the queue); equal priorities
        go in submission order.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
        when = _utc(now)
        ids = [new_job_id() for _ in range(count)]
        with self._write(f"cannot submit sweep {sweep_name!r}") as conn:
            sha = self._insert_recipe(conn, recipe, when)
            conn.execute(
                insert(Job),
                [
                    {
                        "id": job_id,
                        "recipe_sha256": sha,
                        "sweep_name": sweep_name,
                        "spec_sha256": spec_sha256,
                        "plan": dict(plan),
                        "hardware_class": hardware_class or recipe.hardware_class,
                        "state": JobState.QUEUED.value,
                        "priority": priority,
                        "attempt": 0,
                        "max_attempts": max_attempts,
                        "releases": 0,
                        "simulated": simulated,
                        "cancel_requested": False,
                        "created_at": when,
                        "updated_at": when,
                    }
                    for job_id in ids
                ],
            )
        return ids

    # --- claims and leases ----------------------------------------------------------------------------------

    def claim(
        self, worker_id: str, hardware_classes: Sequence[str], lease_s: float, *, now: datetime | None = None
    ) -> ClaimedJob | None:
        """Claim the next queued job of one of `hardware_classes`, or None when there is none."""
        classes = list(hardware_classes)
        if not classes:
            return None
        when = _utc(now)
        candidate = (
            select(Job.id)
            .where(Job.state == JobState.QUEUED.value, Job.hardware_class.in_(classes))
            .order_by(Job.priority, Job.created_at, Job.id)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        with self._write("cannot claim a job") as conn:
            return self._claim_where(conn, Job.id == candidate, worker_id, lease_s, when)

    def claim_job(
        self,
        job_id: str,
        worker_id: str,
        hardware_classes: Sequence[str],
        lease_s: float,
        *,
        now: datetime | None = None,
    ) -> ClaimedJob | None:
        """Claim one named job (farm mode: the wake-up message carries its id).

        None when the job is not queued any more (already claimed, finished, cancelled), does not exist, or
        needs other hardware: a duplicate or stray message does nothing.
        """
        classes = list(hardware_classes)
        if not classes:
            return None
        with self._write(f"cannot claim job {job_id!r}") as conn:
            condition = and_(Job.id == job_id, Job.hardware_class.in_(classes))
            return self._claim_where(conn, condition, worker_id, lease_s, _utc(now))

    def _claim_where(
        self, conn: Connection, condition: ColumnElement[bool], worker_id: str, lease_s: float, now: datetime
    ) -> ClaimedJob | None:
        expires = _lease_expiry(now, lease_s)
        row = conn.execute(
            update(Job)
            .where(condition, Job.state == JobState.QUEUED.value)
            .values(
                state=JobState.RUNNING.value,
                owner=worker_id,
                attempt=Job.attempt + 1,
                lease_expires_at=expires,
                phase=Phase.CLAIMED.value,
                progress=None,
                updated_at=now,
                started_at=now,
            )
            .returning(
                Job.id,
                Job.attempt,
                Job.hardware_class,
                Job.plan,
                Job.recipe_sha256,
                Job.sweep_name,
                Job.spec_sha256,
                Job.simulated,
                Job.max_attempts,
            )
        ).first()
        if row is None:
            return None
        conn.execute(
            insert(Run).values(
                job_id=row.id,
                attempt=row.attempt,
                worker_id=worker_id,
                state=RunState.RUNNING.value,
                started_at=now,
            )
        )
        document = conn.execute(select(RecipeRow.document).where(RecipeRow.sha256 == row.recipe_sha256)).scalar_one()
        return ClaimedJob(
            id=row.id,
            attempt=row.attempt,
            owner=worker_id,
            hardware_class=row.hardware_class,
            recipe=dict(document),
            plan=dict(row.plan),
            lease_expires_at=expires,
            extra={
                "sweep_name": row.sweep_name,
                "spec_sha256": row.spec_sha256,
                "recipe_sha256": row.recipe_sha256,
                "simulated": row.simulated,
                "max_attempts": row.max_attempts,
            },
        )

    def _why_not_owner(self, conn: Connection, job_id: str, attempt: int, worker_id: str, now: datetime | None) -> str:
        """Why (worker, attempt) does not own the job; `now` given means an expired lease counts as lost."""
        job = conn.execute(
            select(Job.state, Job.owner, Job.attempt, Job.lease_expires_at, Job.cancel_requested).where(
                Job.id == job_id
            )
        ).first()
        if job is None:
            return f"no job {job_id!r}"
        if job.cancel_requested or job.state == JobState.CANCELLED.value:
            return f"job {job_id} was cancelled"
        if job.state != JobState.RUNNING.value:
            return f"job {job_id} is {job.state}, not running"
        if job.owner != worker_id or job.attempt != attempt:
            return (
                f"job {job_id} is held by {job.owner} in attempt {job.attempt}, not by {worker_id} in attempt {attempt}"
            )
        if now is not None and job.lease_expires_at is not None and job.lease_expires_at <= now:
            return f"the lease of job {job_id} attempt {attempt} expired at {job.lease_expires_at.isoformat()}"
        return f"job {job_id} attempt {attempt} is not held by {worker_id}"

    def heartbeat(
        self,
        job_id: str,
        attempt: int,
        worker_id: str,
        phase: Phase | str,
        progress: float | None,
        lease_s: float,
        *,
        now: datetime | None = None,
    ) -> datetime:
        """Renew the lease and record the phase; returns the new expiry. LeaseLost when the caller lost it."""
        when = _utc(now)
        expires = _lease_expiry(when, lease_s)
        phase_value = str(phase)
        with self._write(f"cannot renew the lease of job {job_id!r}") as conn:
            renewed = conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id), Job.lease_expires_at > when)
                .values(lease_expires_at=expires, phase=phase_value, progress=progress, updated_at=when)
            )
            if renewed.rowcount != 1:
                raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id, when))
            conn.execute(
                update(Host)
                .where(Host.worker_id == worker_id)
                .values(last_heartbeat=when, current_job_id=job_id, phase=phase_value)
            )
        return expires

    # --- results and failures -------------------------------------------------------------------------------

    def complete(
        self, job_id: str, attempt: int, worker_id: str, result: RunResult, *, now: datetime | None = None
    ) -> None:
        """Write a run's figures, samples, artifacts and provenance and mark the job succeeded, in one
        transaction, only while the caller holds an unexpired lease; else LeaseLost and nothing is written.

        A second delivery of results that were already written for this (job, attempt) by this worker is
        accepted and writes nothing (the worker may have lost the answer to the first).
        """
        when = _utc(now)
        with self._write(f"cannot store the results of job {job_id!r}") as conn:
            done = conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id), Job.lease_expires_at > when)
                .values(
                    state=JobState.SUCCEEDED.value,
                    lease_expires_at=None,
                    phase=None,
                    progress=1.0,
                    failure_class=None,
                    failure_message=None,
                    updated_at=when,
                    finished_at=when,
                )
            )
            if done.rowcount != 1:
                if self._already_completed(conn, job_id, attempt, worker_id):
                    return
                raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id, when))
            run_id = conn.execute(
                update(Run)
                .where(Run.job_id == job_id, Run.attempt == attempt)
                .values(
                    state=RunState.SUCCEEDED.value,
                    finished_at=when,
                    provenance=dict(result.provenance),
                    failed_requests=result.failed_requests,
                    total_requests=result.total_requests,
                )
                .returning(Run.id)
            ).scalar_one()
            self._insert_figures(conn, run_id, result.figures)
            self._insert_samples(conn, run_id, result.samples)
            self._insert_artifacts(conn, run_id, result.artifacts)
            summary = self._insert_summary(conn, run_id, job_id, attempt, worker_id, when, result.provenance)
            self._add_to_group_stats(conn, summary, result.figures)

    @staticmethod
    def _insert_summary(
        conn: Connection,
        run_id: int,
        job_id: str,
        attempt: int,
        worker_id: str,
        finished_at: datetime,
        provenance: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The run's row of `run_summaries`, in the transaction that stores its results; returns its values."""
        row = conn.execute(
            select(
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
            )
            .join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256)
            .where(Job.id == job_id)
        ).one()
        values = run_summary_values(
            run_id=run_id,
            job_id=job_id,
            attempt=attempt,
            worker_id=worker_id,
            sweep_name=row.sweep_name,
            finished_at=finished_at,
            simulated_job=row.simulated,
            plan=row.plan,
            provenance=provenance,
            recipe_id=row.recipe_id,
            recipe_sha256=row.sha256,
            model_id=row.model_id,
            hardware_id=row.hardware_id,
            hardware_count=row.hardware_count,
            hardware_class=row.hardware_class,
            recipe_engine_name=row.engine_name,
            recipe_engine_version=row.engine_version,
        )
        conn.execute(insert(RunSummary).values(values))
        return values

    @staticmethod
    def _add_to_group_stats(conn: Connection, summary: Mapping[str, Any], figures: Iterable[Figure]) -> None:
        """Pool the run's figures into `group_stats` (count, sum, min, max per group and key: additive, so any
        number of writers can add at once; the row lock of the upsert orders them)."""
        identity = {
            name: summary[name]
            for name in (
                "recipe_id",
                "recipe_sha256",
                "model_id",
                "model_name",
                "hardware_id",
                "hardware_class",
                "engine_name",
                "engine_version",
                "origin",
            )
        }
        rows = [
            {
                **identity,
                "engine_version_key": summary["engine_version"] or "",
                "key": figure.key,
                "unit": figure.unit,
                "kind": figure.kind,
                "point": split_key(figure.key)[1],
                "metric": figure.metric,
                "n": len(figure.values),
                "total": float(sum(figure.values)),
                "min": float(min(figure.values)),
                "max": float(max(figure.values)),
                "runs": 1,
                "requested": figure.requested_repeats
                if figure.requested_repeats is not None
                else (summary["requested_repeats"] if summary["requested_repeats"] is not None else len(figure.values)),
            }
            for figure in figures
            if figure.values
        ]
        if not rows:
            return
        postgres = conn.dialect.name == "postgresql"
        statement = (postgresql if postgres else sqlite).insert(GroupFigureStat).values(rows)
        excluded = statement.excluded
        smaller, larger = (func.least, func.greatest) if postgres else (func.min, func.max)
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=[
                    "recipe_sha256",
                    "hardware_class",
                    "engine_name",
                    "engine_version_key",
                    "origin",
                    "key",
                ],
                set_={
                    "n": GroupFigureStat.n + excluded.n,
                    "total": GroupFigureStat.total + excluded.total,
                    "min": smaller(GroupFigureStat.min, excluded.min),
                    "max": larger(GroupFigureStat.max, excluded.max),
                    "runs": GroupFigureStat.runs + 1,
                    "requested": GroupFigureStat.requested + excluded.requested,
                },
            )
        )

    @staticmethod
    def _already_completed(conn: Connection, job_id: str, attempt: int, worker_id: str) -> bool:
        row = conn.execute(
            select(Run.state, Job.state.label("job_state"))
            .join(Job, Job.id == Run.job_id)
            .where(Run.job_id == job_id, Run.attempt == attempt, Run.worker_id == worker_id)
        ).first()
        return row is not None and row.state == RunState.SUCCEEDED.value and row.job_state == JobState.SUCCEEDED.value

    @staticmethod
    def _insert_figures(conn: Connection, run_id: int, figures: Iterable[Figure]) -> None:
        rows = [
            {
                "run_id": run_id,
                "key": figure.key,
                "kind": figure.kind,
                "point": split_key(figure.key)[1],
                "workload": figure.workload,
                "metric": figure.metric,
                "unit": figure.unit,
                "params": dict(figure.params),
                "values": [float(value) for value in figure.values],
                "n": figure.summary.n,
                "mean": figure.summary.mean,
                "median": figure.summary.median,
                "min": figure.summary.min,
                "max": figure.summary.max,
                "stdev": figure.summary.stdev,
                "spread": figure.summary.spread,
                "requested_repeats": figure.requested_repeats,
            }
            for figure in figures
        ]
        if rows:
            conn.execute(insert(Measurement), rows)

    @staticmethod
    def _insert_samples(conn: Connection, run_id: int, samples: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        rows = [
            {
                "run_id": run_id,
                "figure_key": key,
                "repeat_index": index,
                "samples": None,
                "data": encode_samples(repeat),
            }
            for key, repeats in samples.items()
            for index, repeat in enumerate(repeats)
        ]
        if rows:
            conn.execute(insert(Sample), rows)

    @staticmethod
    def _insert_artifacts(conn: Connection, run_id: int, artifacts: Iterable[Artifact]) -> None:
        rows = [
            {"run_id": run_id, "name": item.name, "media_type": item.media_type, "content": item.content}
            for item in artifacts
        ]
        if rows:
            conn.execute(insert(ArtifactRow), rows)

    def _lock_owned(self, conn: Connection, job_id: str, attempt: int, worker_id: str) -> Row[int, int, int]:
        """The locked row when the caller owns the job (an expired, unreaped lease counts); else LeaseLost."""
        job = conn.execute(
            select(Job.attempt, Job.releases, Job.max_attempts)
            .where(_owned_by(job_id, attempt, worker_id))
            .with_for_update()
        ).first()
        if job is None:
            raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id, None))
        return job

    def fail(
        self,
        job_id: str,
        attempt: int,
        worker_id: str,
        failure_class: FailureClass | str,
        message: str,
        artifacts: Iterable[Artifact] = (),
        *,
        now: datetime | None = None,
    ) -> JobState:
        """Record a failed attempt. The job goes back to `queued` while attempts remain and the class is worth
        retrying (not in NOT_RETRIED); otherwise it ends `failed`. Returns the job's new state."""
        failure = FailureClass(failure_class)
        when = _utc(now)
        with self._write(f"cannot record the failure of job {job_id!r}") as conn:
            job = self._lock_owned(conn, job_id, attempt, worker_id)
            retry = failure not in NOT_RETRIED and job.attempt - job.releases < job.max_attempts
            state = JobState.QUEUED if retry else JobState.FAILED
            conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id))
                .values(
                    state=state.value,
                    owner=None if retry else worker_id,
                    lease_expires_at=None,
                    phase=None,
                    progress=None,
                    failure_class=failure.value,
                    failure_message=message,
                    updated_at=when,
                    finished_at=None if retry else when,
                )
            )
            run_id = self._finish_run(conn, job_id, attempt, RunState.FAILED, when, failure.value, message)
            self._insert_artifacts(conn, run_id, artifacts)
        return state

    @staticmethod
    def _finish_run(
        conn: Connection,
        job_id: str,
        attempt: int,
        state: RunState,
        now: datetime,
        failure_class: str | None = None,
        message: str | None = None,
    ) -> int:
        return conn.execute(
            update(Run)
            .where(Run.job_id == job_id, Run.attempt == attempt)
            .values(state=state.value, finished_at=now, failure_class=failure_class, failure_message=message)
            .returning(Run.id)
        ).scalar_one()

    def release(
        self, job_id: str, attempt: int, worker_id: str, reason: str, *, now: datetime | None = None
    ) -> JobState:
        """Hand a running job back to the queue (a graceful worker shutdown) without spending its budget."""
        when = _utc(now)
        with self._write(f"cannot release job {job_id!r}") as conn:
            self._lock_owned(conn, job_id, attempt, worker_id)
            conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id))
                .values(
                    state=JobState.QUEUED.value,
                    owner=None,
                    releases=Job.releases + 1,
                    lease_expires_at=None,
                    phase=None,
                    progress=None,
                    updated_at=when,
                )
            )
            self._finish_run(conn, job_id, attempt, RunState.RELEASED, when, message=reason)
        return JobState.QUEUED

    def reap(self, *, now: datetime | None = None) -> list[str]:
        """Take back every running job whose lease expired; returns their ids.

        Each goes back to `queued` while attempts remain and ends `failed` (host_lost) once they are spent;
        its run is marked failed with host_lost. One conditional UPDATE, so concurrent reapers never reap
        the same job twice.
        """
        when = _utc(now)
        budget_left = Job.attempt - Job.releases < Job.max_attempts
        with self._write("cannot reap expired leases") as conn:
            reaped = conn.execute(
                update(Job)
                .where(Job.state == JobState.RUNNING.value, Job.lease_expires_at <= when)
                .values(
                    state=case((budget_left, JobState.QUEUED.value), else_=JobState.FAILED.value),
                    owner=case((budget_left, None), else_=Job.owner),
                    finished_at=case((budget_left, None), else_=when),
                    lease_expires_at=None,
                    phase=None,
                    progress=None,
                    failure_class=FailureClass.HOST_LOST.value,
                    failure_message="the worker's lease expired: host lost",
                    updated_at=when,
                )
                .returning(Job.id, Job.attempt)
            ).all()
            for job_id, attempt in reaped:
                self._finish_run(
                    conn,
                    job_id,
                    attempt,
                    RunState.FAILED,
                    when,
                    FailureClass.HOST_LOST.value,
                    "the worker's lease expired: host lost",
                )
        return sorted(job_id for job_id, _ in reaped)

    def cancel(self, job_id: str, *, now: datetime | None = None) -> JobState:
        """Cancel a queued or running job at once.

        JobNotFound for an unknown id, InvalidTransition when the job has already finished.
        """
        when = _utc(now)
        with self._write(f"cannot cancel job {job_id!r}") as conn:
            job = conn.execute(select(Job.state, Job.attempt).where(Job.id == job_id).with_for_update()).first()
            if job is None:
                raise JobNotFound(f"no job {job_id!r}")
            state = JobState(job.state)
            if state.finished:
                raise InvalidTransition(f"job {job_id} is already {state.value}; only queued or running jobs cancel")
            conn.execute(
                update(Job)
                .where(Job.id == job_id, Job.state == state.value)
                .values(
                    state=JobState.CANCELLED.value,
                    cancel_requested=True,
                    lease_expires_at=None,
                    updated_at=when,
                    finished_at=when,
                )
            )
            if state is JobState.RUNNING:
                self._finish_run(conn, job_id, job.attempt, RunState.CANCELLED, when, message="cancelled")
        return JobState.CANCELLED

    # --- workers --------------------------------------------------------------------------------------------

    def register_worker(
        self,
        worker_id: str,
        host: str,
        hardware_classes: Sequence[str],
        version: str | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        """Record (or refresh) a worker daemon in the hosts table when it starts; `version` is the farm's own
        unless given."""
        when = _utc(now)
        values = {
            "worker_id": worker_id,
            "host_name": host,
            "hardware_classes": list(hardware_classes),
            "version": version or farm.__version__,
            "started_at": when,
            "last_heartbeat": when,
            "current_job_id": None,
            "phase": None,
        }
        with self._write(f"cannot register worker {worker_id!r}") as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(Host).values(**values)
            updates = {name: statement.excluded[name] for name in values if name != "worker_id"}
            conn.execute(statement.on_conflict_do_update(index_elements=["worker_id"], set_=updates))

    def worker_heartbeat(
        self,
        worker_id: str,
        job_id: str | None = None,
        phase: str | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        """Say a worker is alive and what it is doing. StoreError when it never registered."""
        with self._write(f"cannot record the heartbeat of worker {worker_id!r}") as conn:
            updated = conn.execute(
                update(Host)
                .where(Host.worker_id == worker_id)
                .values(last_heartbeat=_utc(now), current_job_id=job_id, phase=phase)
            )
            if updated.rowcount != 1:
                raise StoreError(f"worker {worker_id!r} is not registered")

    def list_workers(self) -> list[WorkerView]:
        """Every registered worker, by id."""
        with self._read("cannot list workers") as conn:
            return queries.list_workers(conn)

    # --- queries --------------------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobView:
        """One job; JobNotFound when there is none."""
        with self._read(f"cannot read job {job_id!r}") as conn:
            return queries.get_job(conn, job_id)

    def list_jobs(
        self,
        states: Iterable[JobState | str] | None = None,
        *,
        sweep_name: str | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
        after: tuple[datetime, str] | None = None,
    ) -> list[JobView]:
        """Jobs, newest first, optionally only those in `states` or of one sweep; `after` (created_at, id) of
        the last job of a page gives the next page."""
        with self._read("cannot list jobs") as conn:
            return queries.list_jobs(conn, states, sweep_name, limit, after)

    def runs(self, job_id: str) -> list[RunView]:
        """Every attempt of a job, oldest first."""
        with self._read(f"cannot read the runs of job {job_id!r}") as conn:
            return queries.runs(conn, job_id)

    def results(self, job_id: str) -> list[Figure]:
        """The figures of the job's succeeded run, by key; empty while it has none."""
        with self._read(f"cannot read the results of job {job_id!r}") as conn:
            run_id = queries.succeeded_run_id(conn, job_id)
            return [] if run_id is None else queries.figures(conn, run_id)

    def samples(self, job_id: str) -> dict[str, list[list[dict[str, Any]]]]:
        """The raw request samples of the job's succeeded run: figure key → one list per repeat."""
        with self._read(f"cannot read the samples of job {job_id!r}") as conn:
            run_id = queries.succeeded_run_id(conn, job_id)
            return {} if run_id is None else queries.samples(conn, run_id)

    def artifacts(self, job_id: str, attempt: int) -> list[Artifact]:
        """The artifacts (engine log, ...) kept with one attempt of a job."""
        with self._read(f"cannot read the artifacts of job {job_id!r}") as conn:
            return queries.artifacts(conn, job_id, attempt)

    def leaderboard(self, include_simulated: bool = True) -> list[LeaderboardRow]:
        """One row per recipe × hardware class × engine version × workload × origin, from succeeded runs
        (SQL over the run summaries: farm.store.reads.leaderboard)."""
        from farm.filters import ResultFilter
        from farm.store import reads

        return reads.leaderboard(self, ResultFilter(real_only=not include_simulated))

    def queue_depth(self) -> dict[str, int]:
        """Queued jobs per hardware class (classes with none are left out)."""
        with self._read("cannot read the queue depth") as conn:
            return queries.queue_depth(conn)
