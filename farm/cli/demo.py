"""`farm demo`: the whole path on this machine, with nothing to start: submit, run, print the leaderboard."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from farm.cli.common import console, farm_errors, open_store, settings
from farm.cli.jobs import print_leaderboard
from farm.demo import DEMO_PROFILE, DEMO_SPEC, engine_demos, run_demo
from farm.domain import JobState, JobView
from farm.logs import configure
from farm.private_files import open_private
from farm.scrubber import mask_url

DEMOS = engine_demos()
"""The engines' demos, from the table of engines (each line's `demo`)."""
DEMO_HELP = "sim: the seed's host on the simulator; " + "; ".join(
    f"{name}: {demo.what}" for name, (_spec, _profile, demo) in DEMOS.items()
)


def demo(
    engine: str = typer.Option(
        "sim",
        help=DEMO_HELP,
    ),
    spec: Path | None = typer.Option(None, help="the sweep to run (default: the engine's demo sweep)"),
    profile: Path | None = typer.Option(None, help="the worker profile to run it with (default: the engine's)"),
) -> None:
    """Run the demo sweep: on the simulator (the seed's host, calibrated from its published figures), on a real
    engine on the CPU (built or installed first), or through an engine's adapter with the simulator standing in."""
    if engine != "sim" and engine not in DEMOS:
        choices = ", ".join(("sim", *DEMOS))
        raise typer.BadParameter(f"{engine!r}: choose one of {choices}", param_hint="--engine")
    if engine == "sim":
        spec, profile = spec or DEMO_SPEC, profile or DEMO_PROFILE
        simulate, what = True, "simulated"
    else:
        demo_spec, demo_profile, chosen = DEMOS[engine]
        spec, profile = spec or demo_spec, profile or demo_profile
        simulate, what = chosen.stand_in, chosen.what
        if chosen.prepare is not None:
            with farm_errors():
                console.print(f"{chosen.preparing} (once per machine) ...", markup=False)
                chosen.prepare()
    s = settings()
    log_path = s.data_dir / "logs" / "demo-worker.log"
    started = time.monotonic()
    with farm_errors(), open_private(log_path, "a", encoding="utf-8") as log_file:
        configure("json", s.log_level, file=log_file)
        store = open_store(s)
        console.print(f"store: {mask_url(s.resolved_database_url)}", markup=False, highlight=False)
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

            job = run_demo(store, s.data_dir, spec=spec, profile=profile, on_update=on_update, simulate=simulate)
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
    console.print(f"demo finished in {elapsed:.0f} s; job {job.id} ({what}).", markup=False, highlight=False)
    console.print(
        f"data: {s.data_dir} (store {mask_url(s.resolved_database_url)}); worker log: {log_path}",
        markup=False,
        highlight=False,
    )
    console.print(f"every figure: farm results {job.id}", markup=False, highlight=False)
