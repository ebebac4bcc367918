"""The Store: the one seam between the farm and its database (SQLite embedded, PostgreSQL in farm mode).

The lease protocol, in one place:

- Time is the database's: every lease decision of a transaction reads the database's clock once (`now()` on
  PostgreSQL, the SQLite library's clock), never a worker's, so hosts need not agree on the time. (Tests pass
  `now=` to drive time by hand.)
- `claim` is one conditional UPDATE of a queued row (`... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED
  LIMIT 1) RETURNING`), with who may take what written into it (farm.store.claims). It sets the owner, a lease
  expiry and `attempt + 1`, and inserts the run row for (job, attempt): on PostgreSQL in the same statement, in
  autocommit (one round trip, the recipe returned with it unless the store holds it already); on SQLite inside
  `BEGIN IMMEDIATE`. The attempt number only ever grows: it is the fencing token.
- Host-aware retries: a claim skips a job its host already failed while another live, unquarantined host of
  the class whose broker answers (it can receive the job's message) and that has not failed it exists; when
  none does, the host may take it again after the job's back-off (`retry_after`). A quarantined host claims
  nothing (`quarantine`, `release_host`): `fail` quarantines a host after K failed engine starts in a row
  (START_FAILURES) that are the host's, not the recipe's (a start that failed the same way in another run of
  the job, or of its recipe on another host, follows the recipe; a recipe counts once), and such an attempt is
  not charged to the job when it is the job's first failed start or when it quarantined the host (it is counted
  with the releases).
- Fenced by attempt, not by clock: `heartbeat`, `fail` and `release` are accepted from the owner of the current
  attempt while the job runs, even after its lease expired, until a reaper takes the job back. `complete`
  accepts the results of the current attempt whenever they arrive (spooled through a database outage) as long as
  no later attempt exists and the job was not cancelled, even after the reaper took it back.
- `reap` requeues running jobs whose lease expired (one conditional UPDATE, so any number of reapers can
  run at once) while attempts remain, and fails them with `host_lost` once the budget is spent. Its callers
  hold it back after a database outage (farm.worker.outage): a lease that ran out while nobody could reach the
  database is reaped only once its owner had a grace to deliver the results it spooled.
- `release` (a graceful worker shutdown) hands the job back without spending its budget: the attempt
  number still grows (it is the fencing token) but the release is counted and not charged against
  `max_attempts`.
- `cancel` ends a queued or running job at once; the owner of a running one gets LeaseLost on its next
  heartbeat and its results are refused.
- Failure messages and artifacts are scrubbed of secrets (farm.scrubber.scrub_text) before they are stored.

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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Row, and_, case, func, insert, or_, select, update

import farm
from farm.domain import (
    NOT_RETRIED,
    START_FAILURES,
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
from farm.scrubber import scrub_artifact, scrub_text
from farm.settings import LIVE_WITHIN_S
from farm.store import claims, migrate, queries
from farm.store.db import (
    POOL_SIZE,
    READ_ONLY,
    create_store_engine,
    is_sqlite,
    normalise_url,
    translate_errors,
    upsert,
)
from farm.store.encode_once import EncodeOnce
from farm.store.models import (
    ArtifactRow,
    GroupFigureStat,
    Host,
    Job,
    MeasurementRow,
    RecipeRow,
    Run,
    RunSummary,
    Sample,
)
from farm.store.records import LeaderboardRow, RunState, RunView, WorkerView
from farm.store.summaries import run_summary_values

if TYPE_CHECKING:
    from farm.recipes.model import Recipe  # only named in signatures: the store's readers start without pydantic
    from farm.signing.keys import PublicKey
    from farm.store.pooled import PooledCheck
    from farm.store.signatures import Before, KeyView, RunCheck, StoredSignature

HOST_LOST_MESSAGE = "the worker's lease expired: host lost"


DEFAULT_LIST_LIMIT = 100
"""How many jobs `list_jobs` returns unless asked: a screenful of the newest."""


def recipe_sha256(recipe: Recipe) -> str:
    """The sha256 of the recipe's canonical JSON: equal recipes share a row, a changed one gets a new row."""
    canonical = json.dumps(recipe.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _encoded_by_key(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[bytes]]:
    """The encoded sample bytes of sample rows, by figure key, in repeat order."""
    out: dict[str, list[bytes]] = {}
    for row in rows:
        out.setdefault(str(row["figure_key"]), []).append(bytes(row["data"]))
    return out


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


def _clock(conn: Connection, now: datetime | None) -> datetime:
    """The time every lease decision of one transaction uses: the database's clock (PostgreSQL `now()`, the
    SQLite library's clock), never a worker's; `now` overrides it (tests drive time by hand)."""
    if now is not None:
        return _utc(now)
    if conn.dialect.name == "postgresql":
        value = conn.execute(select(func.now())).scalar_one()
        return value.astimezone(UTC) if isinstance(value, datetime) else _utc(None)
    # SQLite is embedded: every process that opens the file runs on its one host and reads that host's clock
    # (SQLite's own 'now' is the same system call), so no query is spent on it inside the write lock.
    return datetime.now(UTC)


def _current_attempt_of(job_id: str, attempt: int, worker_id: str) -> ColumnElement[bool]:
    """`attempt` is the job's newest attempt, it is `worker_id`'s, and nothing ended the job since but a reaper
    (which leaves the job queued, or failed with host_lost): results of it are still welcome."""
    return and_(
        Job.id == job_id,
        Job.attempt == attempt,
        Job.cancel_requested.is_(False),
        or_(
            and_(Job.state == JobState.RUNNING.value, Job.owner == worker_id),
            and_(
                or_(
                    Job.state == JobState.QUEUED.value,
                    and_(Job.state == JobState.FAILED.value, Job.failure_class == FailureClass.HOST_LOST.value),
                ),
                select(Run.id).where(Run.job_id == job_id, Run.attempt == attempt, Run.worker_id == worker_id).exists(),
            ),
        ),
    )


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

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        parsed = normalise_url(url)
        self.url_for_display = parsed.render_as_string(hide_password=True)
        """The URL with any password hidden, for messages and logs."""
        self.is_sqlite = is_sqlite(parsed)
        self._engine = create_store_engine(url, pool_size=pool_size)
        self._single = self._engine.execution_options(isolation_level="AUTOCOMMIT")
        """The same pool, each statement its own transaction: a claim, which is one statement on PostgreSQL, and
        the reads (at READ COMMITTED a read transaction's statements each see their own snapshot anyway), with
        no BEGIN and COMMIT round trips around them."""
        self._recipes = claims.RecipeCache()

    @classmethod
    def open(
        cls, url: str, *, auto_upgrade: bool | None = None, check_schema: bool = True, pool_size: int = POOL_SIZE
    ) -> Store:
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
        """A connection for reads: on PostgreSQL each statement in autocommit (`_single`), on SQLite one deferred
        read transaction (one snapshot of the file)."""
        if self.is_sqlite:
            with translate_errors(what), self._engine.connect().execution_options(**READ_ONLY) as conn, conn.begin():
                yield conn
        else:
            with translate_errors(what), self._single.connect() as conn:
                yield conn

    @contextmanager
    def _single_write(self, what: str) -> Iterator[Connection]:
        """A connection for a write that is one statement: on PostgreSQL in autocommit (no BEGIN and COMMIT round
        trips), on SQLite a write transaction as any."""
        if self.is_sqlite:
            with self._write(what) as conn:
                yield conn
        else:
            with translate_errors(what), self._single.connect() as conn:
                yield conn

    def _now(self, conn: Connection, now: datetime | None) -> Any:
        """The database's clock inside a statement (`now()` on PostgreSQL, see `_clock`), or `now` (tests)."""
        if now is None and conn.dialect.name == "postgresql":
            return func.now()
        return _clock(conn, now)

    def _recipe(self, conn: Connection, sha256: str, document: dict[str, Any] | None) -> dict[str, Any]:
        """A claimed job's recipe document: from the cache, else `document` (what the claim returned), else read."""
        if document is None:
            cached = self._recipes.get(sha256)
            if cached is not None:
                return cached
            document = conn.execute(select(RecipeRow.document).where(RecipeRow.sha256 == sha256)).scalar_one()
        return self._recipes.put(sha256, dict(document))

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
        conn.execute(upsert(conn, RecipeRow).values(**values).on_conflict_do_nothing(index_elements=["sha256"]))
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
        self,
        worker_id: str,
        hardware_classes: Sequence[str],
        lease_s: float,
        *,
        now: datetime | None = None,
        live_within_s: float = LIVE_WITHIN_S,
    ) -> ClaimedJob | None:
        """Claim the next queued job of one of `hardware_classes` that this host may take, or None.

        None when the host is quarantined. A job this host already failed is skipped while another live host of
        its class that has not failed it exists; when none does, it is taken again once its back-off
        (`retry_after`) has passed. `live_within_s`: a host heard from within this long is live. One statement
        on PostgreSQL (farm.store.claims).
        """
        return self._claim(worker_id, hardware_classes, lease_s, now, live_within_s, None, "cannot claim a job")

    def claim_job(
        self,
        job_id: str,
        worker_id: str,
        hardware_classes: Sequence[str],
        lease_s: float,
        *,
        now: datetime | None = None,
        live_within_s: float = LIVE_WITHIN_S,
    ) -> ClaimedJob | None:
        """Claim one named job (farm mode: the wake-up message carries its id).

        None when the job is not queued any more (already claimed, finished, cancelled), does not exist, needs
        other hardware, or is one this host should leave to another (see `claim`): a duplicate or stray message
        does nothing. `skipped` tells a skip from a duplicate.
        """
        what = f"cannot claim job {job_id!r}"
        return self._claim(worker_id, hardware_classes, lease_s, now, live_within_s, job_id, what)

    def skipped(self, job_id: str, worker_id: str) -> bool:
        """Whether a job is still queued (so a claim of it that returned None left it to another host, or to
        this one after its back-off, rather than finding it taken or finished)."""
        with self._read(f"cannot read job {job_id!r}") as conn:
            state = conn.execute(select(Job.state).where(Job.id == job_id)).scalar_one_or_none()
        return state == JobState.QUEUED.value

    def _claim(
        self,
        worker_id: str,
        hardware_classes: Sequence[str],
        lease_s: float,
        now: datetime | None,
        live_within_s: float,
        job_id: str | None,
        what: str,
    ) -> ClaimedJob | None:
        classes = list(hardware_classes)
        if not classes:
            return None
        postgres = not self.is_sqlite
        when = _utc(now) if now is not None or not postgres else None  # SQLite: this host's clock (see _clock)
        params = claims.claim_parameters(
            worker_id, classes, lease_s, when, live_within_s, job_id, self._recipes.known() if postgres else ()
        )
        by_id = job_id is not None
        if postgres:
            with translate_errors(what), self._single.connect() as conn:
                sql, fixed = claims.postgres_statement(
                    conn.dialect, by_id=by_id, database_clock=when is None, classes=len(classes)
                )
                row = conn.exec_driver_sql(sql, fixed | params).first()
                if row is None:
                    return None
                recipe = self._recipe(conn, row.recipe_sha256, row.document)
        else:
            shape = 0 if by_id else len(classes)
            statement = claims.claim_update(postgres=False, by_id=by_id, database_clock=False, classes=shape)
            with self._write(what) as conn:
                row = conn.execute(statement, params).first()
                if row is None:
                    return None
                conn.execute(claims.run_insert(row.id, row.attempt, worker_id, row.started_at))
                recipe = self._recipe(conn, row.recipe_sha256, None)
        return ClaimedJob(
            id=row.id,
            attempt=row.attempt,
            owner=worker_id,
            hardware_class=row.hardware_class,
            recipe=recipe,
            plan=dict(row.plan),
            lease_expires_at=_utc(row.lease_expires_at),
            extra={
                "sweep_name": row.sweep_name,
                "spec_sha256": row.spec_sha256,
                "recipe_sha256": row.recipe_sha256,
                "simulated": row.simulated,
                "max_attempts": row.max_attempts,
            },
        )

    def _why_not_owner(self, conn: Connection, job_id: str, attempt: int, worker_id: str) -> str:
        """Why (worker, attempt) is not the current attempt of the job."""
        job = conn.execute(
            select(Job.state, Job.owner, Job.attempt, Job.cancel_requested).where(Job.id == job_id)
        ).first()
        if job is None:
            return f"no job {job_id!r}"
        if job.cancel_requested or job.state == JobState.CANCELLED.value:
            return f"job {job_id} was cancelled"
        if job.attempt != attempt or (job.state == JobState.RUNNING.value and job.owner != worker_id):
            return (
                f"job {job_id} is held by {job.owner} in attempt {job.attempt}, not by {worker_id} in attempt {attempt}"
            )
        if job.state != JobState.RUNNING.value:
            return f"job {job_id} attempt {attempt} was taken back by the reaper: it is {job.state}"
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
        """Renew the lease (from the database's clock) and record the phase; returns the new expiry.

        Fenced by attempt, not by clock: the owner of the current attempt renews even a lease that expired, as
        long as no reaper has taken the job back. LeaseLost when it was taken back, cancelled or claimed again.
        """
        phase_value = str(phase)
        with self._write(f"cannot renew the lease of job {job_id!r}") as conn:
            when = _clock(conn, now)
            expires = _lease_expiry(when, lease_s)
            renewed = conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id))
                .values(lease_expires_at=expires, phase=phase_value, progress=progress, updated_at=when)
            )
            if renewed.rowcount != 1:
                raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id))
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
        transaction, when the caller owns the job's current attempt; else LeaseLost and nothing is written.

        Fenced by attempt, not by clock (farm.store.store's docstring): results are accepted whenever they
        arrive (spooled through a database outage, say) while no later attempt exists and the job was not
        cancelled, even when the lease expired and a reaper took the job back in the meantime.

        A second delivery of results that were already written for this (job, attempt) by this worker is
        accepted and writes nothing (the worker may have lost the answer to the first).
        """
        with self._write(f"cannot store the results of job {job_id!r}") as conn:
            self._deliver(conn, _clock(conn, now), job_id, attempt, worker_id, result, EncodeOnce())

    def complete_many(
        self, deliveries: Sequence[tuple[str, int, str, RunResult]], *, now: datetime | None = None
    ) -> None:
        """`complete` for many runs, (job id, attempt, worker id, result) each, in one transaction: every run is
        fenced, stored and its signature checked exactly as `complete` does, and a repeat of samples that several
        results share is encoded once. All or nothing: LeaseLost (naming the job) for one run the caller does
        not own stores none. What fills a store in bulk (bench/verify.py)."""
        codec = EncodeOnce()
        rows = _Rows()
        with self._write(f"cannot store the results of {len(deliveries)} runs") as conn:
            when = _clock(conn, now)
            for job_id, attempt, worker_id, result in deliveries:
                self._deliver(conn, when, job_id, attempt, worker_id, result, codec, rows)
            rows.write(conn)

    def _deliver(
        self,
        conn: Connection,
        when: datetime,
        job_id: str,
        attempt: int,
        worker_id: str,
        result: RunResult,
        codec: EncodeOnce,
        rows: _Rows | None = None,
    ) -> None:
        """One run's results stored in the caller's transaction (`complete`). `rows`: where its figures,
        samples, artifacts and group statistics go to be written with other runs' (`complete_many`), else now."""
        done = conn.execute(
            update(Job)
            .where(_current_attempt_of(job_id, attempt, worker_id))
            .values(
                state=JobState.SUCCEEDED.value,
                owner=worker_id,
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
            raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id))
        run_id = conn.execute(
            update(Run)
            .where(Run.job_id == job_id, Run.attempt == attempt)
            .values(
                state=RunState.SUCCEEDED.value,
                finished_at=when,
                failure_class=None,
                failure_message=None,
                provenance=dict(result.provenance),
                failed_requests=result.failed_requests,
                total_requests=result.total_requests,
            )
            .returning(Run.id)
        ).scalar_one()
        now_rows = rows or _Rows()
        now_rows.figures += self._figure_rows(run_id, result.figures)
        sample_rows = self._sample_rows(run_id, result.samples, codec)
        now_rows.samples += sample_rows
        now_rows.artifacts += self._artifact_rows(run_id, result.artifacts)
        summary = self._insert_summary(conn, run_id, job_id, attempt, worker_id, when, result.provenance)
        now_rows.add_group_stats(self._group_stat_rows(summary, result.figures))
        if rows is None:
            now_rows.write(conn)
        sample_digests = {
            key: [hashlib.sha256(blob).hexdigest() for blob in blobs]
            for key, blobs in _encoded_by_key(sample_rows).items()
        }
        if result.signature is not None:
            self._record_signature(conn, run_id, job_id, attempt, worker_id, result, sample_digests, when, codec)

    @staticmethod
    def _record_signature(
        conn: Connection,
        run_id: int,
        job_id: str,
        attempt: int,
        worker_id: str,
        result: RunResult,
        sample_digests: dict[str, list[str]],
        now: datetime,
        codec: EncodeOnce,
    ) -> None:
        """Keep the run's signature with the verdict of checking what was just stored against it (the signing
        code is imported here, on the first signed delivery: readers of the store never need it)."""
        from farm.signing.runs import RunContent, artifact_digests, figure_document
        from farm.store import signatures

        assert result.signature is not None
        content = RunContent(
            job_id=job_id,
            attempt=attempt,
            worker_id=worker_id,
            figures=tuple(figure_document(figure, codec) for figure in result.figures),
            sample_digests=sample_digests,
            provenance=dict(result.provenance),
            failed_requests=result.failed_requests,
            total_requests=result.total_requests,
            artifacts=artifact_digests(result.artifacts),
        )
        signatures.record_delivery(conn, run_id, content, result.signature, now)

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
        _write_group_stats(conn, Store._group_stat_rows(summary, figures))

    @staticmethod
    def _group_stat_rows(summary: Mapping[str, Any], figures: Iterable[Figure]) -> list[dict[str, Any]]:
        """The run's figures as `group_stats` rows to add (one run each)."""
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
        return [
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
        rows = Store._figure_rows(run_id, figures)
        if rows:
            conn.execute(insert(MeasurementRow), rows)

    @staticmethod
    def _figure_rows(run_id: int, figures: Iterable[Figure]) -> list[dict[str, Any]]:
        return [
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

    @staticmethod
    def _insert_samples(
        conn: Connection,
        run_id: int,
        samples: Mapping[str, Sequence[Sequence[Any]]],
        codec: EncodeOnce | None = None,
    ) -> dict[str, list[str]]:
        """Store the samples compact; returns the sha256 of each repeat's bytes (what a run's signature covers)."""
        rows = Store._sample_rows(run_id, samples, codec)
        if rows:
            conn.execute(insert(Sample), rows)
        return {
            key: [hashlib.sha256(encode).hexdigest() for encode in encoded]
            for key, encoded in _encoded_by_key(rows).items()
        }

    @staticmethod
    def _sample_rows(
        run_id: int, samples: Mapping[str, Sequence[Sequence[Any]]], codec: EncodeOnce | None = None
    ) -> list[dict[str, Any]]:
        encode = (codec or EncodeOnce()).samples
        return [
            {
                "run_id": run_id,
                "figure_key": key,
                "repeat_index": index,
                "samples": None,
                "data": encode(repeat),
            }
            for key, repeats in samples.items()
            for index, repeat in enumerate(repeats)
        ]

    @staticmethod
    def _insert_artifacts(conn: Connection, run_id: int, artifacts: Iterable[Artifact]) -> None:
        rows = Store._artifact_rows(run_id, artifacts)
        if rows:
            conn.execute(insert(ArtifactRow), rows)

    @staticmethod
    def _artifact_rows(run_id: int, artifacts: Iterable[Artifact]) -> list[dict[str, Any]]:
        return [
            {"run_id": run_id, "name": item.name, "media_type": item.media_type, "content": item.content}
            for item in artifacts
        ]

    def _lock_owned(self, conn: Connection, job_id: str, attempt: int, worker_id: str) -> Row[int, int, int]:
        """The locked row when the caller owns the job (an expired, unreaped lease counts); else LeaseLost."""
        job = conn.execute(
            select(Job.attempt, Job.releases, Job.max_attempts)
            .where(_owned_by(job_id, attempt, worker_id))
            .with_for_update()
        ).first()
        if job is None:
            raise LeaseLost(self._why_not_owner(conn, job_id, attempt, worker_id))
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
        backoff_s: float = 0.0,
        quarantine_after: int | None = None,
        now: datetime | None = None,
    ) -> JobState:
        """Record a failed attempt; returns the job's new state.

        The job goes back to `queued` while attempts remain and the class is worth retrying (not in
        NOT_RETRIED); otherwise it ends `failed`. A retry is not taken again by this host before `backoff_s`
        (database time), and not at all while another live host can take it (`claim`).

        A failed engine start (START_FAILURES) counts against the host: `quarantine_after` of them in a row
        quarantine it, less those that follow the recipe (_host_attributed_failures). Such an attempt is not
        charged to the job (it never reached its engine) when it is the job's first failed start, or when it
        quarantined the host. The message and artifacts are scrubbed of secrets before they are stored.
        """
        failure = FailureClass(failure_class)
        text = scrub_text(message)
        with self._write(f"cannot record the failure of job {job_id!r}") as conn:
            when = _clock(conn, now)
            job = self._lock_owned(conn, job_id, attempt, worker_id)
            uncharged = False
            if failure in START_FAILURES:
                quarantined = self._count_start_failure(conn, worker_id, job_id, failure, text, quarantine_after, when)
                earlier = conn.execute(
                    select(Run.id).where(
                        Run.job_id == job_id,
                        Run.attempt < attempt,
                        Run.failure_class.in_([c.value for c in START_FAILURES]),
                    )
                ).first()
                uncharged = quarantined or earlier is None
            releases = job.releases + (1 if uncharged else 0)
            retry = failure not in NOT_RETRIED and job.attempt - releases < job.max_attempts
            state = JobState.QUEUED if retry else JobState.FAILED
            conn.execute(
                update(Job)
                .where(_owned_by(job_id, attempt, worker_id))
                .values(
                    state=state.value,
                    owner=None if retry else worker_id,
                    releases=releases,
                    lease_expires_at=None,
                    retry_after=when + timedelta(seconds=backoff_s) if retry and backoff_s > 0 else None,
                    phase=None,
                    progress=None,
                    failure_class=failure.value,
                    failure_message=text,
                    updated_at=when,
                    finished_at=None if retry else when,
                )
            )
            run_id = self._finish_run(conn, job_id, attempt, RunState.FAILED, when, failure.value, text)
            self._insert_artifacts(conn, run_id, [scrub_artifact(item) for item in artifacts])
        return state

    @staticmethod
    def _count_start_failure(
        conn: Connection,
        worker_id: str,
        job_id: str,
        failure: FailureClass,
        message: str,
        quarantine_after: int | None,
        now: datetime,
    ) -> bool:
        """One more failed engine start on the host; True when this one quarantined it.

        `start_failures` counts every failed start in a row; the quarantine counts only those that are the host's:
        a failed start that follows the recipe (host_attributed_failures) never takes a host out of rotation."""
        row = conn.execute(
            update(Host)
            .where(Host.worker_id == worker_id)
            .values(start_failures=Host.start_failures + 1)
            .returning(Host.start_failures, Host.quarantined_at)
        ).first()
        if row is None or quarantine_after is None or row.quarantined_at is not None:
            return False
        own = Store._host_attributed_failures(conn, worker_id, job_id, failure, row.start_failures)
        if own < quarantine_after:
            return False
        first_line = message.splitlines()[0] if message else ""
        reason = (
            f"the engine failed to start {own} times in a row, none explained by its recipe (no other run of the "
            f"job, nor of its recipe on another host, failed that way); last: {failure.value}: {first_line}"
        )
        conn.execute(
            update(Host).where(Host.worker_id == worker_id).values(quarantined_at=now, quarantine_reason=reason[:2000])
        )
        return True

    @staticmethod
    def _host_attributed_failures(
        conn: Connection, worker_id: str, job_id: str, failure: FailureClass, in_a_row: int
    ) -> int:
        """Of the host's last `in_a_row` failed starts (this one included), how many are the host's own.

        A failed start follows the recipe, not the host, when another run failed at start the same way (the same
        failure class) as part of the same job (on any host), or of the same recipe on another host: a recipe
        whose engine cannot start fails like that everywhere, a broken host fails every recipe. Of the rest, a
        recipe whose engine started on another host counts each time; one that started nowhere else counts once
        (three jobs of one recipe failing on the only host that ran it are one strike, three different recipes are
        three). The judgement is made again at each failure, so the first failure of a bad
        recipe stops counting once its second is seen elsewhere. GPU_BUSY and PORT_IN_USE are the host's whatever
        the recipe, each one a strike."""
        start_classes = [c.value for c in START_FAILURES]
        recipe_sha256 = conn.execute(select(Job.recipe_sha256).where(Job.id == job_id)).scalar_one()
        earlier = conn.execute(
            select(Run.id, Run.job_id, Run.failure_class, Job.recipe_sha256)
            .join(Job, Job.id == Run.job_id)
            .where(Run.worker_id == worker_id, Run.failure_class.in_(start_classes), Run.state == RunState.FAILED.value)
            .order_by(Run.id.desc())
            .limit(max(in_a_row - 1, 0))
        ).all()
        mine: list[tuple[int, str, str, str]] = [(-1, job_id, failure.value, recipe_sha256)]
        mine += [(r[0], r[1], r[2] or "", r[3]) for r in earlier]
        recipes = {recipe for _, _, _, recipe in mine}
        others = conn.execute(
            select(Run.id, Run.job_id, Run.worker_id, Run.failure_class, Job.recipe_sha256)
            .join(Job, Job.id == Run.job_id)
            .where(
                Job.recipe_sha256.in_(recipes),
                Run.failure_class.in_(start_classes),
                Run.state == RunState.FAILED.value,
            )
        ).all()
        twins: list[tuple[int, str, str, str, str]] = [(r[0], r[1], r[2], r[3] or "", r[4]) for r in others]
        twins.append((-1, job_id, worker_id, failure.value, recipe_sha256))  # this run, not yet marked failed
        host_classes = {FailureClass.GPU_BUSY.value, FailureClass.PORT_IN_USE.value}

        def follows_recipe(run_id: int, run_job: str, klass: str, recipe: str) -> bool:
            if klass in host_classes:
                return False
            return any(
                other_id != run_id
                and other_class == klass
                and (other_job == run_job or (other_recipe == recipe and other_worker != worker_id))
                for other_id, other_job, other_worker, other_class, other_recipe in twins
            )

        started_elsewhere = set(
            conn.execute(
                select(Job.recipe_sha256)
                .join(Run, Run.job_id == Job.id)
                .where(
                    Job.recipe_sha256.in_(recipes),
                    Run.worker_id != worker_id,
                    or_(
                        Run.state == RunState.SUCCEEDED.value,
                        and_(Run.state == RunState.FAILED.value, Run.failure_class.not_in(start_classes)),
                    ),
                )
                .distinct()
            ).scalars()
        )
        # A recipe whose engine started on another host is not to blame: each failure is a strike. One that never
        # started anywhere else counts once however many of its jobs failed here (three jobs of one recipe on the
        # only host that ran it are one strike; three different recipes are three).
        strikes = {
            recipe if klass not in host_classes and recipe not in started_elsewhere else f"run {run_id}"
            for run_id, run_job, klass, recipe in mine
            if not follows_recipe(run_id, run_job, klass, recipe)
        }
        return len(strikes)

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
        with self._write(f"cannot release job {job_id!r}") as conn:
            when = _clock(conn, now)
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
            self._finish_run(conn, job_id, attempt, RunState.RELEASED, when, message=scrub_text(reason))
        return JobState.QUEUED

    def ping(self) -> None:
        """One round trip to the database; StoreError when it does not answer."""
        with self._read("cannot reach the database") as conn:
            conn.execute(select(1))

    def reap(self, *, now: datetime | None = None) -> list[str]:
        """Take back every running job whose lease expired (database time); returns their ids.

        Each goes back to `queued` while attempts remain and ends `failed` (host_lost) once they are spent;
        its run is marked failed with host_lost. One conditional UPDATE, so concurrent reapers never reap
        the same job twice. The attempt number does not change: the late results of a reaped attempt are
        still accepted until another attempt claims the job (`complete`).
        """
        budget_left = Job.attempt - Job.releases < Job.max_attempts
        with self._read("cannot reap expired leases") as conn:
            # Most passes find nothing to reap: one round trip says so, before a transaction is opened.
            expired = select(Job.id).where(
                Job.state == JobState.RUNNING.value, Job.lease_expires_at <= self._now(conn, now)
            )
            if not conn.execute(select(expired.exists())).scalar():
                return []
        with self._write("cannot reap expired leases") as conn:
            when = _clock(conn, now)
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
                    failure_message=HOST_LOST_MESSAGE,
                    updated_at=when,
                )
                .returning(Job.id, Job.attempt)
            ).all()
            for job_id, attempt in reaped:
                self._finish_run(
                    conn, job_id, attempt, RunState.FAILED, when, FailureClass.HOST_LOST.value, HOST_LOST_MESSAGE
                )
        return sorted(job_id for job_id, _ in reaped)

    def cancel(self, job_id: str, *, now: datetime | None = None) -> JobState:
        """Cancel a queued or running job at once.

        JobNotFound for an unknown id, InvalidTransition when the job has already finished.
        """
        with self._write(f"cannot cancel job {job_id!r}") as conn:
            when = _clock(conn, now)
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
        public_key: PublicKey | None = None,
        engine_versions: Mapping[str, str] | None = None,
        now: datetime | None = None,
    ) -> None:
        """Record (or refresh) a worker daemon in the hosts table when it starts; `version` is the farm's own
        unless given. A restarted worker keeps its id, and so its quarantine and its run of failed starts.
        `public_key`: the host's signing key, kept with the row and known to the farm (not trusted by this).
        `engine_versions`: the engine versions it runs (what submit judges against)."""
        with self._write(f"cannot register worker {worker_id!r}") as conn:
            when = _clock(conn, now)
            values = {
                "worker_id": worker_id,
                "host_name": host,
                "hardware_classes": list(hardware_classes),
                "version": version or farm.__version__,
                "started_at": when,
                "last_heartbeat": when,
                "current_job_id": None,
                "phase": None,
                "engine_versions": dict(engine_versions) if engine_versions else None,
            }
            statement = upsert(conn, Host).values(**values)
            updates = {name: statement.excluded[name] for name in values if name != "worker_id"}
            conn.execute(statement.on_conflict_do_update(index_elements=["worker_id"], set_=updates))
            if public_key is not None:
                from farm.store import signatures

                signatures.register_key(conn, worker_id, public_key, when)

    def worker_heartbeat(
        self,
        worker_id: str,
        job_id: str | None = None,
        phase: str | None = None,
        *,
        broker_ok: bool | None = None,
        spool_held: int = 0,
        now: datetime | None = None,
    ) -> None:
        """Say a worker is alive (database time), what it is doing, whether its broker answers (None: no broker)
        and how many results its spool holds in memory. StoreError when it never registered."""
        with self._single_write(f"cannot record the heartbeat of worker {worker_id!r}") as conn:
            updated = conn.execute(
                update(Host)
                .where(Host.worker_id == worker_id)
                .values(
                    last_heartbeat=self._now(conn, now),
                    current_job_id=job_id,
                    phase=phase,
                    broker_ok=broker_ok,
                    spool_held=spool_held,
                )
            )
            if updated.rowcount != 1:
                raise StoreError(f"worker {worker_id!r} is not registered")

    def engine_started(self, worker_id: str) -> None:
        """The host started an engine: its run of failed starts is over."""
        with self._write(f"cannot record an engine start of worker {worker_id!r}") as conn:
            conn.execute(update(Host).where(Host.worker_id == worker_id).values(start_failures=0))

    def quarantine(self, worker_id: str, reason: str, *, now: datetime | None = None) -> None:
        """Take a host out of rotation: its claims return None until it is released."""
        with self._write(f"cannot quarantine worker {worker_id!r}") as conn:
            updated = conn.execute(
                update(Host)
                .where(Host.worker_id == worker_id)
                .values(quarantined_at=_clock(conn, now), quarantine_reason=scrub_text(reason)[:2000])
            )
            if updated.rowcount != 1:
                raise StoreError(f"worker {worker_id!r} is not registered")

    def quarantine_reason(self, worker_id: str) -> str | None:
        """Why the host is quarantined, or None while it is in rotation (or unknown)."""
        with self._read(f"cannot read worker {worker_id!r}") as conn:
            row = conn.execute(
                select(Host.quarantined_at, Host.quarantine_reason).where(Host.worker_id == worker_id)
            ).first()
        if row is None or row.quarantined_at is None:
            return None
        return row.quarantine_reason or "quarantined"

    def release_host(self, name: str) -> list[str]:
        """Return quarantined hosts to rotation (`farm workers --release`): `name` is a worker id or a host
        name. Returns the worker ids released; their runs of failed starts start again from zero."""
        with self._write(f"cannot release host {name!r}") as conn:
            released = conn.execute(
                update(Host)
                .where(or_(Host.worker_id == name, Host.host_name == name), Host.quarantined_at.is_not(None))
                .values(quarantined_at=None, quarantine_reason=None, start_failures=0)
                .returning(Host.worker_id)
            ).scalars()
            return sorted(released)

    def list_workers(self) -> list[WorkerView]:
        """Every registered worker, by id, with its quarantine."""
        with self._read("cannot list workers") as conn:
            rows = conn.execute(select(Host).order_by(Host.worker_id)).all()
        return [
            WorkerView(
                worker_id=row.worker_id,
                host_name=row.host_name,
                hardware_classes=tuple(row.hardware_classes),
                version=row.version,
                started_at=row.started_at,
                last_heartbeat=row.last_heartbeat,
                current_job_id=row.current_job_id,
                phase=row.phase,
                start_failures=row.start_failures,
                quarantined_at=row.quarantined_at,
                quarantine_reason=row.quarantine_reason,
                broker_ok=row.broker_ok,
                spool_held=row.spool_held,
                engine_versions=dict(row.engine_versions or {}),
            )
            for row in rows
        ]

    def queued_jobs(self, hardware_classes: Sequence[str], limit: int) -> list[JobView]:
        """Queued jobs of the given classes only, oldest first (the sweeper's list; ix_jobs_claim serves it)."""
        classes = list(hardware_classes)
        if not classes:
            return []
        query = (
            select(*queries._JOB_VIEW_COLUMNS)
            .join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256)
            .where(Job.state == JobState.QUEUED.value, Job.hardware_class.in_(classes))
            .order_by(Job.priority, Job.created_at, Job.id)
            .limit(limit)
        )
        with self._read("cannot list queued jobs") as conn:
            return [queries._job_view(row) for row in conn.execute(query)]

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

    # --- signatures (farm.store.signatures) -------------------------------------------------------------------

    def verify(
        self, job_ids: Sequence[str] | None = None, *, now: datetime | None = None, workers: int | None = None
    ) -> Iterator[RunCheck]:
        """Check every succeeded run (or those of `job_ids`) against its signature, as stored now; each run's
        new verdict is kept (readers' `verified`). Runs are read and checked a batch at a time, by `workers`
        processes (by default one per CPU for a large store; 1: here) reading the store, while this one keeps
        the verdicts."""
        from farm.store import signatures

        with self._read("cannot list the runs to verify") as conn:
            run_ids = signatures.succeeded_run_ids(conn, job_ids)
            keys = signatures.known_keys(conn)
        size = signatures.VERIFY_BATCH
        batches = [run_ids[start : start + size] for start in range(0, len(run_ids), size)]
        count = workers if workers is not None else signatures.verify_workers(len(run_ids))
        if count > 1 and len(batches) > 1:
            # No pooled connection crosses the fork: a child closing its copy would end the parent's session.
            self._engine.dispose()
            checked = signatures.check_in_processes(self.url, batches, keys, count)
        else:
            checked = (self._check_batch(batch, keys) for batch in batches)
        for results in checked:
            with self._write("cannot keep the verdicts of runs") as conn:
                signatures.keep_verdicts(conn, results, _clock(conn, now))
            yield from (run_check for run_check, _ in results)

    def check_pooled(self) -> list[PooledCheck]:
        """Every group of the pooled table (`group_stats`, what the leaderboard reads) that no longer matches
        the stored runs it pools, derived again in the database (farm.store.pooled)."""
        from farm.store import pooled

        with self._read("cannot check the pooled table") as conn:
            return pooled.check(conn)

    def rebuild_pooled(self) -> int:
        """Replace the pooled table with what the stored runs pool to (one transaction); returns its rows."""
        from farm.store import pooled

        with self._write("cannot rebuild the pooled table") as conn:
            return pooled.rebuild(conn)

    def _check_batch(self, batch: Sequence[int], keys: Any) -> list[tuple[RunCheck, Before]]:
        from farm.store import signatures

        with self._read("cannot verify runs") as conn:
            return signatures.check_batch(conn, batch, keys)

    def trust_key(self, what: str, *, now: datetime | None = None) -> tuple[str, list[RunCheck]]:
        """Trust a key (its fingerprint, when the farm knows it, or the key itself) and check again the runs it
        signed, which become verified where they match. Returns the key id and those runs' checks."""
        from farm.store import signatures

        with self._write("cannot trust a key") as conn:
            key_id, run_ids = signatures.trust_key(conn, what, _clock(conn, now))
        with self._read("cannot read the keys") as conn:
            keys = signatures.known_keys(conn)
        checks: list[RunCheck] = []
        for start in range(0, len(run_ids), signatures.VERIFY_BATCH):
            with self._write("cannot verify runs") as conn:
                batch = run_ids[start : start + signatures.VERIFY_BATCH]
                checks += signatures.check_runs(conn, batch, keys, _clock(conn, now))
        return key_id, checks

    def know_key(self, public_key: PublicKey, *, label: str, source: str, now: datetime | None = None) -> None:
        """Know a public key that signs runs here without a worker row (`farm bench URL` signs with this host's
        key): known, not trusted (`farm keys trust` decides); a key already known keeps its trust and label."""
        from farm.store import signatures

        with self._write("cannot record a key") as conn:
            signatures.add_key(conn, public_key, label=label, source=source, now=_clock(conn, now))

    def keys(self) -> list[KeyView]:
        """Every public key the farm knows, trusted ones first."""
        from farm.store import signatures

        with self._read("cannot read the keys") as conn:
            return signatures.list_keys(conn)

    def signature(self, job_id: str) -> StoredSignature:
        """The signature of the job's succeeded run and its last verdict; JobNotFound when it has no such run."""
        from farm.store import signatures

        with self._read(f"cannot read the signature of job {job_id!r}") as conn:
            found = signatures.stored_signature(conn, job_id)
        if found is None:
            raise JobNotFound(f"job {job_id!r} has no succeeded run")
        return found


def _write_group_stats(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add rows to `group_stats` (an upsert: count, sum, min, max and runs added to the group's key)."""
    if not rows:
        return
    postgres = conn.dialect.name == "postgresql"
    # One statement executed for many rows (not one INSERT with every row in VALUES): its compiled form is
    # cached, where a many-row VALUES is compiled afresh for each run at ~250,000 bound parameters.
    statement = upsert(conn, GroupFigureStat)
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
                "runs": GroupFigureStat.runs + excluded.runs,
                "requested": GroupFigureStat.requested + excluded.requested,
            },
        ),
        rows,
    )


GROUP_STAT_KEY = ("recipe_sha256", "hardware_class", "engine_name", "engine_version_key", "origin", "key")
"""What names one row of `group_stats` (its unique key)."""


@dataclass
class _Rows:
    """Rows of delivered runs not written yet: `complete_many` writes each table's once for all its runs (one
    executemany of each, and each group's figure added to `group_stats` once, the batch's runs pooled first)."""

    figures: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    group_stats: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    def add_group_stats(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            name = tuple(row[column] for column in GROUP_STAT_KEY)
            pooled = self.group_stats.get(name)
            if pooled is None:
                self.group_stats[name] = dict(row)
                continue
            for column in ("n", "total", "runs", "requested"):
                pooled[column] += row[column]
            pooled["min"] = min(pooled["min"], row["min"])
            pooled["max"] = max(pooled["max"], row["max"])

    def write(self, conn: Connection) -> None:
        for table, rows in ((MeasurementRow, self.figures), (Sample, self.samples), (ArtifactRow, self.artifacts)):
            if rows:
                conn.execute(insert(table), rows)
        _write_group_stats(conn, list(self.group_stats.values()))
