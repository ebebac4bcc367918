"""Store fixtures: every store test runs on a fresh SQLite file and on a fresh PostgreSQL schema.

PostgreSQL comes from FARM_TEST_POSTGRES_URL (default: the local trust-auth server); its tests skip, saying
why, only when that server cannot be reached. Each test gets its own schema, named on the URL's search_path,
so tests never see each other's rows and child processes reach the same schema through the URL alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from farm_harness import POSTGRES_URL, admin, postgres_unreachable
from sqlalchemy.engine import make_url

from farm.bench.metrics import summarize
from farm.bench.records import Figure
from farm.domain import Artifact, RunResult
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.store import Store

HARDWARE_ID = "rtx-pro-6000-blackwell-96gb"
HARDWARE_CLASS = f"{HARDWARE_ID} x 2"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The database kind under test."""
    name: str = request.param
    if name == "postgres" and (reason := postgres_unreachable()):
        pytest.skip(reason)
    return name


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of its own: a SQLite file in a directory that does not exist yet, or a new
    PostgreSQL schema (dropped afterwards)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'farm.db'}"
        return
    schema = f"farm_test_{secrets.token_hex(6)}"
    admin(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        admin(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated store on a fresh database."""
    opened = Store.open(store_url, auto_upgrade=True)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def count_rows(store_url: str) -> Iterator[Callable[[str], int]]:
    """Count the rows of a table straight from the database, behind the store's back."""
    engine = sa.create_engine(store_url)

    def count(table: str) -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())  # noqa: S608 - test tables

    try:
        yield count
    finally:
        engine.dispose()


def _make_recipe(
    recipe_id: str = "deepseek-v4-flash-fp8-2x-rtx-pro-6000",
    *,
    hardware_id: str = HARDWARE_ID,
    hardware_count: int = 2,
    engine_version: str | None = "0.11.0",
    notes: str | None = None,
) -> Recipe:
    """A small valid recipe; change `notes` to get a different content under the same id."""
    return Recipe(
        id=recipe_id,
        model_id="deepseek-ai/DeepSeek-V4-Flash-0731",
        hardware_id=hardware_id,
        hardware_count=hardware_count,
        engine=Engine(name="vllm", version=engine_version),
        argv=("vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash-0731", "--tensor-parallel-size", "2"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="ab" * 32),
        notes=notes,
    )


def _make_figure(key: str, values: tuple[float, ...], unit: str = "tok/s") -> Figure:
    """A figure named by its "<kind>/<point>/<metric>" key, summarised from its values."""
    kind, point, metric = key.split("/")
    return Figure(
        kind=kind,
        key=key,
        metric=metric,
        unit=unit,
        values=values,
        summary=summarize(values),
        workload=point if kind in ("decode", "spec_decode") else None,
        params={"point": point},
        requested_repeats=len(values),
    )


def _make_result(
    figures: dict[str, tuple[float, ...]] | None = None,
    *,
    engine_version: str = "0.11.0",
    simulated: bool = False,
    artifacts: tuple[Artifact, ...] = (Artifact(name="engine.log", content="INFO ready\n"),),
) -> RunResult:
    """A hand-made RunResult with samples for every figure (two repeats of one request each)."""
    figures = figures or {"decode/code/decode_tok_s": (270.0, 276.0, 282.0)}
    sample: dict[str, Any] = {
        "started_ns": 0,
        "first_token_ns": 10,
        "last_token_ns": 90,
        "completion_tokens": 8,
    }
    return RunResult(
        figures=tuple(_make_figure(key, values) for key, values in figures.items()),
        samples={key: [[sample], [sample]] for key in figures},
        provenance={"engine": {"name": "vllm", "version": engine_version}, "simulated": simulated},
        artifacts=artifacts,
        failed_requests=0,
        total_requests=2 * len(figures),
    )


@pytest.fixture
def make_recipe() -> Callable[..., Recipe]:
    """Build a recipe (see _make_recipe)."""
    return _make_recipe


@pytest.fixture
def make_figure() -> Callable[..., Figure]:
    """Build a figure from its key and values (see _make_figure)."""
    return _make_figure


@pytest.fixture
def make_result() -> Callable[..., RunResult]:
    """Build a RunResult from figure keys and values (see _make_result)."""
    return _make_result
