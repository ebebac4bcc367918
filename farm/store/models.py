"""The tables of the store. These classes never leave farm.store: callers get farm.domain records.

Each class declares one SQLAlchemy Core table: its attributes are the table's columns (`Run.job_id`), and the
class itself stands for the table in `select(Run)`, `insert(Run)` and `update(Run)`. The store uses no ORM
session, so the ORM (a fifth of a CLI command's start) is never imported.

The Alembic migrations in farm/store/migrations create exactly these tables; a test compares the two.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.sql.elements import KeyedColumnElement, conv
from sqlalchemy.types import TypeEngine

from farm.store import params_codec

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names that are the same on every database, so migrations can name them."""


class JSONValue(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL. A Python None is stored as SQL NULL, not as JSON 'null'.

    PostgreSQL's type is chosen when a PostgreSQL connection first needs it: importing SQLAlchemy's PostgreSQL
    dialect costs a CLI command a twentieth of a second, and the embedded store never needs it."""

    impl = JSON(none_as_null=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


JSONType: TypeEngine[Any] = JSONValue()


def _without_nul(value: str | None) -> str | None:
    return value.replace("\x00", "\ufffd") if value is not None and "\x00" in value else value


class FigureValues(TypeDecorator[list[float]]):
    """A figure's values, kept as the text farm-run/v2 signs (farm.signing.canonical.values_text: canonical JSON,
    `[270.0,276.5]`) on both databases, so a check hashes the text the database hands back and decodes nothing.
    Text written before (SQLite's `[270.0, 276.5]`, PostgreSQL's jsonb, made text by 0009) still reads."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        from farm.signing.canonical import values_text

        return None if value is None else values_text(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> list[float] | None:
        return None if value is None else list(json.loads(value))


class StoredText(TypeDecorator[str]):
    """Free text (a failure message, an engine log): every NUL character made U+FFFD on write, on both databases
    alike, since PostgreSQL refuses NUL in text (farm.store.db's docstring)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _without_nul(value)


class StoredString(TypeDecorator[str]):
    """A bounded string an engine or a host reports (its version, the host name): NUL made U+FFFD, as StoredText."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return _without_nul(value)


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


Col = KeyedColumnElement
"""How a column attribute is typed. A `Column` is one, and the name keeps type checkers from reading class
access as SQLAlchemy 2.1's `TypedColumns` descriptors, which type it as unusable outside `table.c`."""

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""Every table of the store (what the migrations are compared against)."""


class Base:
    """A table declared as a class: each `Column` attribute becomes a column of that name, `__table_args__` adds
    constraints and indexes, and the class can be given wherever SQLAlchemy takes a table."""

    __tablename__: ClassVar[str]
    __table__: ClassVar[Table]
    __table_args__: ClassVar[tuple[Any, ...]] = ()
    metadata: ClassVar[MetaData] = metadata

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        columns = []
        for name, value in vars(cls).items():
            if isinstance(value, Column):
                value.key = name
                if value.name is None:
                    value.name = name
                columns.append(value)
        cls.__table__ = Table(cls.__tablename__, metadata, *columns, *cls.__table_args__)

    @classmethod
    def __clause_element__(cls) -> Table:
        return cls.__table__


class Host(Base):
    """A worker daemon: what it serves and what it is doing now."""

    __tablename__ = "hosts"

    worker_id: Col[str] = Column(String(200), primary_key=True)
    host_name: Col[str] = Column(String(255), nullable=False)
    hardware_classes: Col[list[str]] = Column(JSONType, nullable=False)
    version: Col[str | None] = Column(String(64))
    started_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    last_heartbeat: Col[datetime] = Column(UTCDateTime, nullable=False)
    current_job_id: Col[str | None] = Column(String(64))
    phase: Col[str | None] = Column(String(32))
    start_failures: Col[int] = Column(Integer, server_default="0", nullable=False)
    """Engine starts that failed in a row on this host (reset by a start that succeeds)."""
    quarantined_at: Col[datetime | None] = Column(UTCDateTime)
    """Set when the host stopped claiming because its engine keeps failing to start; None while in rotation."""
    quarantine_reason: Col[str | None] = Column(StoredText)
    key_id: Col[str | None] = Column(String(64))
    """The fingerprint of the host's Ed25519 key (farm.signing.keys), registered at the worker's start."""
    public_key: Col[str | None] = Column(String(64))
    """The host's public key, base64 of its 32 raw bytes (never the private key, which stays on the host)."""
    broker_ok: Col[bool | None] = Column(Boolean)
    """The worker's last check of its broker (None: embedded mode); False: it cannot receive messages."""
    spool_held: Col[int] = Column(Integer, server_default="0", nullable=False)
    """Results held in the worker's memory because its spool's disk refused them."""
    engine_versions: Col[dict[str, str] | None] = Column(JSONType)
    """Canonical engine name -> the version the worker runs (read from its executable at start, or its
    profile's); what submit judges a recipe against."""


class RecipeRow(Base):
    """A recipe, stored once per content: a changed recipe under the same id is a new row."""

    __tablename__ = "recipes"

    sha256: Col[str] = Column(String(64), primary_key=True)
    recipe_id: Col[str] = Column(String(255), index=True, nullable=False)
    source_format: Col[str] = Column(String(64), nullable=False)
    source_sha256: Col[str] = Column(String(64), nullable=False)
    model_id: Col[str] = Column(String(255), nullable=False)
    hardware_id: Col[str] = Column(String(255), nullable=False)
    hardware_count: Col[int] = Column(Integer, nullable=False)
    engine_name: Col[str] = Column(String(64), nullable=False)
    engine_version: Col[str | None] = Column(Text)  # builds carry long local versions (72 chars in the seed)
    document: Col[dict[str, Any]] = Column(JSONType, nullable=False)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)


class Job(Base):
    """One sweep of one recipe on one hardware class. The row is the only truth about the job."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_claim", "state", "hardware_class", "priority", "created_at"),)

    id: Col[str] = Column(String(64), primary_key=True)
    recipe_sha256: Col[str] = Column(ForeignKey("recipes.sha256"), nullable=False)
    sweep_name: Col[str] = Column(String(255), nullable=False)
    spec_sha256: Col[str] = Column(String(64), nullable=False)
    plan: Col[dict[str, Any]] = Column(JSONType, nullable=False)
    hardware_class: Col[str] = Column(String(255), nullable=False)
    state: Col[str] = Column(String(16), nullable=False)
    priority: Col[int] = Column(Integer, nullable=False)
    attempt: Col[int] = Column(Integer, nullable=False)
    max_attempts: Col[int] = Column(Integer, nullable=False)
    releases: Col[int] = Column(Integer, nullable=False)
    owner: Col[str | None] = Column(String(200))
    lease_expires_at: Col[datetime | None] = Column(UTCDateTime)
    phase: Col[str | None] = Column(String(32))
    progress: Col[float | None] = Column(Float)
    failure_class: Col[str | None] = Column(String(64))
    failure_message: Col[str | None] = Column(StoredText)
    simulated: Col[bool] = Column(Boolean, nullable=False)
    cancel_requested: Col[bool] = Column(Boolean, nullable=False)
    created_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    updated_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    started_at: Col[datetime | None] = Column(UTCDateTime)
    finished_at: Col[datetime | None] = Column(UTCDateTime)
    retry_after: Col[datetime | None] = Column(UTCDateTime)
    """A requeued job is not claimed before this (database time): the back-off of a retry."""


class Run(Base):
    """One attempt of a job: who ran it, how it ended, and the provenance of its results."""

    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("job_id", "attempt"), Index("ix_runs_job_id_worker_id", "job_id", "worker_id"))

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    job_id: Col[str] = Column(ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False)
    attempt: Col[int] = Column(Integer, nullable=False)
    worker_id: Col[str] = Column(String(200), nullable=False)
    state: Col[str] = Column(String(16), nullable=False)
    started_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    finished_at: Col[datetime | None] = Column(UTCDateTime)
    failure_class: Col[str | None] = Column(String(64))
    failure_message: Col[str | None] = Column(StoredText)
    provenance: Col[dict[str, Any] | None] = Column(JSONType)
    failed_requests: Col[int | None] = Column(Integer)
    total_requests: Col[int | None] = Column(Integer)


class MeasurementRow(Base):
    """One figure of a run with the summary of its repeats."""

    __tablename__ = "measurements"
    __table_args__ = (UniqueConstraint("run_id", "key"),)

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    run_id: Col[int] = Column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    key: Col[str] = Column(String(255), nullable=False)
    kind: Col[str] = Column(String(64), nullable=False)
    point: Col[str | None] = Column(String(64))
    """The key's middle part (workload, prompt length, level, card), so SQL can pick a point without parsing."""
    workload: Col[str | None] = Column(String(64))
    metric: Col[str] = Column(String(64), nullable=False)
    unit: Col[str] = Column(String(32), nullable=False)
    params: Col[dict[str, Any]] = Column(CompactParams, nullable=False)
    values: Col[list[float]] = Column(FigureValues, nullable=False)
    n: Col[int] = Column(Integer, nullable=False)
    mean: Col[float] = Column(Float, nullable=False)
    median: Col[float] = Column(Float, nullable=False)
    min: Col[float] = Column(Float, nullable=False)
    max: Col[float] = Column(Float, nullable=False)
    stdev: Col[float] = Column(Float, nullable=False)
    spread: Col[float] = Column(Float, nullable=False)
    requested_repeats: Col[int | None] = Column(Integer)


class Sample(Base):
    """The raw per-request records of one repeat of one figure.

    New rows keep them in `data`, compact (farm.store.sample_codec: every chunk timestamp as a delta, packed and
    compressed); rows written before revision 0002 have them as JSON in `samples`. Exactly one of the two is set.
    """

    __tablename__ = "samples"
    __table_args__ = (UniqueConstraint("run_id", "figure_key", "repeat_index"),)

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    run_id: Col[int] = Column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    figure_key: Col[str] = Column(String(255), nullable=False)
    repeat_index: Col[int] = Column(Integer, nullable=False)
    samples: Col[list[dict[str, Any]] | None] = Column(JSONType)
    data: Col[bytes | None] = Column(LargeBinary)


class ArtifactRow(Base):
    """A file kept with a run, such as the engine log."""

    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    run_id: Col[int] = Column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    name: Col[str] = Column(StoredString(255), nullable=False)
    media_type: Col[str] = Column(String(128), nullable=False)
    content: Col[str] = Column(StoredText, nullable=False)


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

    run_id: Col[int] = Column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    job_id: Col[str] = Column(String(64), nullable=False)
    attempt: Col[int] = Column(Integer, nullable=False)
    worker_id: Col[str] = Column(String(200), nullable=False)
    sweep_name: Col[str] = Column(String(255), nullable=False)
    finished_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    recipe_id: Col[str] = Column(String(255), nullable=False)
    recipe_sha256: Col[str] = Column(String(64), nullable=False)
    model_id: Col[str] = Column(String(255), nullable=False)
    model_name: Col[str] = Column(String(255), nullable=False)
    """The model id's last part, lower case (the `--model` filter matches it)."""
    hardware_id: Col[str] = Column(String(255), nullable=False)
    hardware_count: Col[int] = Column(Integer, nullable=False)
    hardware_class: Col[str] = Column(String(255), nullable=False)
    engine_name: Col[str] = Column(String(64), nullable=False)
    engine_version: Col[str | None] = Column(StoredString(255))
    origin: Col[str] = Column(String(16), nullable=False)
    """launched, simulated or endpoint (farm.domain.Origin)."""
    simulated: Col[bool] = Column(Boolean, nullable=False)
    requested_repeats: Col[int | None] = Column(Integer)
    host: Col[str | None] = Column(StoredString(255))
    provenance_summary: Col[dict[str, Any]] = Column(JSONType, nullable=False)
    """The short provenance (host, GPUs, driver, engine image, farm commit, cache state): what exports show."""
    verified: Col[bool] = Column(Boolean, nullable=False, server_default="0")
    """Signed by a trusted key and matching its signature at its last check (run_signatures.status): what
    readers mark, kept here so no reader checks a signature."""
    validated: Col[bool] = Column(Boolean, nullable=False, server_default="0")
    """Verified, and its recipe and provenance meet the registry's rules (farm.signing.validated), at its last
    check: kept with `verified`, for the same reason."""


class GroupFigureStat(Base):
    """One figure key of one sweep group (recipe content × hardware class × engine version × origin), pooled
    over the group's succeeded runs (count, sum, min, max): kept up to date in the transaction that stores each
    run.

    The leaderboard and the ranks of aggregated entries read this table alone (one row per group and key,
    whatever the number of runs) unless a filter selects runs by time or job, when they pool `measurements` over
    `run_summaries` instead. No signature covers it: a whole-store `farm verify` derives it again from the runs
    and names each group that differs (farm.store.pooled); `farm verify --repair-pooled` rebuilds it.
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

    id: Col[int] = Column(Integer, primary_key=True, autoincrement=True)
    recipe_id: Col[str] = Column(String(255), nullable=False)
    recipe_sha256: Col[str] = Column(String(64), nullable=False)
    model_id: Col[str] = Column(String(255), nullable=False)
    model_name: Col[str] = Column(String(255), nullable=False)
    hardware_id: Col[str] = Column(String(255), nullable=False)
    hardware_class: Col[str] = Column(String(255), nullable=False)
    engine_name: Col[str] = Column(String(64), nullable=False)
    engine_version: Col[str | None] = Column(StoredString(255))
    engine_version_key: Col[str] = Column(StoredString(255), nullable=False)
    """`engine_version`, or '' for none: a unique key needs a value that is never NULL."""
    origin: Col[str] = Column(String(16), nullable=False)
    key: Col[str] = Column(String(255), nullable=False)
    kind: Col[str] = Column(String(64), nullable=False)
    point: Col[str] = Column(String(64), nullable=False)
    metric: Col[str] = Column(String(64), nullable=False)
    unit: Col[str] = Column(String(32), nullable=False)
    n: Col[int] = Column(Integer, nullable=False)
    total: Col[float] = Column(Float, nullable=False)
    min: Col[float] = Column(Float, nullable=False)
    max: Col[float] = Column(Float, nullable=False)
    runs: Col[int] = Column(Integer, nullable=False)
    requested: Col[int] = Column(Integer, nullable=False)


class SigningKey(Base):
    """A public key this farm knows: registered by one of its workers, or carried in by a bundle. Only keys marked
    trusted (`farm keys trust`) make runs verified."""

    __tablename__ = "signing_keys"

    key_id: Col[str] = Column(String(64), primary_key=True)
    public_key: Col[str] = Column(String(64), nullable=False)
    trusted: Col[bool] = Column(Boolean, nullable=False, server_default="0")
    label: Col[str | None] = Column(StoredString(255))
    """Who holds it: the worker that registered it, or the farm and host a bundle named."""
    source: Col[str] = Column(String(16), nullable=False)
    """worker, bundle or file."""
    first_seen_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    trusted_at: Col[datetime | None] = Column(UTCDateTime)


class RunSignatureRow(Base):
    """The signature of one run, made by the host that measured it, and what the last check of it found."""

    __tablename__ = "run_signatures"
    __table_args__ = (Index("ix_run_signatures_key_id", "key_id"),)

    run_id: Col[int] = Column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key_id: Col[str] = Column(String(64), nullable=False)
    scheme: Col[str] = Column(String(32), nullable=False)
    signature: Col[str] = Column(String(128), nullable=False)
    digest: Col[str] = Column(String(64), nullable=False)
    figures_sha256: Col[str] = Column(String(64), nullable=False)
    samples_sha256: Col[str] = Column(String(64), nullable=False)
    provenance_sha256: Col[str] = Column(String(64), nullable=False)
    artifacts_sha256: Col[str | None] = Column(String(64))
    """None: signed before artifacts were (the signature covers none)."""
    status: Col[str] = Column(String(16), nullable=False)
    """farm.signing.runs.Verdict of the last check (delivery, `farm verify`, import, `farm keys trust`)."""
    checked_at: Col[datetime] = Column(UTCDateTime, nullable=False)
    origin_farm: Col[str | None] = Column(StoredString(255))
    """The farm a bundle said the run came from; None for a run measured by this farm's own workers."""
    imported_at: Col[datetime | None] = Column(UTCDateTime)
