"""Alembic's entry point for the farm's migrations.

Programmatic use (farm.store.migrate) hands over an open connection in `config.attributes["connection"]`, so
the migration runs inside the caller's transaction on an engine configured by farm.store.db. From the command
line, the database comes from FARM_DATABASE_URL (or the embedded SQLite default).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from farm.settings import Settings
from farm.store.db import create_store_engine
from farm.store.models import Base


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_store_engine(Settings().resolved_database_url)
    try:
        with engine.begin() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run `farm db upgrade`")
run_migrations_online()
