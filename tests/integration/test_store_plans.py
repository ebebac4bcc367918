"""The readers' SQL on PostgreSQL, checked with EXPLAIN: every query that picks rows out of the big tables has an
index that serves it.

Each reader runs for real against a small store while its statements are captured; each SELECT is then planned
again with `EXPLAIN (FORMAT JSON)` and the same parameters, with sequential scans priced out
(`enable_seqscan = off`). A plan that still scans a table whole has no index that answers that query: at 10,000
runs a reader pooling one sweep group would read every measurement instead of the group's own (34 s for an
export instead of 8; docs/farm-mode.md). Tables read whole by design are allowed to be: the pooled `group_stats`
(the leaderboard's whole answer), `run_summaries` (one row per run, every export's list of runs) and `recipes`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from farm.domain import RunResult
from farm.filters import ALL, build_filter
from farm.recipes.model import Recipe
from farm.store import Store, reads

pytestmark = pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)

WHOLE_BY_DESIGN = {"group_stats", "run_summaries", "recipes", "alembic_version"}
"""Tables a reader may scan whole (see the module docstring)."""


def _fill(store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]) -> list[str]:
    """Two recipes x two engine versions, two runs each, plus a queued job: every reader has rows to find."""
    start = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)
    job_ids = []
    for index, (recipe_id, version) in enumerate(
        (r, v) for r in ("recipe-a-2x-rtx-pro-6000", "recipe-b-2x-rtx-pro-6000") for v in ("0.11.0", "0.12.0")
    ):
        recipe = make_recipe(recipe_id, engine_version=version)
        for repeat in range(2):
            when = start + timedelta(minutes=10 * index + repeat)
            [job_id] = store.submit(recipe, "s", {"repeats": 3}, "ab" * 32, 1, simulated=False, now=when)
            claimed = store.claim_job(job_id, "w1", [recipe.hardware_class], lease_s=600, now=when)
            assert claimed is not None
            figures = {"decode/code/decode_tok_s": (270.0 + index, 276.0, 282.0), "ttft/short/ttft_ms": (40.0, 42.0)}
            store.complete(
                job_id,
                claimed.attempt,
                "w1",
                make_result(figures, engine_version=version),
                now=when + timedelta(seconds=30),
            )
            job_ids.append(job_id)
    store.submit(make_recipe("recipe-c-2x-rtx-pro-6000"), "s", {"repeats": 3}, "ab" * 32, 1, simulated=False)
    return job_ids


@contextmanager
def _captured(store: Store) -> Iterator[list[tuple[str, Any]]]:
    """The SELECT statements the store sends while the block runs, as the driver got them (SQL and parameters)."""
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and not executemany:
            statements.append((statement, parameters))

    sa.event.listen(store._engine, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        sa.event.remove(store._engine, "before_cursor_execute", capture)


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(node type, table) for every scan in a JSON plan."""
    if "Relation Name" in node:
        yield node["Node Type"], node["Relation Name"]
    for child in node.get("Plans", ()):
        yield from _scans(child)


def _whole_table_scans(store: Store, statements: list[tuple[str, Any]]) -> dict[str, set[str]]:
    """For each statement that scans a table outside WHOLE_BY_DESIGN whole, even with sequential scans priced
    out: the tables, by the statement's first line."""
    found: dict[str, set[str]] = {}
    with store._engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, parameters in statements:
            [[plan]] = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters).all()
            whole = {table for kind, table in _scans(plan[0]["Plan"]) if kind == "Seq Scan"} - WHOLE_BY_DESIGN
            if whole:
                found[re.sub(r"\s+", " ", statement)[:160]] = whole
        conn.rollback()
    return found


def test_every_reader_finds_its_rows_through_an_index(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    from farm.report import service

    job_ids = _fill(store, make_recipe, make_result)
    since = build_filter(since="2026-08-30T09:15:00Z")
    readers: dict[str, Callable[[], object]] = {
        "leaderboard": lambda: reads.leaderboard(store, ALL),
        "leaderboard since": lambda: reads.leaderboard(store, since),
        "export entries": lambda: list(reads.iter_entries(store, ALL, with_provenance=True)),
        "entries since": lambda: list(reads.iter_entries(store, since, with_provenance=True)),
        "entries of a job": lambda: list(reads.iter_entries(store, replace(ALL, job_ids=(job_ids[0],)))),
        "compare jobs": lambda: service.compare_sides(store, job_ids[0], job_ids[2]),
        "compare recipes": lambda: service.compare_sides(store, "recipe-a-2x-rtx-pro-6000", "recipe-b-2x-rtx-pro-6000"),
        "job figures": lambda: reads.job_figures(store, job_ids[:2]),
        "localmaxxing latest runs": lambda: reads.latest_provenance(store, since),
        "status": lambda: (store.list_jobs(["queued", "running"], limit=50), store.queue_depth()),
        "job detail": lambda: (store.get_job(job_ids[0]), store.runs(job_ids[0]), store.results(job_ids[0])),
        "samples": lambda: store.samples(job_ids[0]),
        "artifacts": lambda: store.artifacts(job_ids[0], 1),
    }
    problems = {}
    for name, reader in readers.items():
        with _captured(store) as statements:
            assert reader(), name  # every reader found something: its plans are the ones that matter
        assert statements, name
        if found := _whole_table_scans(store, statements):
            problems[name] = found
    assert problems == {}


def test_the_check_sees_a_query_without_an_index(store: Store) -> None:
    """The check itself: a filter on an unindexed column of `measurements` is a whole-table scan."""
    with _captured(store) as statements, store._read("unindexed") as conn:
        conn.execute(sa.text("SELECT id FROM measurements WHERE metric = :m"), {"m": "decode_tok_s"}).all()
    assert _whole_table_scans(store, statements) == {
        "SELECT id FROM measurements WHERE metric = %(m)s": {"measurements"}
    }
