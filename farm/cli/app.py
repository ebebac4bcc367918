"""The root Typer app: registers each command, importing a command's module only when that command runs.

`farm --help` and `farm status` must start fast (well under a second), so the modules that pull in Celery,
aiohttp, the simulator, the load generator or the report are imported only by the commands that need them:
`COMMANDS` names each command's module, function and one-line help, and `LazyGroup` builds the Click command
on first use. To add a command, add a line to `COMMANDS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import click
import typer
from typer.core import TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives and what `farm --help` says of it (without importing it)."""

    module: str
    attribute: str
    help: str
    group: bool = False
    """The attribute is a Typer app of subcommands (`farm recipe ...`), not one function."""


COMMANDS: dict[str, LazyCommand] = {
    "recipe": LazyCommand("farm.cli.recipe", "app", "Parse and validate recipes.", group=True),
    "db": LazyCommand("farm.cli.db", "app", "The store's schema.", group=True),
    "sim": LazyCommand(
        "farm.cli.sim", "app", "The simulator: an engine's API with a timing model and faults.", group=True
    ),
    "submit": LazyCommand("farm.cli.jobs", "submit", "Validate a sweep spec and its recipe, queue the jobs."),
    "status": LazyCommand("farm.cli.jobs", "status", "Jobs with state, host, phase and progress."),
    "cancel": LazyCommand("farm.cli.jobs", "cancel", "Cancel a queued or running job."),
    "results": LazyCommand("farm.cli.jobs", "results", "Every figure of a job's successful run."),
    "leaderboard": LazyCommand("farm.cli.jobs", "leaderboard", "A row per recipe × hardware × engine × workload."),
    "worker": LazyCommand("farm.cli.worker", "worker", "Run a worker daemon on this host."),
    "workers": LazyCommand("farm.cli.fleet", "workers", "Worker daemons and queues at a glance."),
    "catalogue": LazyCommand("farm.cli.catalogue", "catalogue", "The hardware catalogue: every known hardware id."),
    "demo": LazyCommand("farm.cli.demo", "demo", "Run the demo sweep end to end and show its leaderboard."),
    "bench": LazyCommand("farm.cli.bench", "bench", "Measure a server the farm did not launch (an endpoint)."),
    "aggregate": LazyCommand("farm.cli.results", "aggregate_command", "Every measurement pooled per sweep group."),
    "export": LazyCommand("farm.cli.results", "export", "Export results: registry, localmaxxing, csv, json, jsonl."),
    "report": LazyCommand("farm.cli.results", "report", "One self-contained HTML page of results."),
    "compare": LazyCommand("farm.cli.results", "compare_command", "Two jobs, recipes or engine versions compared."),
    "serve": LazyCommand("farm.cli.results", "serve_command", "Serve the read-only HTTP API."),
    "keys": LazyCommand("farm.cli.keys", "app", "This host's signing key and the farm's trusted keys.", group=True),
    "verify": LazyCommand("farm.cli.keys", "verify", "Check stored runs against their signatures."),
    "import": LazyCommand("farm.cli.keys", "import_command", "Import a signed results bundle (checked first)."),
}
"""Every command of `farm`, in the order `farm --help` lists them."""


def load_command(name: str) -> click.Command:
    """The Click command `name`, importing its module now."""
    spec = COMMANDS[name]
    target = getattr(importlib.import_module(spec.module), spec.attribute)
    if spec.group:
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(add_completion=False)
    single.command(name=name)(target)
    command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """A Typer group whose commands are imported when they run, listed in `farm --help` from `COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        return load_command(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec.help) for name, spec in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    help="bench farm: benchmark sweeps of LLM inference servers, with every figure's provenance.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    """bench farm: benchmark sweeps of LLM inference servers, with every figure's provenance."""


def main() -> None:
    app()
