"""`farm export|report|compare|serve|aggregate`: the leaderboard keeper's commands for results people use."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from farm.cli.common import console, err_console, farm_errors, open_store, print_json, settings
from farm.errors import InputError
from farm.report import service
from farm.report.aggregate import entry_json
from farm.report.compare import DEFAULT_RESAMPLES, Difference, compare, verdict
from farm.report.exports import FORMATS, Results, registry_documents, render
from farm.report.filters import ResultFilter, build_filter
from farm.report.html import render_report

MODEL = typer.Option([], "--model", help="model id, its last part, or recipe id (repeatable)")
HARDWARE = typer.Option([], "--hardware", help="hardware class or hardware id (repeatable)")
ENGINE = typer.Option([], "--engine", help="engine name, version, or name@version (repeatable)")
SINCE = typer.Option(None, "--since", help="runs finished at or after this ISO date/time")
UNTIL = typer.Option(None, "--until", help="runs finished at or before this ISO date/time (a date: that day)")
STATUS = typer.Option([], "--status", help="measured, simulated, complete or incomplete (repeatable)")
JOB = typer.Option([], "--job", help="only these jobs (repeatable)")
REAL_ONLY = typer.Option(False, "--real-only", help="leave out simulated results")


def _filters(
    model: list[str],
    hardware: list[str],
    engine: list[str],
    since: str | None,
    until: str | None,
    status: list[str],
    job: list[str],
    real_only: bool,
) -> ResultFilter:
    return build_filter(
        models=model,
        hardware=hardware,
        engines=engine,
        since=since,
        until=until,
        statuses=status,
        job_ids=job,
        real_only=real_only,
    )


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    err_console.print(f"wrote {output}", markup=False, highlight=False)


def _export_registry(results: Results, output: str | None) -> None:
    """One sweep: the document itself. Several: one file each in a directory, or refused."""
    documents = registry_documents(results)
    if not documents:
        raise InputError("no results to export under these filters", field="registry")
    if output is not None and (output.endswith("/") or Path(output).is_dir()):
        directory = Path(output)
        directory.mkdir(parents=True, exist_ok=True)
        for document in documents:
            _write(json.dumps(document, indent=2) + "\n", directory / f"{document['id']}.json")
        return
    if len(documents) > 1:
        ids = "\n  ".join(str(d["id"]) for d in documents)
        raise InputError(
            f"{len(documents)} speed sweeps match (one per recipe × hardware × engine version):\n  {ids}\n"
            "narrow them with --job/--model/--hardware/--engine, or give -o DIRECTORY/ for one file each",
            field="registry",
        )
    _write(json.dumps(documents[0], indent=2) + "\n", Path(output) if output else None)


def export(
    fmt: str = typer.Argument(..., metavar="FORMAT", help=f"one of {', '.join(FORMATS)}"),
    output: str | None = typer.Option(
        None, "-o", "--output", help="write here instead of stdout (registry: a DIRECTORY/ gets one file per sweep)"
    ),
    model: list[str] = MODEL,
    hardware: list[str] = HARDWARE,
    engine: list[str] = ENGINE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    status: list[str] = STATUS,
    job: list[str] = JOB,
    real_only: bool = REAL_ONLY,
) -> None:
    """Export aggregated results: registry (local-ai-registry/v1 speed sweep, schema-checked), localmaxxing
    (run submissions), csv or json (every entry with its spread and provenance)."""
    s = settings()
    with farm_errors():
        if fmt not in FORMATS:
            raise InputError(f"{fmt!r} is not one of {', '.join(FORMATS)}", field="FORMAT")
        filters = _filters(model, hardware, engine, since, until, status, job, real_only)
        results = service.load_results(open_store(s), filters)
        if fmt == "registry":
            _export_registry(results, output)
        else:
            _write(render(fmt, results), Path(output) if output else None)


def report(
    output: Path = typer.Option(..., "-o", "--output", help="the HTML file to write"),
    model: list[str] = MODEL,
    hardware: list[str] = HARDWARE,
    engine: list[str] = ENGINE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    status: list[str] = STATUS,
    job: list[str] = JOB,
    real_only: bool = REAL_ONLY,
) -> None:
    """One self-contained HTML page: leaderboard, charts (decode by workload, throughput per GPU against tok/s
    per user, TTFT against prompt length), every measurement and its provenance."""
    s = settings()
    with farm_errors():
        filters = _filters(model, hardware, engine, since, until, status, job, real_only)
        store = open_store(s)
        results = service.load_results(store, filters)
        _write(render_report(results, store_label=store.url_for_display), output)


def aggregate(
    model: list[str] = MODEL,
    hardware: list[str] = HARDWARE,
    engine: list[str] = ENGINE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    status: list[str] = STATUS,
    job: list[str] = JOB,
    real_only: bool = REAL_ONLY,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Every measurement per recipe × hardware × engine version × workload: n, mean, median, min, max, stdev,
    spread, and whether it got fewer samples than asked."""
    s = settings()
    with farm_errors():
        filters = _filters(model, hardware, engine, since, until, status, job, real_only)
        results = service.load_results(open_store(s), filters)
    if as_json:
        print_json([entry_json(e) for e in results.entries])
        return
    table = Table(title="measurements (pooled over every repeat of every run; spread = (max - min) / mean)")
    for column in (
        "recipe",
        "hardware",
        "engine",
        "measurement",
        "unit",
        "n/req",
        "mean",
        "median",
        "stdev",
        "spread",
        "rank",
    ):
        table.add_column(
            column, justify="left" if column in ("recipe", "hardware", "engine", "measurement", "unit") else "right"
        )
    for e in results.entries:
        table.add_row(
            e.recipe.recipe_id[:40],
            e.hardware_class + (" (sim)" if e.simulated else ""),
            f"{e.engine_name} {(e.engine_version or '').split('+')[0]}",
            e.key,
            e.unit,
            f"{e.n}/{e.requested}" + (" !" if e.incomplete else ""),
            f"{e.mean:,.4g}",
            f"{e.median:,.4g}",
            f"{e.stdev:,.3g}",
            f"{e.spread:.1%}",
            str(e.rank or ""),
        )
    console.print(table)
    if any(e.incomplete for e in results.entries):
        console.print("!: fewer samples than the sweep asked for (incomplete)", markup=False)


def _difference_json(d: Difference) -> dict[str, object]:
    return {
        "key": d.key,
        "unit": d.unit,
        "a": {"n": d.a.n, "mean": d.a.mean, "spread": d.a.spread},
        "b": {"n": d.b.n, "mean": d.b.mean, "spread": d.b.spread},
        "diff": d.diff,
        "diff_pct": d.diff_pct,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "threshold": d.threshold,
        "real": d.real,
        "reason": d.reason,
    }


def compare_command(
    a: str = typer.Argument(..., help="a job id, recipe id or engine version"),
    b: str = typer.Argument(..., help="the same kind as A"),
    by: str = typer.Option("auto", "--by", help="auto, job, recipe or engine"),
    resamples: int = typer.Option(DEFAULT_RESAMPLES, min=100, help="bootstrap resamples"),
    only: list[str] = typer.Option([], "--only", help="only measurements whose key starts with this (repeatable)"),
    model: list[str] = MODEL,
    hardware: list[str] = HARDWARE,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    status: list[str] = STATUS,
    real_only: bool = REAL_ONLY,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Two runs, recipes or engine versions side by side: both means, B - A (absolute and %), a 95% bootstrap
    interval of the difference, and whether it is real (interval excludes 0 and |B - A| beats both spreads)."""
    s = settings()
    with farm_errors():
        filters = _filters(model, hardware, [], since, until, status, [], real_only)
        kind, side_a, side_b = service.compare_sides(open_store(s), a, b, by=by, filters=filters)
    keys = [k for k in side_a.values if not only or any(k.startswith(prefix) for prefix in only)]
    differences = compare(
        {k: side_a.values[k] for k in keys}, side_b.values, {**side_a.units, **side_b.units}, resamples=resamples
    )
    summary = verdict(differences)
    if as_json:
        print_json(
            {
                "kind": kind,
                "a": {"name": side_a.name, "job_ids": list(side_a.job_ids), "simulated": side_a.simulated},
                "b": {"name": side_b.name, "job_ids": list(side_b.job_ids), "simulated": side_b.simulated},
                "definition": "real: the 95% bootstrap interval of mean(B) - mean(A) excludes 0 and "
                "|B - A| / A exceeds max(spread A, spread B)",
                "verdict": summary,
                "differences": [_difference_json(d) for d in differences],
            }
        )
        return
    sim_a, sim_b = (" (sim)" if side.simulated else "" for side in (side_a, side_b))
    title = f"{kind} {side_a.name}{sim_a} → {side_b.name}{sim_b}"
    table = Table(title=title)
    for column in ("measurement", "unit", "A", "B", "B - A", "%", "95% interval", "spreads", "verdict"):
        table.add_column(column, justify="left" if column in ("measurement", "unit", "verdict") else "right")
    for d in differences:
        table.add_row(
            d.key,
            d.unit,
            f"{d.a.mean:,.4g} (n={d.a.n})",
            f"{d.b.mean:,.4g} (n={d.b.n})",
            f"{d.diff:+,.4g}",
            f"{d.diff_pct:+.1%}" if d.diff_pct is not None else "",
            f"[{d.ci_low:+,.3g}, {d.ci_high:+,.3g}]",
            f"{d.a.spread:.1%} / {d.b.spread:.1%}",
            "REAL" if d.real else "noise",
        )
    console.print(table)
    console.print(summary, markup=False, highlight=False)


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8080, "--port", min=0, max=65535),
) -> None:
    """Serve the read-only HTTP API (leaderboard, jobs, results, exports; /openapi.json describes it)."""
    from farm.api import serve

    s = settings()
    with farm_errors():
        store = open_store(s)
    try:
        serve(store, host, port, on_ready=lambda url: err_console.print(f"serving {url} (read-only)", markup=False))
    finally:
        store.close()
