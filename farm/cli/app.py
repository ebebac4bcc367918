"""The root Typer app: registers each command group."""

from __future__ import annotations

import typer

from farm.cli import bench, catalogue, db, demo, jobs, recipe, results, sim, worker, workers

app = typer.Typer(
    help="bench farm: benchmark sweeps of LLM inference servers, with every figure's provenance.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(recipe.app, name="recipe")
app.add_typer(db.app, name="db")
app.add_typer(sim.app, name="sim")
app.command()(jobs.submit)
app.command()(jobs.status)
app.command()(jobs.cancel)
app.command()(jobs.results)
app.command()(jobs.leaderboard)
app.command()(worker.worker)
app.command()(workers.workers)
app.command()(catalogue.catalogue)
app.command()(demo.demo)
app.command()(bench.bench)
app.command()(results.aggregate)
app.command()(results.export)
app.command()(results.report)
app.command(name="compare")(results.compare_command)
app.command(name="serve")(results.serve_command)


def main() -> None:
    app()
