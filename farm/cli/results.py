"""`farm export|report|compare|serve|aggregate`: the leaderboard keeper's commands for results people use."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from farm.cli.common import console, err_console, farm_errors, open_store, print_json, settings
from farm.cli.filters import filter_options
from farm.domain import KIND_COST, KIND_ENERGY, KIND_POWER
from farm.errors import InputError, OutputError
from farm.filters import ResultFilter

if TYPE_CHECKING:
    from farm.report.compare import Difference
    from farm.store import Store

ENERGY_KINDS = (KIND_ENERGY, KIND_POWER, KIND_COST)
"""The figure kinds that are GPU-only."""
GPU_ONLY_NOTE = "energy/, power/, cost/: GPU-only (the cards' board power, not the host's)"

EXPORT_FORMATS = ("registry", "localmaxxing", "csv", "json", "jsonl", "bundle")
"""What `farm export` writes (farm.report.exports.FORMATS; named here so `farm --help` imports no report code)."""


@contextmanager
def output_file(output: Path | None) -> Iterator[TextIO]:
    """stdout, or the file `output` (its directory made): an OutputError naming it when it cannot be written."""
    if output is None:
        yield sys.stdout
        return
    if output.is_dir():
        raise OutputError(f"{output} is a directory; give a file name", path=output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        handle = output.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}", path=output) from exc
    try:
        with handle:
            yield handle
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}", path=output) from exc
    err_console.print(f"wrote {output}", markup=False, highlight=False)


def write_chunks(chunks: Iterable[str], output: Path | None) -> None:
    """Write text as it comes (an export streams), to stdout or a file."""
    with output_file(output) as handle:
        for chunk in chunks:
            handle.write(chunk)


def _export_registry(entries: Iterable[object], output: str | None) -> None:
    """One sweep: the document itself. Several: one file each in a directory, or refused."""
    from farm.report.exports import iter_registry_documents, stream_registry
    from farm.report.paths import safe_file_name

    documents = iter_registry_documents(entries)  # type: ignore[arg-type]
    if output is not None and (output.endswith("/") or Path(output).is_dir()):
        directory = Path(output)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot make the directory {directory}: {exc.strerror or exc}", path=directory) from exc
        written = 0
        for document in documents:
            target = directory / safe_file_name(str(document["id"]), ".json")
            write_chunks([json.dumps(document, indent=2) + "\n"], target)
            written += 1
        if not written:
            raise InputError("no results to export under these filters", field="registry")
        return
    first = next(documents, None)
    if first is None:
        raise InputError("no results to export under these filters", field="registry")
    second = next(documents, None)
    if second is not None:
        ids = [str(first["id"]), str(second["id"]), *(str(d["id"]) for d in documents)]
        shown = "\n  ".join(ids)
        raise InputError(
            f"{len(ids)} speed sweeps match (one per recipe × hardware × engine version):\n  {shown}\n"
            "narrow them with --job/--model/--hardware/--engine, or give -o DIRECTORY/ for one file each",
            field="registry",
        )
    del stream_registry
    write_chunks([json.dumps(first, indent=2) + "\n"], Path(output) if output else None)


def _export_bundle(store: Store, output: str | None, filters: ResultFilter) -> None:
    """A signed results bundle (farm.bundles) of the selected runs that match their signatures."""
    from farm.bundles import export_bundle

    if output is None:
        raise InputError("a bundle is written to a file: give -o FILE.jsonl (or FILE.jsonl.gz)", field="output")
    report = export_bundle(store, Path(output), filters)
    for why in report.left_out:
        err_console.print(f"left out {why}", markup=False, highlight=False)
    err_console.print(f"wrote {output}: {report.exported} signed runs", markup=False, highlight=False)


@filter_options()
def export(
    fmt: str = typer.Argument(..., metavar="FORMAT", help=f"one of {', '.join(EXPORT_FORMATS)}"),
    output: str | None = typer.Option(
        None, "-o", "--output", help="write here instead of stdout (registry: a DIRECTORY/ gets one file per sweep)"
    ),
    *,
    filters: ResultFilter,
) -> None:
    """Export aggregated results, streamed: registry (local-ai-registry/v1 speed sweeps, schema-checked),
    localmaxxing (run submissions), csv, json or jsonl (every entry with its spread and provenance); bundle
    (every signed run whole, for `farm import` on another farm: -o FILE.jsonl, gzip for FILE.jsonl.gz)."""
    s = settings()
    with farm_errors():
        from farm.report import service
        from farm.report.exports import render_submissions, stream

        if fmt not in EXPORT_FORMATS:
            raise InputError(f"{fmt!r} is not one of {', '.join(EXPORT_FORMATS)}", field="FORMAT")
        store = open_store(s)
        if fmt == "bundle":
            _export_bundle(store, output, filters)
        elif fmt == "registry":
            _export_registry(service.entries(store, filters), output)
        elif fmt == "localmaxxing":
            submissions = service.localmaxxing_submissions(store, filters)
            write_chunks([render_submissions(submissions)], Path(output) if output else None)
        else:
            chunks = stream(fmt, service.entries(store, filters), filters)
            write_chunks(chunks, Path(output) if output else None)


@filter_options()
def report(
    output: Path = typer.Option(..., "-o", "--output", help="the HTML file to write"),
    top: int = typer.Option(12, "--top", min=1, help="sweep groups whose charts and measurements the page shows"),
    *,
    filters: ResultFilter,
) -> None:
    """One self-contained HTML page: the whole leaderboard; for the top groups, charts (decode by workload,
    throughput per GPU against tok/s per user, TTFT against prompt length), every measurement and provenance."""
    s = settings()
    with farm_errors():
        from farm.report import service
        from farm.report.html import render_report

        store = open_store(s)
        data = service.report_data(store, filters, top=top)
        write_chunks([render_report(data, store_label=store.url_for_display)], output)


@filter_options()
def aggregate_command(
    as_json: bool = typer.Option(False, "--json", help="a JSON array, written entry by entry"),
    *,
    filters: ResultFilter,
) -> None:
    """Every measurement per recipe × hardware × engine version × workload: n, mean, median, min, max, stdev,
    spread, and whether it got fewer samples than asked."""
    from farm.cli.tables import TextTable
    from farm.report import service
    from farm.report.aggregate import entry_json

    s = settings()
    if as_json:
        with farm_errors():
            store = open_store(s)
            entries = service.entries(store, filters)
            sys.stdout.write("[")
            for index, entry in enumerate(entries):
                sys.stdout.write(("\n" if index == 0 else ",\n") + json.dumps(entry_json(entry), default=str))
            sys.stdout.write("\n]\n")
        return
    table = TextTable(
        (
            ("recipe", "left"),
            ("hardware", "left"),
            ("engine", "left"),
            ("measurement", "left"),
            ("unit", "left"),
            ("n/req", "right"),
            ("mean", "right"),
            ("median", "right"),
            ("stdev", "right"),
            ("spread", "right"),
            ("rank", "right"),
        ),
        title="measurements (pooled over every repeat of every run; spread = (max - min) / mean)",
    )
    incomplete = False
    energy = False
    with farm_errors():
        for e in service.entries(open_store(s), filters, with_provenance=False):
            incomplete = incomplete or e.incomplete
            energy = energy or e.kind in ENERGY_KINDS
            table.add_row(
                e.recipe.recipe_id[:40],
                e.hardware_class + (" (sim)" if e.simulated else "") + (" (verified)" if e.verified else ""),
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
    table.print()
    if incomplete:
        print("!: fewer samples than the sweep asked for (incomplete)")
    if energy:
        print(GPU_ONLY_NOTE)


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


@filter_options(exclude=("engine", "job"))
def compare_command(
    a: str = typer.Argument(..., help="a job id, recipe id or engine version"),
    b: str = typer.Argument(..., help="the same kind as A"),
    by: str = typer.Option("auto", "--by", help="auto, job, recipe or engine"),
    resamples: int = typer.Option(10_000, min=100, help="bootstrap resamples"),
    only: list[str] = typer.Option([], "--only", help="only measurements whose key starts with this (repeatable)"),
    as_json: bool = typer.Option(False, "--json"),
    *,
    filters: ResultFilter,
) -> None:
    """Two runs, recipes or engine versions side by side: both means, B - A (absolute and %), a 95% bootstrap
    interval of the difference, and whether it is real (interval excludes 0 and |B - A| beats both spreads)."""
    from rich.table import Table

    from farm.report import service
    from farm.report.compare import compare, verdict

    s = settings()
    with farm_errors():
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
    if any(d.key.split("/", 1)[0] in ENERGY_KINDS for d in differences):
        console.print(GPU_ONLY_NOTE + "; cost at each side's stated prices", markup=False, highlight=False)
    console.print(summary, markup=False, highlight=False)


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8080, "--port", min=0, max=65535),
    insecure: bool = typer.Option(
        False, "--insecure", help="listen beyond loopback without a token (everyone who can reach it reads it)"
    ),
) -> None:
    """Serve the read-only HTTP API (leaderboard, jobs, results, exports; /openapi.json describes it).

    On an address beyond loopback it needs FARM_API_TOKEN (then every request must carry `Authorization:
    Bearer <token>`) or --insecure."""
    import os

    from farm.api import serve
    from farm.api.auth import checked_token, is_loopback

    s = settings()
    with farm_errors():
        token = checked_token(os.environ.get("FARM_API_TOKEN"))
        if not is_loopback(host) and token is None and not insecure:
            raise InputError(
                f"{host} is not a loopback address: set FARM_API_TOKEN (clients then send it as a bearer token) "
                "or pass --insecure to serve host names, argv and failure messages to anyone who can reach it",
                field="--host",
            )
        store = open_store(s, pool_size=8)  # reads run in asyncio's default threads: 6 on 2 cores, more elsewhere
    if not is_loopback(host) and token is None:
        err_console.print(
            f"warning: serving {host} without a token (--insecure): anyone who can reach it reads every result",
            markup=False,
            highlight=False,
        )
    try:
        serve(
            store,
            host,
            port,
            token=token,
            allowed_hosts=s.api_allowed_hosts,
            on_ready=lambda url: err_console.print(f"serving {url} (read-only)", markup=False),
        )
    finally:
        store.close()
