"""Engine creation from a URL, and the translation of driver errors into StoreError.

SQLite (the embedded default) gets WAL, a busy timeout, foreign keys, and pysqlite's own transaction
handling turned off so that SQLAlchemy's "begin" event can emit `BEGIN IMMEDIATE`: every write transaction
then takes the database's write lock up front, which makes a claim one serialised conditional update.
(SQLAlchemy's SQLite dialect silently drops `with_for_update`, so nothing here relies on it there.)
Read-only transactions opened with `READ_ONLY` emit a plain deferred `BEGIN` so that readers do not queue
behind writers.

PostgreSQL goes through psycopg 3; a bare `postgresql://` URL is given that driver.

PostgreSQL refuses a NUL character in text and in JSONB, and an engine's log or an error message can hold one:
JSON values are serialised with every NUL made U+FFFD (`json_text`), as text columns are (models.StoredText), on
both databases alike. A write the database answers with a refusal of its content (an integrity or data error)
raises `StoreRefused`: writing the same again gets the same answer, unlike an outage.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from farm.errors import StoreError, StoreRefused
from farm.logs import get_logger

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert

log = get_logger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for the write lock before failing: far above any claim (2-5 ms measured)."""

FIRST_OPEN_DEADLINE_S = 60.0
"""How long the first open of a SQLite store keeps retrying SQLITE_BUSY (the WAL switch, the first read of the
schema revision, the first migration): far above what a few dozen processes opening one new file take."""

T = TypeVar("T")

_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
"""`\\u0000` in JSON text where it escapes a NUL (not where an escaped backslash is followed by `u0000`)."""


def json_text(value: Any) -> str:
    """A JSON column's value as JSON text, every NUL character in it made U+FFFD (see the module docstring)."""
    text = json.dumps(value)
    return _ESCAPED_NUL.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


READ_ONLY = {"farm_read_only": True}
"""Execution options for a connection that only reads (SQLite: a deferred BEGIN, not BEGIN IMMEDIATE)."""


def normalise_url(url: str) -> URL:
    """The URL with its driver made explicit: `postgresql://` means psycopg 3, `sqlite://` means pysqlite."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        raise StoreError(f"not a database URL: {url!r}") from error
    if parsed.drivername in ("postgresql", "postgres"):  # "postgres://" is what Heroku-style URLs say
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend not in ("postgresql", "sqlite"):
        raise StoreError(f"unsupported database {backend!r} in {parsed.render_as_string(hide_password=True)}")
    return parsed


def is_sqlite(url: str | URL) -> bool:
    """Whether a URL names a SQLite database."""
    parsed = make_url(url) if isinstance(url, str) else url
    return parsed.get_backend_name() == "sqlite"


POSTGRES_WORK_MEM = "64MB"
"""Sort and hash memory of each PostgreSQL session of the farm. Ranking entries under a time or job filter pools
every measurement of the selected runs in one GROUP BY (about 100 MB of rows at 10,000 runs): with PostgreSQL's
default of 4 MB it spills to disk (when a whole export was pooled that way, 5.6 s of database time instead of 4.1
at 10,000 runs). A session takes it only when a query needs it."""


POOL_SIZE = 2
"""PostgreSQL connections a farm process holds at most (no overflow): a worker's job thread (or Celery's task
thread) and its sweeper each have one, and the heartbeat waits a few milliseconds for one. So a fleet of N
workers holds at most 2 N connections; PostgreSQL's default max_connections of 100 takes about 45 workers beside
the readers, and a larger fleet goes through a pooler (PgBouncer in transaction mode; docs/farm-mode.md)."""

POOL_TIMEOUT_S = 30.0
"""How long a thread waits for one of the pool's connections before its call fails as a StoreError."""

CONNECT_TIMEOUT_S = 10
"""A new PostgreSQL connection gives up after this long (libpq's connect_timeout): a partition that drops
packets costs this, not the kernel's two minutes of SYN retries."""

TCP_KEEPALIVE = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
"""TCP keepalives on every PostgreSQL connection: a connection whose peer vanished without closing it (a
partition, a host that lost power) fails within about 25 s instead of waiting on a reply forever."""

PING_AFTER_IDLE_S = 1.0
"""A pooled PostgreSQL connection that lay idle for longer than this is pinged (one round trip, in autocommit) as
it is taken from the pool, and replaced by a new one when the ping fails: a database, pooler or network that
dropped it meanwhile costs no call. One used within this long is handed out as it is. A ping on every checkout
(SQLAlchemy's pool_pre_ping) put one more round trip in front of every claim, and a claim is one round trip
(farm.store.claims): a worker that claims its next job the moment its last one is written reuses the connection
it wrote with (the pool hands out the most recently used one first). A call that meets a connection the
database dropped within the last second fails as a call during an outage does (StoreError, which every caller
handles), and SQLAlchemy then replaces every connection of the pool."""

_USED_AT = "farm_used_at"
"""Key of a pooled connection's `info`: when it last went back to the pool (time.monotonic)."""


def create_store_engine(url: str, *, pool_size: int = POOL_SIZE) -> Engine:
    """An engine for the farm's store, configured for claims as described in the module docstring; on
    PostgreSQL at most `pool_size` connections (POOL_SIZE says why 2), each with bounded waits."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    try:
        engine = create_engine(
            parsed,
            pool_use_lifo=True,  # the connection used last, so a claim right after a write needs no ping
            pool_size=pool_size,
            max_overflow=0,
            pool_timeout=POOL_TIMEOUT_S,
            json_serializer=json_text,
            # No server-side prepared statements (psycopg prepares a query run 5 times on a connection): behind
            # PgBouncer in transaction mode a statement prepared on one server connection is unknown on the next
            # (docs/farm-mode.md). The farm runs each query rarely on a connection, so nothing is lost.
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "prepare_threshold": None, **TCP_KEEPALIVE},
        )
    except (exc.SQLAlchemyError, ImportError) as error:
        raise StoreError(f"cannot create an engine for {parsed.render_as_string(hide_password=True)}") from error

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET work_mem = '{POSTGRES_WORK_MEM}'")
        finally:
            cursor.close()
        dbapi_connection.commit()  # a session setting: kept past the pool's rollback on return
        record.info[_USED_AT] = time.monotonic()  # it just answered

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_USED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        used_at = record.info.get(_USED_AT)
        if used_at is not None and time.monotonic() - used_at <= PING_AFTER_IDLE_S:
            return
        autocommit = dbapi_connection.autocommit
        try:
            dbapi_connection.autocommit = True  # the ping opens no transaction: one round trip
            dbapi_connection.execute("SELECT 1")
            dbapi_connection.autocommit = autocommit
        except Exception as error:  # whatever the driver raised, this connection is no use: the pool takes a new one
            raise exc.DisconnectionError(f"a pooled connection did not answer its ping: {error}") from error

    return engine


def _sqlite_engine(url: URL) -> Engine:
    database = url.database
    in_memory = not database or database == ":memory:" or database.startswith("file::memory:")
    if in_memory:
        # One connection shared by every user, or each connection would see its own empty database.
        engine = create_engine(
            url, poolclass=StaticPool, connect_args={"check_same_thread": False}, json_serializer=json_text
        )
    else:
        assert database is not None
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the directory of the SQLite database {database}") from error
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, json_serializer=json_text)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Turn off pysqlite's own BEGIN handling; the "begin" listener below emits the BEGIN we want.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            if not in_memory:
                # Switching a new file to WAL needs the file to itself for an instant; a concurrent first open
                # can get SQLITE_BUSY at once, without the busy handler (FACTS: 7 of 770 concurrent opens).
                retry_busy(lambda: cursor.execute("PRAGMA journal_mode=WAL"), "switch to WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get("farm_read_only"):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def translate_errors(what: str) -> Iterator[None]:
    """Raise StoreError for any SQLAlchemy or driver error inside the block (StoreRefused where the database
    refused the content: an integrity or data error); farm errors pass through."""
    try:
        yield
    except exc.SQLAlchemyError as error:
        detail = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        if isinstance(error, exc.IntegrityError | exc.DataError):
            raise StoreRefused(f"{what}: {detail}") from error
        raise StoreError(f"{what}: {detail}") from error


def is_busy(error: BaseException | None) -> bool:
    """Whether an error, or one it was raised from (a StoreError from translate_errors, SQLAlchemy's wrapper),
    is SQLite's "database is locked" / busy."""
    while error is not None:
        orig = getattr(error, "orig", error)
        if isinstance(orig, sqlite3.OperationalError):
            text = str(orig).lower()
            return "database is locked" in text or "busy" in text
        error = error.__cause__
    return False


def retry_busy(action: Callable[[], T], what: str, *, deadline_s: float = FIRST_OPEN_DEADLINE_S) -> T:
    """Run `action` (`what` names it in the log), again after a short random pause while it fails with
    SQLITE_BUSY, up to `deadline_s`; then the last error goes up."""
    deadline = time.monotonic() + deadline_s
    pause = 0.005
    while True:
        try:
            return action()
        except (sqlite3.OperationalError, exc.OperationalError, StoreError) as error:
            if not is_busy(error) or time.monotonic() + pause > deadline:
                raise
            log.info("store.busy_retry", what=what, pause_s=round(pause, 3))
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.5)


def upsert(conn: Connection, table: Any) -> PostgresInsert | SqliteInsert:
    """An INSERT that can say ON CONFLICT, in this connection's dialect. The dialect module is imported here, on
    first use: SQLAlchemy's PostgreSQL dialect would otherwise cost every CLI command's start."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)
