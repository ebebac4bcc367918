"""`farm demo`: the whole path on this machine, with nothing to start: submit, run, print the leaderboard."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from farm.cli.common import console, farm_errors, open_store, settings
from farm.cli.jobs import print_leaderboard
from farm.demo import (
    DEMO_PROFILE,
    DEMO_SPEC,
    LLAMACPP_DEMO_PROFILE,
    LLAMACPP_DEMO_SPEC,
    STAND_IN_DEMOS,
    VLLM_DEMO_PROFILE,
    VLLM_DEMO_SPEC,
    ensure_llama_server,
    run_demo,
)
from farm.domain import JobState, JobView
from farm.engines.vllm.cpu import ensure_tiny_model
from farm.logs import configure
from farm.private_files import open_private
from farm.scrubber import mask_url


def demo(
    engine: str = typer.Option(
        "sim",
        help="sim: the seed's host on the simulator; vllm: a tiny model on vLLM for the CPU (installed first); "
        "llama.cpp: SmolLM2-135M on llama-server (built first); ollama, lmstudio, tabbyapi, mlx: a registry recipe "
        "through that engine's adapter, the simulator standing in for the engine",
    ),
    spec: Path | None = typer.Option(None, help="the sweep to run (default: the engine's demo sweep)"),
    profile: Path | None = typer.Option(None, help="the worker profile to run it with (default: the engine's)"),
) -> None:
    """Run the demo sweep: on the simulator (the seed's host, calibrated from its published figures), or on a real
    vLLM process on the CPU with a tiny model built locally."""
    if engine not in ("sim", "vllm", "llama.cpp", *STAND_IN_DEMOS):
        choices = ", ".join(("sim", "vllm", "llama.cpp", *STAND_IN_DEMOS))
        raise typer.BadParameter(f"{engine!r}: choose one of {choices}", param_hint="--engine")
    simulate = engine == "sim" or engine in STAND_IN_DEMOS
    if engine == "sim":
        spec, profile = spec or DEMO_SPEC, profile or DEMO_PROFILE
    elif engine in STAND_IN_DEMOS:
        spec, profile = spec or STAND_IN_DEMOS[engine][0], profile or STAND_IN_DEMOS[engine][1]
    elif engine == "llama.cpp":
        spec, profile = spec or LLAMACPP_DEMO_SPEC, profile or LLAMACPP_DEMO_PROFILE
        with farm_errors():
            console.print("building llama-server and fetching SmolLM2 (once per machine) ...", markup=False)
            ensure_llama_server()
    else:
        spec, profile = spec or VLLM_DEMO_SPEC, profile or VLLM_DEMO_PROFILE
        with farm_errors():
            console.print("building the tiny model (once per machine) ...", markup=False)
            ensure_tiny_model()
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
    kind = {
        "sim": "simulated",
        "vllm": "vLLM on the CPU, tiny random model",
        "llama.cpp": "llama-server on the CPU, SmolLM2-135M-Instruct",
    }.get(engine, f"simulated: the simulator standing in for {engine} behind its adapter")
    console.print(f"demo finished in {elapsed:.0f} s; job {job.id} ({kind}).", markup=False, highlight=False)
    console.print(
        f"data: {s.data_dir} (store {mask_url(s.resolved_database_url)}); worker log: {log_path}",
        markup=False,
        highlight=False,
    )
    console.print(f"every figure: farm results {job.id}", markup=False, highlight=False)
