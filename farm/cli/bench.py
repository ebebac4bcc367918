"""`farm bench URL --model NAME`: measure a server the farm did not launch and store the run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from farm.bench.endpoint import UNKNOWN_HARDWARE
from farm.cli.common import console, farm_errors, open_store, print_json, settings


def bench(
    url: str = typer.Argument(
        ..., help="the server's base URL, e.g. http://10.0.0.5:8000 (credentials are never stored)"
    ),
    model: str = typer.Option(..., "--model", help="the served model name, as /v1/models lists it"),
    spec: Path | None = typer.Option(None, "--spec", help="a sweep spec (default: the plan of jobs/demo.toml)"),
    hardware: str = typer.Option(UNKNOWN_HARDWARE, "--hardware", help="the server's hardware id, if known"),
    hardware_count: int = typer.Option(1, "--hardware-count", min=1, help="how many of those cards"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run a sweep spec against an endpoint; the run is stored with engine kind "endpoint"."""
    from farm.bench.endpoint_run import bench_endpoint, default_spec_path, load_endpoint_spec

    s = settings()
    with farm_errors():
        loaded = load_endpoint_spec(spec or default_spec_path())
        from farm.signing.keys import HostKey

        store = open_store(s)
        run = bench_endpoint(
            store,
            url,
            model,
            loaded,
            hardware_id=hardware,
            hardware_count=hardware_count,
            host_key=HostKey.load_or_create(s.data_dir),
        )
    if as_json:
        print_json(
            {
                "job": run.job_id,
                "endpoint": run.info.to_json(),
                "simulated": run.simulated,
                "failed_requests": run.failed_requests,
                "total_requests": run.total_requests,
                "figures": [
                    {
                        "key": f.key,
                        "unit": f.unit,
                        "mean": f.summary.mean,
                        "median": f.summary.median,
                        "spread": f.summary.spread,
                        "values": list(f.values),
                        "params": f.params,
                    }
                    for f in run.figures
                ],
            }
        )
        return
    table = Table(title=f"{run.info.url} {model} (job {run.job_id}{', simulated' if run.simulated else ''})")
    for column in ("figure", "mean", "min", "max", "spread", "unit"):
        table.add_column(column)
    for figure in run.figures:
        summary = figure.summary
        table.add_row(
            figure.key,
            f"{summary.mean:.4g}",
            f"{summary.min:.4g}",
            f"{summary.max:.4g}",
            f"{summary.spread:.1%}",
            figure.unit,
        )
    console.print(table)
    console.print(f"requests: {run.total_requests}, failed: {run.failed_requests}", markup=False, highlight=False)
