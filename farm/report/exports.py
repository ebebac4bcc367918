"""Exports of aggregated results as text: json, csv, registry (speed sweeps), localmaxxing (pure).

The exports stream: `stream(format, entries, filters)` yields text chunks as the entries come (the store hands
them over group by group), so an export of any size holds one group in memory. It is what `farm export` writes
and what `GET /v1/export/{format}` streams. The json export is one JSON document whose `entries` array is written
entry by entry; `jsonl` is one entry per line. A registry export is checked against the speed-sweep schema
(farm.report.registry_schema) document by document, recipe group by recipe group.

CSV cells that a spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage
return) are written with a leading `'`, as OWASP advises against CSV injection; numbers are written as numbers,
bare, and every text cell quoted, so one holding `;` or `,` stays one cell whichever separator a spreadsheet takes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

import farm
from farm.errors import InputError
from farm.filters import ResultFilter
from farm.report.aggregate import Entry, entry_json
from farm.report.localmaxxing import submissions
from farm.report.registry import speed_sweeps
from farm.report.registry_schema import check_speed_sweep
from farm.store.records import RunMeasurements

FORMATS = ("registry", "localmaxxing", "csv", "json", "jsonl")
"""What `farm export` writes."""

MEDIA_TYPES = {
    "registry": "application/json",
    "localmaxxing": "application/json",
    "csv": "text/csv",
    "json": "application/json",
    "jsonl": "application/x-ndjson",
}

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula."""

CSV_COLUMNS = (
    "recipe_id",
    "model_id",
    "hardware_class",
    "gpu_count",
    "engine_name",
    "engine_version",
    "status",
    "simulated",
    "workload",
    "key",
    "unit",
    "n",
    "requested",
    "incomplete",
    "mean",
    "median",
    "min",
    "max",
    "stdev",
    "spread",
    "rank",
    "runs",
    "job_ids",
    "first_measured_at",
    "measured_at",
    "hosts",
    "gpus",
    "farm_commits",
    "recipe_sha256",
)


@dataclass(frozen=True)
class Results:
    """What an export covers: the filtered runs, their aggregated entries, and the filters that chose them."""

    runs: tuple[RunMeasurements, ...]
    entries: tuple[Entry, ...]
    filters: ResultFilter


DEFINITIONS = {
    "spread": "(max - min) / mean of the pooled values",
    "stdev": "sample standard deviation (n - 1) of the pooled values; 0 for one value",
    "incomplete": "got (n) is below requested (the repeats the sweeps asked for)",
    "rank": "1 is best within one measurement; launched, endpoint and simulated entries are ranked apart",
}


def _header(filters: ResultFilter, now: datetime | None) -> dict[str, Any]:
    return {
        "generated_at": (now or datetime.now(UTC)).isoformat(),
        "farm_version": farm.__version__,
        "filters": filters.as_json(),
        "definitions": DEFINITIONS,
    }


def entries_document(results: Results, *, now: datetime | None = None) -> dict[str, Any]:
    """The json export: every entry with its spread and provenance summary, under a header."""
    return {**_header(results.filters, now), "entries": [entry_json(entry) for entry in results.entries]}


def stream_json(entries: Iterable[Entry], filters: ResultFilter, *, now: datetime | None = None) -> Iterator[str]:
    """The json export, written entry by entry: the same document as `entries_document`."""
    header = json.dumps(_header(filters, now), indent=2)
    yield header[: header.rindex("}")].rstrip() + ',\n  "entries": ['
    first = True
    for entry in entries:
        yield ("\n    " if first else ",\n    ") + json.dumps(entry_json(entry))
        first = False
    yield "\n  ]\n}\n" if not first else "]\n}\n"


def stream_jsonl(entries: Iterable[Entry]) -> Iterator[str]:
    """One entry per line (JSON lines)."""
    for entry in entries:
        yield json.dumps(entry_json(entry)) + "\n"


def csv_cell(value: object) -> object:
    """A value safe for a spreadsheet: text that would start a formula gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _run_cells(entry: Entry) -> tuple[str, str, str]:
    """The hosts, GPUs and farm commits of an entry's runs, as CSV cells."""
    runs = entry.provenance
    return (
        " ".join(sorted({p.host or "?" for p in runs})),
        " ".join(sorted({f"{len(p.gpu_names)}x {p.gpu_names[0]}" for p in runs if p.gpu_names})),
        " ".join(sorted({p.farm_commit or "?" for p in runs})),
    )


def csv_row(entry: Entry, run_cells: tuple[str, str, str] | None = None) -> list[object]:
    """An entry's cells in CSV_COLUMNS order. `run_cells` (from `_run_cells`) may be given when the entry has
    the same provenance as the one before."""
    e = entry
    hosts, gpus, commits = run_cells or _run_cells(e)
    job_ids = " ".join(e.job_ids)
    row = (
        *(e.recipe.recipe_id, e.recipe.model_id, e.hardware_class, e.gpu_count, e.engine_name, e.engine_version),
        *(e.status, e.simulated, e.workload, e.key, e.unit, e.n, e.requested, e.incomplete),
        *(e.mean, e.median, e.min, e.max, e.stdev, e.spread, e.rank, e.runs, job_ids),
        *(e.first_measured_at.isoformat(), e.measured_at.isoformat(), hosts, gpus, commits, e.recipe.recipe_sha256),
    )
    return [csv_cell(value) for value in row]


def stream_csv(entries: Iterable[Entry]) -> Iterator[str]:
    """One line per entry, written as it comes; provenance summarised as hosts, GPUs and farm commits (once for
    the entries that pool the same runs, as a group's entries mostly do)."""
    out = io.StringIO()
    # Every text cell quoted, numbers bare: a cell holding `;` (the separator a spreadsheet in many locales
    # assumes) or `,` stays one cell whichever separator the reader takes.
    csv.writer(out, lineterminator="\n").writerow(CSV_COLUMNS)  # plain names, as readers match them
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    runs: tuple[object, ...] | None = None
    cells = ("", "", "")
    for entry in entries:
        if entry.provenance is not runs or not runs:
            runs, cells = entry.provenance, _run_cells(entry)
        writer.writerow(csv_row(entry, cells))
        if out.tell() > 65536:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


def csv_text(entries: Sequence[Entry]) -> str:
    return "".join(stream_csv(entries))


def iter_registry_documents(entries: Iterable[Entry]) -> Iterator[dict[str, Any]]:
    """The speed sweeps, one per group as the entries come (grouped), each checked against the schema
    (InputError naming the field when one breaks it)."""
    for _group, members in groupby(entries, key=lambda e: e.group):
        for document in speed_sweeps(list(members)):
            check_speed_sweep(document, source=f"speed sweep {document.get('id')}")
            yield document


def registry_documents(results: Results) -> list[dict[str, Any]]:
    return list(iter_registry_documents(results.entries))


def stream_registry(entries: Iterable[Entry]) -> Iterator[str]:
    """The registry export as a JSON array, written document by document."""
    first = True
    yield "["
    for document in iter_registry_documents(entries):
        yield ("\n" if first else ",\n") + json.dumps(document, indent=2)
        first = False
    yield "\n]\n" if not first else "]\n"


def stream(fmt: str, entries: Iterable[Entry], filters: ResultFilter) -> Iterator[str]:
    """The export as text chunks, streamed (localmaxxing: `render_submissions`, or `render` over runs in memory)."""
    if fmt == "json":
        return stream_json(entries, filters)
    if fmt == "jsonl":
        return stream_jsonl(entries)
    if fmt == "csv":
        return stream_csv(entries)
    if fmt == "registry":
        return stream_registry(entries)
    raise InputError(f"{fmt!r} is not one of {', '.join(f for f in FORMATS if f != 'localmaxxing')}", field="format")


def render_submissions(submissions: list[dict[str, Any]]) -> str:
    """A LocalMaxxing export's text: its submissions as a JSON array."""
    return json.dumps(submissions, indent=2) + "\n"


def render(fmt: str, results: Results) -> str:
    """The export as text. A registry or localmaxxing export of several groups is a JSON array."""
    if fmt == "localmaxxing":
        return render_submissions(submissions(results.entries, results.runs))
    return "".join(stream(fmt, results.entries, results.filters))
