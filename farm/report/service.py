"""The reads that the CLI and the HTTP API share: entries, the leaderboard and comparisons under filters.

The one module of farm.report that talks to the store, and only through farm.store.reads (the one query layer);
everything it hands on is frozen records for the pure modules (aggregate, exports, html, compare). Lists come as
iterators, so exports stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from farm.errors import InputError, JobNotFound
from farm.filters import ALL, ResultFilter
from farm.report.html import TOP_GROUPS, ReportData
from farm.report.localmaxxing import submissions_from
from farm.store import LeaderboardRow, Store, reads
from farm.store.leaderboard import ORIGIN_ORDER
from farm.store.records import Entry


def entries(
    store: Store, filters: ResultFilter = ALL, *, with_provenance: bool = True, ranked: bool = True
) -> Iterator[Entry]:
    """Every aggregated entry of the runs the filters select, streamed, with the status filter applied."""
    for entry in reads.iter_entries(store, filters, with_provenance=with_provenance, ranked=ranked):
        if filters.matches_status(entry.simulated, entry.incomplete):
            yield entry


def localmaxxing_submissions(store: Store, filters: ResultFilter = ALL) -> list[dict[str, Any]]:
    """The LocalMaxxing export: each group's entries (without their provenance lists) and the provenance of the
    group's latest run alone. Reading every run whole took 30 s and 2 GB at 10,000 runs. A submission shows
    each entry's summary, not its pooled values: they are let go as each entry arrives."""
    slim = (replace(e, values=()) for e in entries(store, filters, with_provenance=False))
    return submissions_from(slim, reads.latest_provenance(store, filters), reads.latest_signatures(store, filters))


def leaderboard(store: Store, filters: ResultFilter = ALL) -> list[LeaderboardRow]:
    """`farm leaderboard`'s rows over the runs the filters select (SQL over the run summaries)."""
    return reads.leaderboard(store, filters)


def report_data(store: Store, filters: ResultFilter = ALL, *, top: int = TOP_GROUPS) -> ReportData:
    """What `farm report` shows: the whole leaderboard, and the entries of the `top` sweep groups (by their
    best decode rank, launched first): the page stays bounded at any store size."""
    board = leaderboard(store, filters)
    ordered = sorted(board, key=lambda r: (ORIGIN_ORDER.get(r.origin, 9), r.rank or 0, -r.decode_tok_s.mean))
    chosen: list[tuple[str, str, str, str | None, str]] = []
    every: set[tuple[str, str, str, str | None, str]] = set()
    for row in ordered:
        group = (row.recipe_sha256, row.hardware_class, row.engine_name, row.engine_version, row.origin)
        every.add(group)
        if group not in chosen and len(chosen) < top:
            chosen.append(group)
    shown = tuple(
        e
        for e in reads.iter_entries(store, filters, groups=chosen)
        if filters.matches_status(e.simulated, e.incomplete)
    )
    return ReportData(
        board=tuple(board),
        entries=shown,
        run_count=reads.run_count(store, filters),
        filters=filters,
        groups_total=len(every),
        groups_shown=len(chosen),
    )


COMPARE_KINDS = ("job", "recipe", "engine")
"""What `farm compare A B` compares: two jobs, two recipes, or two engine versions."""


@dataclass(frozen=True)
class CompareSide:
    """One side of a comparison: what it names, the runs it pooled, and its values per measurement."""

    name: str
    job_ids: tuple[str, ...]
    simulated: bool
    values: dict[str, tuple[float, ...]]
    units: dict[str, str]


def _side(name: str, side_entries: Sequence[Entry], what: str) -> CompareSide:
    if not side_entries:
        raise InputError(f"no succeeded results for {what} {name!r} under these filters", field=what)
    kinds = {e.simulated for e in side_entries}
    if len(kinds) > 1:
        raise InputError(
            f"{what} {name!r} has both real and simulated results; they are never pooled: "
            "add --real-only or --status simulated",
            field=what,
        )
    values: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    for e in side_entries:
        values.setdefault(e.key, []).extend(e.values)
        units[e.key] = e.unit
    return CompareSide(
        name=name,
        job_ids=tuple(sorted({job for e in side_entries for job in e.job_ids})),
        simulated=kinds.pop(),
        values={key: tuple(v) for key, v in values.items()},
        units=units,
    )


def _is_job(store: Store, job_id: str) -> bool:
    try:
        store.get_job(job_id)
    except JobNotFound:
        return False
    return True


def _side_entries(store: Store, filters: ResultFilter) -> list[Entry]:
    return list(entries(store, filters, with_provenance=False, ranked=False))


def compare_sides(
    store: Store, a: str, b: str, *, by: str = "auto", filters: ResultFilter = ALL
) -> tuple[str, CompareSide, CompareSide]:
    """Resolve A and B as jobs, recipes or engine versions (`by="auto"`: the first kind both names are) and
    pool each side's values per measurement. Only the two sides' runs are read. Returns the kind and both."""
    if by not in (*COMPARE_KINDS, "auto"):
        raise InputError(f"{by!r} is not one of auto, {', '.join(COMPARE_KINDS)}", field="by")
    if by in ("auto", "job") and _is_job(store, a) and _is_job(store, b):
        sides = [_side_entries(store, replace(filters, job_ids=(name,))) for name in (a, b)]
        return "job", _side(a, sides[0], "job"), _side(b, sides[1], "job")
    if by == "job":
        missing = a if not _is_job(store, a) else b
        raise InputError(f"no job {missing!r}", field="job")
    if by in ("auto", "recipe"):
        recipe_sides = [
            [e for e in _side_entries(store, replace(filters, models=(name,))) if e.recipe.recipe_id == name]
            for name in (a, b)
        ]
        if by == "recipe" or all(recipe_sides):
            return "recipe", _side(a, recipe_sides[0], "recipe"), _side(b, recipe_sides[1], "recipe")
    side_a = _side_entries(store, replace(filters, engines=(a,)))
    side_b = _side_entries(store, replace(filters, engines=(b,)))
    if by == "engine" or (side_a and side_b):
        return "engine", _side(a, side_a, "engine"), _side(b, side_b, "engine")
    raise InputError(
        f"cannot tell what to compare: {a!r} and {b!r} are not both job ids, recipe ids with results, "
        "or engine versions with results",
        field="by",
    )
