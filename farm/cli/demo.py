"""`farm demo`: the whole path on this machine, with nothing to start: submit, run, print the leaderboard."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from farm.cli.common import console, farm_errors, open_store, settings
from farm.cli.jobs import print_leaderboard
from farm.demo import DEMO_PROFILE, DEMO_SPEC, run_demo
from farm.domain import JobState, JobView
from farm.logs import configure


def demo(
    spec: Path = typer.Option(DEMO_SPEC, help="the sweep to run"),
    profile: Path = typer.Option(DEMO_PROFILE, help="the worker profile to run it with"),
) -> None:
    """Run the demo sweep on the simulator (the seed's host, calibrated from its published figures)."""
    s = settings()
    log_path = s.data_dir / "logs" / "demo-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with farm_errors(), log_path.open("a", encoding="utf-8") as log_file:
        configure("json", s.log_level, file=log_file)
        store = open_store(s)
        console.print(f"store: {s.resolved_database_url}", markup=False, highlight=False)
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[phase]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("demo sweep", total=1.0, phase="queued")

            def on_update(job: JobView) -> None:
                progress.update(
                    task,
                    completed=job.progress or 0.0,
                    phase=job.phase or job.state.value,
                    description=f"demo sweep {job.id}",
                )

            job = run_demo(store, s.data_dir, spec=spec, profile=profile, on_update=on_update)
            if job.state == JobState.SUCCEEDED:
                progress.update(task, completed=1.0, phase="done")
        rows = store.leaderboard(include_simulated=True)
    elapsed = time.monotonic() - started
    if job.state != JobState.SUCCEEDED:
        console.print(
            f"demo job {job.id} ended {job.state.value}: {job.failure_class}: {job.failure_message}",
            markup=False,
            highlight=False,
        )
        console.print(f"worker log: {log_path}", markup=False, highlight=False)
        raise typer.Exit(1)
    print_leaderboard([r for r in rows if job.id in r.job_ids] or rows)
    console.print(f"demo finished in {elapsed:.0f} s; job {job.id} (simulated).", markup=False, highlight=False)
    console.print(
        f"data: {s.data_dir} (store {s.resolved_database_url}); worker log: {log_path}", markup=False, highlight=False
    )
    console.print(f"every figure: farm results {job.id}", markup=False, highlight=False)
