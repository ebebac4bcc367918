"""Store values that need no database: URL handling, recipe hashes, job ids, UTC datetimes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Dialect, create_engine

from farm.errors import StoreError
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.store import new_job_id, recipe_sha256
from farm.store.db import normalise_url
from farm.store.models import UTCDateTime


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
        ("sqlite:///tmp/farm.db", "sqlite"),
        ("sqlite://", "sqlite"),
    ],
)
def test_normalise_url_names_the_driver(url: str, driver: str) -> None:
    """A bare PostgreSQL URL gets psycopg 3; SQLite keeps pysqlite."""
    assert normalise_url(url).drivername == driver


@pytest.mark.parametrize("url", ["mysql://root@h/db", "not a url"])
def test_normalise_url_refuses_other_databases(url: str) -> None:
    """Only SQLite and PostgreSQL are supported."""
    with pytest.raises(StoreError):
        normalise_url(url)


def _recipe(notes: str | None = None) -> Recipe:
    return Recipe(
        id="seed",
        model_id="m",
        hardware_id="h",
        hardware_count=2,
        engine=Engine(name="vllm"),
        argv=("vllm", "serve", "m"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
        notes=notes,
    )


def test_recipe_hash_follows_content() -> None:
    """Equal recipes hash alike; any change of content changes the hash."""
    assert recipe_sha256(_recipe()) == recipe_sha256(_recipe())
    assert recipe_sha256(_recipe()) != recipe_sha256(_recipe(notes="x"))
    assert re.fullmatch(r"[0-9a-f]{64}", recipe_sha256(_recipe()))


def test_job_ids_are_short_and_distinct() -> None:
    """Job ids read like j-0123456789 and do not repeat."""
    ids = {new_job_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"j-[0-9a-f]{10}", job_id) for job_id in ids)


def _dialect(url: str) -> Dialect:
    engine = create_engine(url)  # no connection is made: only the dialect is wanted
    try:
        return engine.dialect
    finally:
        engine.dispose()


SQLITE = _dialect("sqlite://")
POSTGRES = _dialect("postgresql+psycopg://")


def test_utc_datetime_binds_per_dialect() -> None:
    """SQLite gets naive UTC, PostgreSQL an aware UTC time; both read back as the same aware UTC instant."""
    column = UTCDateTime()
    local = datetime(2026, 11, 30, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    stored_sqlite = column.process_bind_param(local, SQLITE)
    assert stored_sqlite == datetime(2026, 11, 30, 12, 0)
    stored_pg = column.process_bind_param(local, POSTGRES)
    assert stored_pg == local
    assert stored_pg is not None
    assert stored_pg.tzinfo == UTC
    assert column.process_result_value(stored_sqlite, SQLITE) == local
    assert column.process_result_value(local, POSTGRES) == local


def test_utc_datetime_refuses_naive_times() -> None:
    """A naive datetime is ambiguous and is refused on write."""
    with pytest.raises(ValueError, match="naive"):
        UTCDateTime().process_bind_param(datetime(2026, 1, 1), SQLITE)
