"""The one query layer for results people use: the CLI, the HTTP API, the report, the exports and compare.

Every read goes through `run_summaries` (one row per succeeded run of a succeeded job, written with its results)
under the same filters (farm.filters.ResultFilter, turned into SQL here) and the same "counts" rules: only
succeeded runs, simulated and endpoint results kept apart by their origin. Leaderboards and aggregates are SQL
over the summaries and `measurements`; raw samples are never read here. Lists come out as iterators that stream
rows, so an export of any size holds one group in memory. What comes out is frozen records, never ORM rows.
The functions take a Store and open one read-only transaction on it (through its package-private `_read`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar
from typing import cast as typed

from sqlalchemy import ColumnElement, Text, and_, bindparam, case, cast, func, literal_column, or_, select

from farm.domain import Figure, Origin, lower_is_better, split_key, summarize
from farm.filters import ResultFilter
from farm.store.leaderboard import LEADERBOARD_KINDS, ORIGIN_ORDER, group_key, rows
from farm.store.models import GroupFigureStat, MeasurementRow, RecipeRow, Run, RunSummary
from farm.store.records import (
    Entry,
    GroupKey,
    GroupStat,
    LeaderboardRow,
    ProvenanceSummary,
    RecipeSummary,
)
from farm.store.summaries import provenance_record

if TYPE_CHECKING:
    from farm.store.store import Store

BULKY_PARAMS = frozenset({"server_counter_deltas", "usage_completion_tokens"})
"""Per-repeat lists in a figure's params: kept in the store, left out of aggregated entries."""

Q = TypeVar("Q")
RUN_SUMMARY: Any = RunSummary

STREAM_BATCH = 2000
"""Rows fetched at a time when streaming: small enough to bound memory, large enough to amortise round trips."""

_GROUP_COLUMNS = (
    RunSummary.recipe_id,
    RunSummary.recipe_sha256,
    RunSummary.model_id,
    RunSummary.hardware_class,
    RunSummary.engine_name,
    RunSummary.engine_version,
    RunSummary.origin,
)


def conditions(filters: ResultFilter, table: Any = RunSummary) -> list[ColumnElement[bool]]:
    """The filters as SQL conditions on `run_summaries` (status complete/incomplete is per entry). `table` may
    be `group_stats` too, which has the same group columns, for the filters that select whole groups."""
    where: list[ColumnElement[bool]] = []
    if filters.real_only:
        where.append(table.origin != Origin.SIMULATED.value)
    if filters.verified_only and table is RUN_SUMMARY:
        where.append(table.verified.is_(True))
    origins = filters.origin_statuses
    if origins and not (filters.statuses and set(filters.statuses) - origins):
        # Only measured/simulated asked: select runs by origin. With complete/incomplete too, an entry passes
        # when it matches any value, so the origin cannot narrow the runs here.
        if origins == {"simulated"}:
            where.append(table.origin == Origin.SIMULATED.value)
        elif origins == {"measured"}:
            where.append(table.origin != Origin.SIMULATED.value)
    if table is not RUN_SUMMARY:
        return where + _group_conditions(filters, table)
    if filters.since is not None:
        where.append(table.finished_at >= filters.since)
    if filters.until is not None:
        where.append(table.finished_at <= filters.until)
    if filters.job_ids:
        where.append(table.job_id.in_(list(filters.job_ids)))
    return where + _group_conditions(filters, table)


def _group_conditions(filters: ResultFilter, table: Any) -> list[ColumnElement[bool]]:
    """The filters that select whole sweep groups (model, hardware, engine), on either table."""
    where: list[ColumnElement[bool]] = []
    if filters.models:
        options = []
        for wanted in filters.models:
            w = wanted.casefold()
            options += [func.lower(table.model_id) == w, table.model_name == w]
            options.append(func.lower(table.recipe_id) == w)
        where.append(or_(*options))
    if filters.hardware:
        options = []
        for wanted in filters.hardware:
            w = wanted.casefold().strip()
            cls = func.lower(table.hardware_class)
            options += [cls == w, cls == f"sim:{w}", func.lower(table.hardware_id) == w]
        where.append(or_(*options))
    if filters.engines:
        where.append(or_(*(_engine_condition(table, wanted) for wanted in filters.engines)))
    return where


def _version_condition(table: Any, wanted: str) -> ColumnElement[bool]:
    return or_(table.engine_version == wanted, table.engine_version.startswith(wanted + "+", autoescape=True))


def _engine_condition(table: Any, wanted: str) -> ColumnElement[bool]:
    name, at, version = wanted.partition("@")
    if at:
        return and_(table.engine_name == name, _version_condition(table, version))
    return or_(table.engine_name == wanted, _version_condition(table, wanted))


def _selects_runs(filters: ResultFilter) -> bool:
    """Whether the filters select runs within a group (by time, job, or verification), so `group_stats`, pooled
    over every run of a group, cannot answer."""
    return filters.since is not None or filters.until is not None or bool(filters.job_ids) or filters.verified_only


def _filtered(query: Q, filters: ResultFilter) -> Q:
    """The query (a select over run_summaries) restricted by the filters."""
    where = conditions(filters)
    statement: Any = query
    return typed(Q, statement.where(*where)) if where else query


def run_count(store: Store, filters: ResultFilter) -> int:
    """How many succeeded runs the filters select."""
    with store._read("cannot count runs") as conn:
        return int(conn.execute(_filtered(select(func.count()).select_from(RunSummary), filters)).scalar_one())


def leaderboard(store: Store, filters: ResultFilter) -> list[LeaderboardRow]:
    """The leaderboard of the runs the filters select: pooled statistics per group in SQL, the rules in Python
    (farm.store.leaderboard.rows).

    Filters that select whole groups (model, hardware, engine, origin) read `group_stats`, kept pooled as
    runs are stored: a few rows per group at any number of runs. Filters that select runs (since, until, job)
    pool `measurements` over the selected `run_summaries` instead."""
    if not _selects_runs(filters):
        return _leaderboard_from_stats(store, filters)
    if filters.verified_only and filters.since is None and filters.until is None and not filters.job_ids:
        return _verified_leaderboard(store, filters)
    return rows(*_pooled_from_runs(store, filters))


def _verified_leaderboard(store: Store, filters: ResultFilter) -> list[LeaderboardRow]:
    """The leaderboard of verified runs only: a group whose runs are all verified is read from `group_stats` (as
    every run of it is wanted), a group with none is left out, and only groups with both are pooled from their
    verified runs. So a farm whose runs are verified reads the leaderboard at the cost of the plain one."""
    everything = replace(filters, verified_only=False)
    stats, job_ids, verified = _from_stats(store, everything)
    whole = {group for group, jobs in job_ids.items() if verified.get(group, 0) >= len(jobs) > 0}
    mixed = [group for group, jobs in job_ids.items() if 0 < verified.get(group, 0) < len(jobs)]
    kept = [stat for stat in stats if group_key(stat) in whole]
    kept_jobs = {group: job_ids[group] for group in whole}
    kept_verified = {group: verified[group] for group in whole}
    if mixed:
        more, more_jobs, more_verified = _pooled_from_runs(store, filters, mixed)
        kept += more
        kept_jobs.update(more_jobs)
        kept_verified.update(more_verified)
    return rows(kept, kept_jobs, kept_verified)


def _pooled_from_runs(
    store: Store, filters: ResultFilter, groups: Sequence[tuple[str, str, str, str | None, str]] | None = None
) -> tuple[list[GroupStat], dict[Any, list[str]], dict[Any, int]]:
    """Leaderboard statistics pooled from the selected runs' measurements (of `groups` alone, when given)."""
    stats_query = _filtered(
        select(
            *_GROUP_COLUMNS,
            MeasurementRow.kind,
            MeasurementRow.point,
            MeasurementRow.metric,
            func.sum(MeasurementRow.n),
            func.sum(MeasurementRow.mean * MeasurementRow.n),
            func.min(MeasurementRow.min),
            func.max(MeasurementRow.max),
            func.count(),
            func.sum(func.coalesce(MeasurementRow.requested_repeats, RunSummary.requested_repeats, MeasurementRow.n)),
            func.max(MeasurementRow.unit),
        )
        .join(MeasurementRow, MeasurementRow.run_id == RunSummary.run_id)
        .where(MeasurementRow.kind.in_(LEADERBOARD_KINDS))
        .group_by(*_GROUP_COLUMNS, MeasurementRow.kind, MeasurementRow.point, MeasurementRow.metric),
        filters,
    )
    jobs_query = _jobs_by_group(store, filters)
    if groups is not None:
        stats_query = stats_query.where(_group_where(groups))
        jobs_query = jobs_query.where(_group_where(groups))
    with store._read("cannot read the leaderboard") as conn:
        stats = [
            GroupStat(
                recipe_id=r[0],
                recipe_sha256=r[1],
                model_id=r[2],
                hardware_class=r[3],
                engine_name=r[4],
                engine_version=r[5],
                origin=r[6],
                kind=r[7],
                point=r[8] or "",
                metric=r[9],
                n=int(r[10] or 0),
                total=float(r[11] or 0.0),
                min=float(r[12]),
                max=float(r[13]),
                runs=int(r[14]),
                requested=int(r[15]) if r[15] is not None else None,
                unit=str(r[16] or ""),
            )
            for r in conn.execute(stats_query)
        ]
        job_ids, verified = _jobs_and_verified(conn.execute(jobs_query))
    return stats, job_ids, verified


def _jobs_by_group(store: Store, filters: ResultFilter) -> Any:
    """The job ids of each group's selected runs, concatenated in the database (one row per group)."""
    group = (
        RunSummary.recipe_sha256,
        RunSummary.hardware_class,
        RunSummary.engine_name,
        RunSummary.engine_version,
        RunSummary.origin,
    )
    joined = (
        func.string_agg(RunSummary.job_id, literal_column("','"))
        if store.url.startswith("postgres")
        else func.group_concat(RunSummary.job_id, ",")
    )
    verified = func.sum(case((RunSummary.verified.is_(True), 1), else_=0))
    return _filtered(select(*group, joined, verified).group_by(*group), filters)


def _jobs_and_verified(found: Any) -> tuple[dict[Any, list[str]], dict[Any, int]]:
    """Each group's job ids and how many of its runs are verified, from `_jobs_by_group`'s rows."""
    job_ids: dict[Any, list[str]] = {}
    verified: dict[Any, int] = {}
    for sha, cls, name, version, origin, text, count in found:
        job_ids[(sha, cls, name, version, origin)] = text.split(",")
        verified[(sha, cls, name, version, origin)] = int(count or 0)
    return job_ids, verified


def _leaderboard_from_stats(store: Store, filters: ResultFilter) -> list[LeaderboardRow]:
    return rows(*_from_stats(store, filters))


def _from_stats(store: Store, filters: ResultFilter) -> tuple[list[GroupStat], dict[Any, list[str]], dict[Any, int]]:
    where = conditions(filters, GroupFigureStat)
    stats_query = select(*(GroupFigureStat.__table__.c[name] for name in GroupStat.__dataclass_fields__)).where(
        GroupFigureStat.kind.in_(LEADERBOARD_KINDS), *where
    )
    jobs_query = _jobs_by_group(store, filters)
    with store._read("cannot read the leaderboard") as conn:
        stats = [GroupStat(*row) for row in conn.execute(stats_query)]  # the columns are GroupStat's, in order
        job_ids, verified = _jobs_and_verified(conn.execute(jobs_query))
    return stats, job_ids, verified


def _entry_groups(store: Store, filters: ResultFilter) -> dict[tuple[Any, ...], tuple[str, float]]:
    """(group columns, key) → (unit, pooled mean) of every entry, computed in SQL: what ranking needs.

    From `group_stats` when no filter selects runs by time or job; else pooled from the selected runs."""
    if not _selects_runs(filters):
        stat = GroupFigureStat
        kept = select(
            stat.recipe_id,
            stat.recipe_sha256,
            stat.model_id,
            stat.hardware_class,
            stat.engine_name,
            stat.engine_version,
            stat.origin,
            stat.key,
            stat.unit,
            stat.total / stat.n,
        ).where(stat.n > 0, *conditions(filters, stat))
        with store._read("cannot rank results") as conn:
            return {tuple(r[:8]): (r[8], float(r[9])) for r in conn.execute(kept)}
    query = _filtered(
        select(
            *_GROUP_COLUMNS,
            MeasurementRow.key,
            func.max(MeasurementRow.unit),
            func.sum(MeasurementRow.mean * MeasurementRow.n) / func.sum(MeasurementRow.n),
        )
        .join(MeasurementRow, MeasurementRow.run_id == RunSummary.run_id)
        .where(MeasurementRow.n > 0)
        .group_by(*_GROUP_COLUMNS, MeasurementRow.key),
        filters,
    )
    with store._read("cannot rank results") as conn:
        return {tuple(r[:8]): (r[8], float(r[9] or 0.0)) for r in conn.execute(query)}


def _ranks(means: dict[tuple[Any, ...], tuple[str, float]]) -> dict[tuple[Any, ...], int]:
    """1 is best within one measurement; each origin is ranked apart."""
    pools: dict[tuple[str, str], list[tuple[tuple[Any, ...], str, float]]] = defaultdict(list)
    for ident, (unit, mean) in means.items():
        pools[(ident[7], ident[6])].append((ident, unit, mean))
    ranks: dict[tuple[Any, ...], int] = {}
    for pool in pools.values():
        descending = not lower_is_better(pool[0][1])
        ordered = sorted(pool, key=lambda item: -item[2] if descending else item[2])
        for position, (ident, _, _) in enumerate(ordered, start=1):
            ranks[ident] = position
    return ranks


def _recipes(store: Store, shas: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    query = select(RecipeRow.sha256, RecipeRow.document)
    if shas is not None:
        query = query.where(RecipeRow.sha256.in_(list(shas)))
    with store._read("cannot read recipes") as conn:
        return {sha: dict(document or {}) for sha, document in conn.execute(query)}


def _recipe_summary(group: _Group, document: dict[str, Any]) -> RecipeSummary:
    serving = document.get("serving") or {}
    recipe_id, sha, model_id = group.columns[:3]
    return RecipeSummary(
        recipe_id=recipe_id,
        recipe_sha256=sha,
        model_id=model_id,
        hardware_id=max(row.hardware_id for row in group.runs.values()),
        hardware_count=max(row.hardware_count for row in group.runs.values()),
        argv=tuple(str(arg) for arg in document.get("argv") or ()),
        tensor_parallel=serving.get("tensor_parallel"),
        max_context_tokens=serving.get("max_context_tokens"),
    )


def _provenance(row: Any) -> ProvenanceSummary:
    short: dict[str, Any] = dict(row.provenance_summary or {})
    short["worker_id"] = short.get("worker_id") or row.worker_id
    return provenance_record(
        short,
        job_id=row.job_id,
        attempt=row.attempt,
        measured_at=row.finished_at,
        engine=row.engine_name,
        engine_version=row.engine_version,
        simulated=row.origin == Origin.SIMULATED.value,
    )


def _group_where(groups: Sequence[tuple[str, str, str, str | None, str]]) -> ColumnElement[bool]:
    return or_(
        *(
            and_(
                RunSummary.recipe_sha256 == sha,
                RunSummary.hardware_class == cls,
                RunSummary.engine_name == name,
                RunSummary.engine_version == version if version is not None else RunSummary.engine_version.is_(None),
                RunSummary.origin == origin,
            )
            for sha, cls, name, version, origin in groups
        )
    )


def iter_entries(
    store: Store,
    filters: ResultFilter,
    *,
    groups: Sequence[tuple[str, str, str, str | None, str]] | None = None,
    with_provenance: bool = True,
    ranked: bool = True,
) -> Iterator[Entry]:
    """Every entry (one measurement of one sweep group, pooled over its runs) of the runs the filters select,
    ranked: launched before endpoint before simulated, then by model, recipe, hardware, engine version and key.
    `groups` (recipe sha256, hardware class, engine name, engine version, origin) limits it to those sweep
    groups; ranks are still among every group the filters select (`ranked=False`: no ranks, for a reader that
    shows none, such as compare). Values are pooled in time order (runs by finish time, then job id).

    The selected runs are read once (one row each, from `run_summaries`) and split into their groups here; then
    each group's measurements are pooled by one GROUP BY key over that group's run ids alone (the unique
    (run_id, key) index), their values and run ids concatenated in the database in the same row order, and
    parsed once per entry. Grouping the whole store by every group column at once sorted every measurement of
    the store by wide text keys (4.3 s of SQL for an export at 10,000 runs, against 0.8 s this way)."""
    if groups is not None and not groups:
        return
    ranks = _ranks(_entry_groups(store, filters)) if ranked else {}
    recipes = _recipes(store)
    with store._read("cannot read results") as conn:
        selected = _selected_runs(conn, filters, groups)
        # Last group first, popped as it is pooled: a group's runs are let go once its entries are out.
        left = sorted(selected.values(), key=_Group.order, reverse=True)
        del selected
        pending: list[tuple[_Group, Any]] = []
        summaries: dict[str, RecipeSummary] = {}
        pooled: dict[str, _RunSet] = {}
        while left:
            group = left.pop()
            if with_provenance:
                group.provenance = _group_provenance(conn, group)
            for row in _pool_group(conn, store.url.startswith("postgres"), group):
                pending.append((group, row))
            if len(pending) >= STREAM_BATCH:
                yield from _entries(conn, pending, recipes, summaries, ranks, pooled)
                pending = []
                pooled.clear()
        yield from _entries(conn, pending, recipes, summaries, ranks, pooled)


@dataclass(slots=True)
class _Group:
    """The selected runs of one sweep group: its columns (as `_GROUP_COLUMNS`) and each run's row."""

    columns: tuple[Any, ...]
    runs: dict[int, Any]
    provenance: dict[int, Any] | None = None
    """Each run's provenance row, read when the group is pooled (`with_provenance`), else None."""

    def order(self) -> tuple[Any, ...]:
        """The entries' order: launched, endpoint, simulated; then model, recipe, hardware, engine version."""
        recipe_id, sha, model_id, hardware_class, engine_name, version, origin = self.columns
        return (ORIGIN_ORDER.get(origin, 2), model_id, recipe_id, hardware_class, version or "", sha, engine_name)


_RUN_COLUMNS = (
    RunSummary.run_id,
    RunSummary.job_id,
    RunSummary.finished_at,
    RunSummary.hardware_id,
    RunSummary.hardware_count,
    RunSummary.requested_repeats,
    RunSummary.verified,
)
_PROVENANCE_COLUMNS = (
    RunSummary.run_id,
    RunSummary.job_id,
    RunSummary.finished_at,
    RunSummary.attempt,
    RunSummary.worker_id,
    RunSummary.provenance_summary,
    RunSummary.engine_name,
    RunSummary.engine_version,
    RunSummary.origin,
)

POOL_CHUNK = 500
"""Run ids pooled per query: a larger group is pooled in chunks, merged here (a bound list of parameters)."""


def _selected_runs(
    conn: Any, filters: ResultFilter, groups: Sequence[tuple[str, str, str, str | None, str]] | None
) -> dict[tuple[Any, ...], _Group]:
    """The runs the filters select, one short row each, by group. Their provenance is read group by group as
    each is pooled (`_group_provenance`): held for every run at once, it was half an export's memory (150 of
    300 MB at 50,000 runs)."""
    query = _filtered(select(*_GROUP_COLUMNS, *_RUN_COLUMNS), filters)
    if groups is not None:
        query = query.where(_group_where(groups))
    width = len(_GROUP_COLUMNS)
    found: dict[tuple[Any, ...], _Group] = {}
    for row in conn.execute(query):
        columns = tuple(row[:width])
        group = found.get(columns)
        if group is None:
            group = found[columns] = _Group(columns, {})
        group.runs[row.run_id] = row
    return found


def _by_chunks(conn: Any, query: Any, ids: Sequence[int]) -> Iterator[Any]:
    """The rows of `query` (bound list parameter `run_ids`) over `ids`, POOL_CHUNK ids a query."""
    for start in range(0, len(ids), POOL_CHUNK):
        yield from conn.execute(query, {"run_ids": ids[start : start + POOL_CHUNK]})


def _group_provenance(conn: Any, group: _Group) -> dict[int, Any]:
    """The provenance rows of one group's runs, by run id (through the primary key)."""
    query = select(*_PROVENANCE_COLUMNS).where(RunSummary.run_id.in_(bindparam("run_ids", expanding=True)))
    return {row.run_id: row for row in _by_chunks(conn, query, list(group.runs))}


def _pool_group(conn: Any, postgres: bool, group: _Group) -> list[Any]:
    """One group's measurements pooled by key, in key order (Python's, the same on every backend, as the groups'
    own order is): values and run ids concatenated in one row order; the requested repeats summed where the
    figure has them, else listed as `run_id:n` for the run's plan."""

    def concatenated(column: Any) -> Any:
        text = cast(column, Text)
        return func.string_agg(text, literal_column("','")) if postgres else func.group_concat(text, ",")

    m = MeasurementRow
    query = (
        select(
            m.key,
            concatenated(m.values).label("values_text"),
            concatenated(m.run_id).label("run_ids_text"),
            func.sum(m.requested_repeats).label("requested"),
            concatenated(case((m.requested_repeats.is_(None), cast(m.run_id, Text) + ":" + cast(m.n, Text)))).label(
                "unplanned"
            ),
            func.max(m.id).label("measurement_id"),
            func.max(m.unit).label("unit"),
            func.max(m.workload).label("workload"),
        )
        .where(m.run_id.in_(bindparam("run_ids", expanding=True)))
        .group_by(m.key)
    )
    ids = list(group.runs)
    if len(ids) <= POOL_CHUNK:
        return sorted(conn.execute(query, {"run_ids": ids}), key=lambda row: str(row.key))
    merged: dict[str, list[Any]] = {}
    for row in _by_chunks(conn, query, ids):
        seen = merged.get(row.key)
        if seen is None:
            merged[row.key] = list(row)
            continue
        seen[1] += "," + row.values_text
        seen[2] += "," + row.run_ids_text
        seen[3] = (seen[3] or 0) + (row.requested or 0)
        seen[4] = ",".join(part for part in (seen[4], row.unplanned) if part) or None
        seen[5] = max(seen[5], row.measurement_id)
        seen[6] = max(seen[6], row.unit)
        seen[7] = max(filter(None, (seen[7], row.workload)), default=None)
    return [_PooledRow(*merged[key]) for key in sorted(merged)]


@dataclass(frozen=True, slots=True)
class _PooledRow:
    """A pooled row merged from chunks, with the attributes of a result row."""

    key: str
    values_text: str
    run_ids_text: str
    requested: int | None
    unplanned: str | None
    measurement_id: int
    unit: str
    workload: str | None


@dataclass(frozen=True, slots=True)
class _RunSet:
    """What the entries pooled over one list of runs share: computed once per list (a group's entries mostly
    pool the same runs)."""

    order: tuple[int, ...] | None
    """Positions of the runs in time order, or None when the list already is."""
    job_ids: tuple[str, ...]
    runs: dict[int, Any]
    first_at: datetime
    last_at: datetime
    provenance: tuple[ProvenanceSummary, ...]
    verified: bool
    """Every run of the list is verified (run_summaries.verified)."""


def _run_set(group: _Group, run_ids_text: str) -> _RunSet:
    ids = [int(run_id) for run_id in run_ids_text.split(",")]
    rows = [group.runs[run_id] for run_id in ids]
    times = [(row.finished_at, row.job_id) for row in rows]
    order = sorted(range(len(ids)), key=times.__getitem__)  # each run once: (run_id, key) is unique
    return _RunSet(
        order=None if order == list(range(len(ids))) else tuple(order),
        job_ids=tuple(sorted({row.job_id for row in rows})),
        runs={row.run_id: row for row in rows},
        first_at=times[order[0]][0],
        last_at=times[order[-1]][0],
        provenance=() if group.provenance is None else tuple(_provenance(group.provenance[ids[i]]) for i in order),
        verified=all(bool(row.verified) for row in rows),
    )


def _entries(
    conn: Any,
    pending: list[tuple[_Group, Any]],
    recipes: dict[str, dict[str, Any]],
    summaries: dict[str, RecipeSummary],
    ranks: dict[tuple[Any, ...], int],
    pooled: dict[str, _RunSet],
) -> Iterator[Entry]:
    """The entries of a batch of pooled rows, with the params of their latest figure (read for the batch at
    once, bulky lists left out)."""
    if not pending:
        return
    ids = [row.measurement_id for _, row in pending]
    params = dict(
        conn.execute(select(MeasurementRow.id, MeasurementRow.params).where(MeasurementRow.id.in_(ids))).all()
    )
    for group, row in pending:
        own = params.get(row.measurement_id) or {}
        sha = group.columns[1]
        recipe = summaries.get(sha)
        if recipe is None:
            recipe = summaries.setdefault(sha, _recipe_summary(group, recipes.get(sha, {})))
        run_set = pooled.get(row.run_ids_text)
        if run_set is None:  # the same run ids are the same runs, of one group
            run_set = pooled[row.run_ids_text] = _run_set(group, row.run_ids_text)
        yield _entry(group, row, run_set, recipe, {k: v for k, v in own.items() if k not in BULKY_PARAMS}, ranks)


def _entry(
    group: _Group,
    row: Any,
    run_set: _RunSet,
    recipe: RecipeSummary,
    params: dict[str, Any],
    ranks: dict[tuple[Any, ...], int],
) -> Entry:
    per_run: list[list[float]] = json.loads(f"[{row.values_text}]")
    if run_set.order is not None:
        per_run = [per_run[i] for i in run_set.order]
    values = tuple(map(float, chain.from_iterable(per_run)))
    requested = int(row.requested or 0)
    if row.unplanned:
        for item in row.unplanned.split(","):
            run_id, _, n = item.partition(":")
            planned = run_set.runs[int(run_id)].requested_repeats
            requested += planned if planned is not None else int(n)
    kind, point, metric = split_key(row.key)
    stats = summarize(values)
    hardware_class, engine_name, engine_version, origin = group.columns[3:]
    return Entry(
        recipe=recipe,
        hardware_class=hardware_class,
        engine_name=engine_name,
        engine_version=engine_version,
        simulated=origin == Origin.SIMULATED.value,
        workload=row.workload,
        key=row.key,
        kind=kind,
        point=point,
        metric=metric,
        unit=row.unit,
        n=stats.n,
        mean=stats.mean,
        median=stats.median,
        min=stats.min,
        max=stats.max,
        stdev=stats.stdev,
        spread=stats.spread,
        values=values,
        runs=len(run_set.job_ids),
        requested=requested,
        job_ids=run_set.job_ids,
        first_measured_at=run_set.first_at,
        measured_at=run_set.last_at,
        params=params,
        provenance=run_set.provenance,
        rank=ranks.get((*group.columns, row.key)),
        origin=origin,
        verified=run_set.verified,
    )


def job_figures(store: Store, job_ids: Sequence[str]) -> dict[str, list[Figure]]:
    """The figures of the succeeded runs of these jobs, by job (what compare reads for two jobs)."""
    from farm.store import queries

    with store._read("cannot read results") as conn:
        found = conn.execute(
            select(RunSummary.job_id, RunSummary.run_id).where(RunSummary.job_id.in_(list(job_ids)))
        ).all()
        return {job_id: queries.figures(conn, run_id) for job_id, run_id in found}


def measured_at_range(store: Store, filters: ResultFilter) -> tuple[datetime | None, datetime | None]:
    """When the first and the last selected run finished."""
    query = _filtered(select(func.min(RunSummary.finished_at), func.max(RunSummary.finished_at)), filters)
    with store._read("cannot read results") as conn:
        low, high = conn.execute(query).one()
    return low, high


def latest_provenance(store: Store, filters: ResultFilter) -> dict[GroupKey, dict[str, Any]]:
    """The provenance of each sweep group's latest selected run (by finish time, then run id), by the entries'
    group key (recipe id, recipe sha256, hardware class, engine, engine version, simulated): the LocalMaxxing
    export's hashes and engine. One short row per run is read, then one provenance per group."""
    query = _filtered(
        select(
            RunSummary.recipe_id,
            RunSummary.recipe_sha256,
            RunSummary.hardware_class,
            RunSummary.engine_name,
            RunSummary.engine_version,
            RunSummary.origin,
            RunSummary.run_id,
        ).order_by(RunSummary.finished_at, RunSummary.run_id),
        filters,
    )
    with store._read("cannot read results") as conn:
        latest: dict[GroupKey, int] = {}
        for recipe_id, sha, hardware_class, engine, version, origin, run_id in conn.execute(query):
            latest[(recipe_id, sha, hardware_class, engine, version, origin == Origin.SIMULATED.value)] = run_id
        by_id = select(Run.id, Run.provenance).where(Run.id.in_(bindparam("run_ids", expanding=True)))
        provenance = {run_id: dict(doc or {}) for run_id, doc in _by_chunks(conn, by_id, list(latest.values()))}
    return {key: provenance.get(run_id, {}) for key, run_id in latest.items()}


def latest_signatures(store: Store, filters: ResultFilter) -> dict[GroupKey, dict[str, Any]]:
    """The signature (None when unsigned), verdict, stored `validated` and recipe document of each sweep group's
    latest selected run, by the entries' group key, as `latest_provenance` picks it: what the LocalMaxxing export
    carries of a verified run. One short row per run is read, then one signature row per group."""
    from farm.store.models import RunSignatureRow

    query = _filtered(
        select(
            RunSummary.recipe_id,
            RunSummary.recipe_sha256,
            RunSummary.hardware_class,
            RunSummary.engine_name,
            RunSummary.engine_version,
            RunSummary.origin,
            RunSummary.run_id,
            RunSummary.verified,
            RunSummary.validated,
        ).order_by(RunSummary.finished_at, RunSummary.run_id),
        filters,
    )
    with store._read("cannot read results") as conn:
        latest: dict[GroupKey, tuple[int, bool, str, bool]] = {}
        for recipe_id, sha, hardware_class, engine, version, origin, run_id, verified, validated in conn.execute(query):
            key = (recipe_id, sha, hardware_class, engine, version, origin == Origin.SIMULATED.value)
            latest[key] = (run_id, bool(verified), sha, bool(validated))
        by_id = select(RunSignatureRow).where(RunSignatureRow.run_id.in_(bindparam("run_ids", expanding=True)))
        rows = {row.run_id: row for row in _by_chunks(conn, by_id, [run_id for run_id, *_ in latest.values()])}
    recipes = _recipes(store, sorted({sha for _, _, sha, _ in latest.values()}))
    out: dict[GroupKey, dict[str, Any]] = {}
    for key, (run_id, verified, sha, validated) in latest.items():
        row = rows.get(run_id)
        signature = None
        if row is not None:
            signature = {
                "scheme": row.scheme,
                "keyId": row.key_id,
                "digest": row.digest,
                "signature": row.signature,
                "status": row.status,
                "originFarm": row.origin_farm,
            }
        out[key] = {
            "verified": verified,
            "validated": validated,
            "signature": signature,
            "recipe": recipes.get(sha, {}),
        }
    return out
