"""`farm submit|status|cancel|results|leaderboard`: the sweep author's and the leaderboard keeper's commands."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from farm.cli.common import farm_errors, get_console, open_store, print_json, settings
from farm.domain import JobView


def submit(
    spec: Path = typer.Argument(..., help="a sweep spec, e.g. jobs/deepseek-v4-flash-0731-tp2.toml"),
    recipe: Path | None = typer.Option(None, "--recipe", help="measure this recipe instead of the spec's"),
    simulate: bool = typer.Option(False, "--simulate", help="run on the recipe's hardware played by the simulator"),
    count: int = typer.Option(1, min=1, max=100, help="independent jobs of the same sweep"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Validate a sweep spec and its recipe, queue the jobs, print their ids. Bad input queues nothing."""
    from farm.engines.admission import check_recipe_for_submit, check_runnable
    from farm.recipes.spec import load_sweep
    from farm.submit import submit as submit_jobs

    s = settings()
    with farm_errors():
        sweep = load_sweep(spec, recipe_override=recipe)
        # Judged before the store or the broker is touched (submit judges again, against the versions the
        # farm's workers run).
        check_recipe_for_submit(sweep.recipe)
        check_runnable(sweep.recipe)
        store = open_store(s)
        submission = submit_jobs(store, sweep, simulate=simulate, count=count)
    job_ids = submission.job_ids
    # The specs of the versions the matching workers run (the newest shipped where none has said); each worker
    # judges again with its own.
    judged_against = ", ".join(submission.judged_against)
    if not submission.reported_versions:
        judged_against_note = "no worker of the recipe's engine and hardware has reported its version: the newest spec"
    else:
        judged_against_note = f"the versions the matching workers run: {', '.join(submission.reported_versions)}"
    if submission.unannounced:
        # On stderr, so that stdout stays the list of ids (or the JSON) whatever the broker did.
        typer.echo(
            f"note: {len(submission.unannounced)} of {len(job_ids)} job(s) stored but not announced (the broker: "
            f"{submission.broker_error}); the workers' sweepers announce them within FARM_ANNOUNCE_GRACE_S "
            f"({s.announce_grace_s:g} s) of a sweep",
            err=True,
        )
    if as_json:
        print_json(
            {
                "jobs": job_ids,
                "recipe": sweep.recipe.id,
                "sweep": sweep.spec.name,
                "unannounced": submission.unannounced,
                "judged_against": judged_against,
                "judged_against_why": judged_against_note,
            }
        )
        return
    get_console("err_console").print(
        f"judged against {judged_against} ({judged_against_note})", markup=False, highlight=False
    )
    for job_id in job_ids:
        get_console().print(job_id, markup=False, highlight=False)


def status(
    all_jobs: bool = typer.Option(False, "--all", help="finished jobs too"),
    limit: int = typer.Option(50, min=1),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Jobs with state, host, phase and progress."""
    from farm.cli.fleet import print_queue_overview, read_queue_overview

    s = settings()
    with farm_errors():
        store = open_store(s)
        jobs = store.list_jobs(None if all_jobs else ["queued", "running"], limit=limit)
        depth = store.queue_depth()
        queues = read_queue_overview(store)
    if as_json:
        print_json({"jobs": [_job_json(j) for j in jobs], "queue_depth": depth, "queues": queues})
        return
    from rich.table import Table

    table = Table(title="jobs")
    for column in ("job", "state", "sweep", "hardware", "attempt", "worker", "phase", "progress", "note"):
        table.add_column(column)
    for job in jobs:
        table.add_row(
            job.id,
            job.state.value,
            job.sweep_name,
            job.hardware_class,
            f"{job.attempt}/{job.max_attempts}",
            job.owner or "",
            job.phase or "",
            f"{job.progress:.0%}" if job.progress is not None and job.state == "running" else "",
            _note(job),
        )
    get_console().print(table)
    print_queue_overview(store)


def cancel(job: str = typer.Argument(..., help="a job id")) -> None:
    """Cancel a queued or running job. A running job's worker stops at its next heartbeat."""
    s = settings()
    with farm_errors():
        state = open_store(s).cancel(job)
    get_console().print(f"{job}: {state}", markup=False, highlight=False)


def results(
    job: str = typer.Argument(..., help="a job id"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Every figure of a job's successful run: n, mean, min, max, spread."""
    s = settings()
    with farm_errors():
        store = open_store(s)
        view = store.get_job(job)
        figures = store.results(job)
        absent = _absent_figures(store.runs(job))
    if as_json:
        print_json({"job": _job_json(view), "figures": [_figure_json(f) for f in figures]})
        return
    title = f"{view.id} {view.sweep_name} ({view.state.value}{', simulated' if view.simulated else ''})"
    from rich.table import Table

    table = Table(title=title)
    for column in ("figure", "unit", "n", "mean", "min", "max", "spread"):
        table.add_column(column, justify="left" if column in ("figure", "unit") else "right")
    for f in figures:
        sm = f.summary
        table.add_row(f.key, f.unit, str(sm.n), _num(sm.mean), _num(sm.min), _num(sm.max), f"{sm.spread:.1%}")
    get_console().print(table)
    if any(f.params.get("gpu_only") for f in figures):
        simulated = any(f.params.get("simulated") for f in figures if f.params.get("gpu_only"))
        get_console().print(
            "energy/, power/, cost/: GPU-only (the cards' board power, not the host's); over each repeat's window"
            + ("; from the simulator's power model" if simulated else ""),
            markup=False,
            highlight=False,
        )
    for key, reason in absent.items():
        get_console().print(f"not measured: {key}: {reason}", markup=False, highlight=False)
    if view.failure_message:
        get_console().print(f"failure: {view.failure_class}: {view.failure_message}", markup=False, highlight=False)


def leaderboard(
    real_only: bool = typer.Option(False, "--real-only", help="leave out simulated results"),
    verified: bool = typer.Option(False, "--verified", help="only runs signed by a trusted key (farm verify)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A row per recipe × hardware × engine version × workload. Simulated rows are marked and ranked only among
    themselves; rows measured on an endpoint the farm did not launch are marked too, and rows whose runs are all
    signed by a trusted key are marked verified."""
    s = settings()
    with farm_errors():
        from farm.filters import ResultFilter
        from farm.store import reads

        rows = reads.leaderboard(open_store(s), ResultFilter(real_only=real_only, verified_only=verified))
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    print_leaderboard(rows)


def print_leaderboard(rows: list[Any]) -> None:
    """The leaderboard as a table (farm.cli.tables: its rows grow with the store); `--json` has every field."""
    from farm.cli.tables import TextTable

    at_depth = any(r.decode_at_depth_tok_s for r in rows)  # the column only where some run measured depth
    table = TextTable(
        (
            ("model", "left"),
            ("hardware", "left"),
            ("engine", "left"),
            ("workload", "left"),
            ("decode tok/s", "right"),
            ("spread", "right"),
            ("prefill tok/s", "right"),
            ("TTFT ms", "right"),
            ("GiB/card", "right"),
            ("accept", "right"),
            ("J/tok GPU", "right"),
            ("W GPU", "right"),
            ("cost/Mtok", "right"),
            *((("decode @ deepest", "right"),) if at_depth else ()),
        ),
        title="leaderboard (decode: mean of the runs' repeats; spread = (max - min) / mean)",
    )
    for r in rows:
        engine_version = (r.engine_version or "").split("+")[0]
        table.add_row(
            r.model_id.split("/")[-1],
            r.hardware_class.removeprefix("sim:")
            + (" (sim)" if r.simulated else "")
            + (" (endpoint)" if r.origin == "endpoint" else "")
            + (" (verified)" if r.verified else ""),
            f"{r.engine_name} {engine_version}".strip(),
            r.workload,
            f"{_num(r.decode_tok_s.mean)} (n={r.decode_tok_s.n})",
            f"{r.decode_tok_s.spread:.1%}",
            _num(r.prefill_tok_s) + f" @{r.prefill_prompt_tokens}" if r.prefill_tok_s is not None else "",
            _num(r.short_ttft_ms) if r.short_ttft_ms is not None else "",
            _num(r.peak_memory_gib) if r.peak_memory_gib is not None else "",
            f"{r.spec_acceptance_rate:.1%}" if r.spec_acceptance_rate is not None else "",
            _num(r.j_per_output_token) if r.j_per_output_token is not None else "",
            _power(r.avg_power_w, r.peak_power_w),
            _cost(r.cost_per_m_output_tokens, r.cost_unit),
            *((_deepest(r.decode_at_depth_tok_s),) if at_depth else ()),
        )
    table.print()
    if any(r.j_per_output_token is not None or r.avg_power_w is not None for r in rows):
        print(
            "J/tok GPU, W GPU: the cards' own energy per output token and average power (peak card) at the decode; "
            "cost/Mtok: per million output tokens at the host's stated prices."
        )
    if any(r.simulated for r in rows):
        print("(sim): measured on the simulator; never ranked with real hardware.")
    if any(r.origin == "endpoint" for r in rows):
        print("(endpoint): measured on a server the farm did not launch.")
    if any(r.verified for r in rows):
        print("(verified): every run signed by a trusted host key and matching its signature (farm verify).")


def _absent_figures(runs: list[Any]) -> dict[str, str]:
    """The figures the job's succeeded run could not measure, with the reasons (its provenance keeps them)."""
    for run in reversed(runs):
        if getattr(run.state, "value", run.state) == "succeeded" and isinstance(run.provenance, dict):
            absent = run.provenance.get("absent_figures")
            return {str(k): str(v) for k, v in absent.items()} if isinstance(absent, dict) else {}
    return {}


def _power(average: float | None, peak: float | None) -> str:
    if average is None:
        return ""
    return f"{average:,.0f}" + (f" ({peak:,.0f})" if peak is not None else "")


def _cost(value: float | None, unit: str | None) -> str:
    if value is None:
        return ""
    currency = (unit or "").removesuffix("/Mtok")
    return f"{value:.3g} {currency}".strip()


def _deepest(at_depth: tuple[tuple[int, float], ...]) -> str:
    """Decode at the deepest context measured, with its depth (`121.0 @32768`)."""
    if not at_depth:
        return ""
    depth, rate = at_depth[-1]
    return f"{_num(rate)} @{depth}"


def _num(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _note(job: JobView) -> str:
    if job.failure_class:
        return f"{job.failure_class}: {(job.failure_message or '').splitlines()[0][:60]}"
    if job.state == "queued" and job.attempt:
        return "retrying"
    return ""


def _job_json(job: JobView) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    return data


def _figure_json(figure: Any) -> dict[str, Any]:
    from farm.bench.records import figure_to_json

    return figure_to_json(figure)
