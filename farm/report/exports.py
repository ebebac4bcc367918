"""Exports of aggregated results as text: json, csv, registry (speed sweeps), localmaxxing (pure).

`render(format, results)` is what `farm export` writes and what `GET /v1/export/{format}` answers. A registry
export is checked against the speed-sweep schema before it is handed out (farm.report.registry_schema).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import farm
from farm.errors import InputError
from farm.report.aggregate import Entry, entry_json
from farm.report.filters import ResultFilter
from farm.report.localmaxxing import submissions
from farm.report.registry import speed_sweeps
from farm.report.registry_schema import check_speed_sweep
from farm.store.reads import RunMeasurements

FORMATS = ("registry", "localmaxxing", "csv", "json")
"""What `farm export` writes."""

MEDIA_TYPES = {
    "registry": "application/json",
    "localmaxxing": "application/json",
    "csv": "text/csv",
    "json": "application/json",
}

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


def entries_document(results: Results, *, now: datetime | None = None) -> dict[str, Any]:
    """The json export: every entry with its spread and provenance summary, under a header."""
    return {
        "generated_at": (now or datetime.now(UTC)).isoformat(),
        "farm_version": farm.__version__,
        "filters": results.filters.as_json(),
        "definitions": {
            "spread": "(max - min) / mean of the pooled values",
            "stdev": "sample standard deviation (n - 1) of the pooled values; 0 for one value",
            "incomplete": "got (n) is below requested (the repeats the sweeps asked for)",
            "rank": "1 is best within one measurement; real and simulated entries are ranked apart",
        },
        "entries": [entry_json(entry) for entry in results.entries],
    }


def csv_text(entries: Sequence[Entry]) -> str:
    """One line per entry; provenance summarised as hosts, GPUs and farm commits."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for entry in entries:
        data = entry_json(entry)
        writer.writerow(
            {
                **{column: data.get(column) for column in CSV_COLUMNS},
                "job_ids": " ".join(entry.job_ids),
                "hosts": " ".join(sorted({p.host or "?" for p in entry.provenance})),
                "gpus": " ".join(
                    sorted({f"{len(p.gpu_names)}x {p.gpu_names[0]}" for p in entry.provenance if p.gpu_names})
                ),
                "farm_commits": " ".join(sorted({p.farm_commit or "?" for p in entry.provenance})),
            }
        )
    return out.getvalue()


def registry_documents(results: Results) -> list[dict[str, Any]]:
    """The speed sweeps, each checked against the schema (InputError naming the field when one breaks it)."""
    documents = speed_sweeps(results.entries)
    for document in documents:
        check_speed_sweep(document, source=f"speed sweep {document.get('id')}")
    return documents


def render(fmt: str, results: Results) -> str:
    """The export as text. A registry or localmaxxing export of several groups is a JSON array."""
    if fmt == "json":
        return json.dumps(entries_document(results), indent=2) + "\n"
    if fmt == "csv":
        return csv_text(results.entries)
    if fmt == "registry":
        return json.dumps(registry_documents(results), indent=2) + "\n"
    if fmt == "localmaxxing":
        return json.dumps(submissions(results.entries, results.runs), indent=2) + "\n"
    raise InputError(f"{fmt!r} is not one of {', '.join(FORMATS)}", field="format")
