"""Engine creation from a URL, and the translation of driver errors into StoreError.

SQLite (the embedded default) gets WAL, a busy timeout, foreign keys, and pysqlite's own transaction
handling turned off so that SQLAlchemy's "begin" event can emit `BEGIN IMMEDIATE`: every write transaction
then takes the database's write lock up front, which makes a claim one serialised conditional update.
(SQLAlchemy's SQLite dialect silently drops `with_for_update`, so nothing here relies on it there.)
Read-only transactions opened with `READ_ONLY` emit a plain deferred `BEGIN` so that readers do not queue
behind writers.

PostgreSQL goes through psycopg 3; a bare `postgresql://` URL is given that driver.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from farm.errors import StoreError

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for the write lock before failing: far above any claim (2-5 ms measured)."""

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


def create_store_engine(url: str) -> Engine:
    """An engine for the farm's store, configured for claims as described in the module docstring."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    try:
        return create_engine(parsed, pool_pre_ping=True)
    except (exc.SQLAlchemyError, ImportError) as error:
        raise StoreError(f"cannot create an engine for {parsed.render_as_string(hide_password=True)}") from error


def _sqlite_engine(url: URL) -> Engine:
    database = url.database
    in_memory = not database or database == ":memory:" or database.startswith("file::memory:")
    if in_memory:
        # One connection shared by every user, or each connection would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        assert database is not None
        try:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the directory of the SQLite database {database}") from error
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Turn off pysqlite's own BEGIN handling; the "begin" listener below emits the BEGIN we want.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
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
    """Raise StoreError for any SQLAlchemy or driver error inside the block; farm errors pass through."""
    try:
        yield
    except exc.SQLAlchemyError as error:
        detail = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise StoreError(f"{what}: {detail}") from error
