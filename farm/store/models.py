"""The ORM tables of the store. These classes never leave farm.store: callers get farm.domain records.

The Alembic migrations in farm/store/migrations create exactly these tables; a test compares the two.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from farm.store import params_codec

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names that are the same on every database, so migrations can name them."""

JSONType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
"""JSON on SQLite, JSONB on PostgreSQL. A Python None is stored as SQL NULL, not as JSON 'null'."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime that round-trips on both databases.

    PostgreSQL stores `timestamptz`; SQLite has no time zones, so the value is stored as naive UTC text (which
    sorts and compares correctly) and given back its UTC zone when read. Naive datetimes are refused on write.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store only takes timezone-aware UTC times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CompactParams(TypeDecorator[dict[str, Any]]):
    """A figure's parameters, stored compressed (farm.store.params_codec); JSON from before 0002 still reads."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: dict[str, Any] | None, dialect: Dialect) -> bytes | None:
        return None if value is None else params_codec.encode(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> dict[str, Any] | None:
        return None if value is None else params_codec.decode(value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Host(Base):
    """A worker daemon: what it serves and what it is doing now."""

    __tablename__ = "hosts"

    worker_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    host_name: Mapped[str] = mapped_column(String(255))
    hardware_classes: Mapped[list[str]] = mapped_column(JSONType)
    version: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_heartbeat: Mapped[datetime] = mapped_column(UTCDateTime)
    current_job_id: Mapped[str | None] = mapped_column(String(64))
    phase: Mapped[str | None] = mapped_column(String(32))
    start_failures: Mapped[int] = mapped_column(Integer, server_default="0")
    """Engine starts that failed in a row on this host (reset by a start that succeeds)."""
    quarantined_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """Set when the host stopped claiming because its engine keeps failing to start; None while in rotation."""
    quarantine_reason: Mapped[str | None] = mapped_column(Text)


class RecipeRow(Base):
    """A recipe, stored once per content: a changed recipe under the same id is a new row."""

    __tablename__ = "recipes"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    recipe_id: Mapped[str] = mapped_column(String(255), index=True)
    source_format: Mapped[str] = mapped_column(String(64))
    source_sha256: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[str] = mapped_column(String(255))
    hardware_id: Mapped[str] = mapped_column(String(255))
    hardware_count: Mapped[int] = mapped_column(Integer)
    engine_name: Mapped[str] = mapped_column(String(64))
    engine_version: Mapped[str | None] = mapped_column(Text)  # builds carry long local versions (72 chars in the seed)
    document: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Job(Base):
    """One sweep of one recipe on one hardware class. The row is the only truth about the job."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_claim", "state", "hardware_class", "priority", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    recipe_sha256: Mapped[str] = mapped_column(ForeignKey("recipes.sha256"))
    sweep_name: Mapped[str] = mapped_column(String(255))
    spec_sha256: Mapped[str] = mapped_column(String(64))
    plan: Mapped[dict[str, Any]] = mapped_column(JSONType)
    hardware_class: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    releases: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    phase: Mapped[str | None] = mapped_column(String(32))
    progress: Mapped[float | None] = mapped_column(Float)
    failure_class: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(Text)
    simulated: Mapped[bool] = mapped_column(Boolean)
    cancel_requested: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    retry_after: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """A requeued job is not claimed before this (database time): the back-off of a retry."""


class Run(Base):
    """One attempt of a job: who ran it, how it ended, and the provenance of its results."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("job_id", "attempt"), Index("ix_runs_job_id_worker_id", "job_id", "worker_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    failure_class: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    failed_requests: Mapped[int | None] = mapped_column(Integer)
    total_requests: Mapped[int | None] = mapped_column(Integer)


class MeasurementRow(Base):
    """One figure of a run with the summary of its repeats."""

    __tablename__ = "measurements"
    __table_args__ = (UniqueConstraint("run_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(64))
    point: Mapped[str | None] = mapped_column(String(64))
    """The key's middle part (workload, prompt length, level, card), so SQL can pick a point without parsing."""
    workload: Mapped[str | None] = mapped_column(String(64))
    metric: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(CompactParams)
    values: Mapped[list[float]] = mapped_column(JSONType)
    n: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float] = mapped_column(Float)
    median: Mapped[float] = mapped_column(Float)
    min: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    stdev: Mapped[float] = mapped_column(Float)
    spread: Mapped[float] = mapped_column(Float)
    requested_repeats: Mapped[int | None] = mapped_column(Integer)


class Sample(Base):
    """The raw per-request records of one repeat of one figure.

    New rows keep them in `data`, compact (farm.store.sample_codec: every chunk timestamp as a delta, packed and
    compressed); rows written before revision 0002 have them as JSON in `samples`. Exactly one of the two is set.
    """

    __tablename__ = "samples"
    __table_args__ = (UniqueConstraint("run_id", "figure_key", "repeat_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    figure_key: Mapped[str] = mapped_column(String(255))
    repeat_index: Mapped[int] = mapped_column(Integer)
    samples: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType)
    data: Mapped[bytes | None] = mapped_column(LargeBinary)


class ArtifactRow(Base):
    """A file kept with a run, such as the engine log."""

    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    media_type: Mapped[str] = mapped_column(String(128))
    content: Mapped[str] = mapped_column(Text)


class RunSummary(Base):
    """One succeeded run as every reader of results sees it, written in the same transaction as its results.

    It holds the run's identity (recipe, model, hardware, engine read from the provenance, origin) and the short
    provenance, in indexed columns: leaderboards, aggregates, exports and comparisons are SQL over this table and
    `measurements`, never a parse of every run's provenance JSON. Only succeeded runs of succeeded jobs have a row.
    """

    __tablename__ = "run_summaries"
    __table_args__ = (
        Index(
            "ix_run_summaries_group",
            "origin",
            "recipe_sha256",
            "hardware_class",
            "engine_name",
            "engine_version",
        ),
        Index("ix_run_summaries_finished_at", "finished_at"),
        Index("ix_run_summaries_job_id", "job_id"),
        Index("ix_run_summaries_recipe_id", "recipe_id"),
    )

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str] = mapped_column(String(200))
    sweep_name: Mapped[str] = mapped_column(String(255))
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    recipe_id: Mapped[str] = mapped_column(String(255))
    recipe_sha256: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[str] = mapped_column(String(255))
    model_name: Mapped[str] = mapped_column(String(255))
    """The model id's last part, lower case (the `--model` filter matches it)."""
    hardware_id: Mapped[str] = mapped_column(String(255))
    hardware_count: Mapped[int] = mapped_column(Integer)
    hardware_class: Mapped[str] = mapped_column(String(255))
    engine_name: Mapped[str] = mapped_column(String(64))
    engine_version: Mapped[str | None] = mapped_column(String(255))
    origin: Mapped[str] = mapped_column(String(16))
    """launched, simulated or endpoint (farm.domain.Origin)."""
    simulated: Mapped[bool] = mapped_column(Boolean)
    requested_repeats: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str | None] = mapped_column(String(255))
    provenance_summary: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The short provenance (host, GPUs, driver, engine image, farm commit, cache state): what exports show."""


class GroupFigureStat(Base):
    """One figure key of one sweep group (recipe content × hardware class × engine version × origin), pooled
    over the group's succeeded runs (count, sum, min, max): kept up to date in the transaction that stores each
    run.

    The leaderboard and the ranks of aggregated entries read this table alone (one row per group and key,
    whatever the number of runs) unless a filter selects runs by time or job, when they pool `measurements` over
    `run_summaries` instead.
    """

    __tablename__ = "group_stats"
    __table_args__ = (
        UniqueConstraint(
            "recipe_sha256",
            "hardware_class",
            "engine_name",
            "engine_version_key",
            "origin",
            "key",
            name=conv("uq_group_stats_group_figure"),  # the convention's name passes PostgreSQL's 63 characters
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    recipe_id: Mapped[str] = mapped_column(String(255))
    recipe_sha256: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[str] = mapped_column(String(255))
    model_name: Mapped[str] = mapped_column(String(255))
    hardware_id: Mapped[str] = mapped_column(String(255))
    hardware_class: Mapped[str] = mapped_column(String(255))
    engine_name: Mapped[str] = mapped_column(String(64))
    engine_version: Mapped[str | None] = mapped_column(String(255))
    engine_version_key: Mapped[str] = mapped_column(String(255))
    """`engine_version`, or '' for none: a unique key needs a value that is never NULL."""
    origin: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(64))
    point: Mapped[str] = mapped_column(String(64))
    metric: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(32))
    n: Mapped[int] = mapped_column(Integer)
    total: Mapped[float] = mapped_column(Float)
    min: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    runs: Mapped[int] = mapped_column(Integer)
    requested: Mapped[int] = mapped_column(Integer)
