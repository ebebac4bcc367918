"""`farm sim ...`: the simulator's commands."""

import typer

app = typer.Typer(help="The vLLM simulator.", no_args_is_help=True)
