"""The root Typer app: registers each command group."""

from __future__ import annotations

import typer

from farm.cli import sim

app = typer.Typer(help="bench farm: benchmark sweeps of LLM inference servers.", no_args_is_help=True)
app.add_typer(sim.app, name="sim")


def main() -> None:
    app()
