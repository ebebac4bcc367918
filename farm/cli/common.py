"""What every command shares: settings, the store, printing JSON, turning FarmErrors into clean exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from farm.errors import FarmError
from farm.logs import configure
from farm.settings import Settings
from farm.store import Store

if TYPE_CHECKING:
    from rich.console import Console

WIDE_OUTPUT = 200
"""Tables sent to a file or a pipe are not cut to 80 columns: nobody's terminal is there to fit."""


def get_console(name: str = "console") -> Console:
    """The stdout console (or `err_console`), for commands that print a table only when not asked for JSON."""
    made: Console = globals().get(name) or __getattr__(name)
    return made


def __getattr__(name: str) -> Console:
    """`console` (stdout) and `err_console` (stderr), rich Consoles made when a module first imports them: a
    command that prints only JSON (`farm status --json`) imports them inside the function that prints a table,
    so it never imports rich (a twentieth of its start)."""
    if name not in ("console", "err_console"):  # the import system asks for `__path__` and the like
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    if name == "console":
        made = Console() if sys.stdout.isatty() else Console(width=WIDE_OUTPUT)
    else:
        made = Console(stderr=True)
    globals()[name] = made
    return made


def settings() -> Settings:
    """The process's settings, logging configured from them; a FARM_* variable that cannot be used is a clean
    error naming it."""
    with farm_errors():
        s = Settings()
    configure(s.log_format, s.log_level)
    return s


def open_store(s: Settings, *, pool_size: int | None = None) -> Store:
    """The store the settings name; the embedded default is created and migrated on first use. `pool_size`:
    PostgreSQL connections held at most (unset: farm.store.db.POOL_SIZE)."""
    embedded = s.database_url is None
    if pool_size is None:
        return Store.open(s.resolved_database_url, auto_upgrade=embedded)
    return Store.open(s.resolved_database_url, auto_upgrade=embedded, pool_size=pool_size)


def print_json(data: Any) -> None:
    """JSON on stdout, indented. A list is written an element a line: the same JSON, readable, and written by the
    json module's C encoder (indenting every level goes through its pure-Python one, seconds for a leaderboard of
    thousands of rows)."""
    if isinstance(data, list) and data:
        write = sys.stdout.write
        write("[\n")
        last = len(data) - 1
        for index, element in enumerate(data):
            write("  " + json.dumps(element, default=str) + (",\n" if index < last else "\n"))
        write("]\n")
        return
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def farm_errors() -> Iterator[None]:
    """A FarmError becomes its message on stderr and exit status 1 (2 for bad input), never a traceback."""
    from farm.errors import InputError

    try:
        yield
    except InputError as exc:
        _print_error(exc)
        raise typer.Exit(2) from exc
    except FarmError as exc:
        _print_error(exc)
        raise typer.Exit(1) from exc


def _print_error(exc: Exception) -> None:
    from rich.text import Text

    get_console("err_console").print(
        Text("error: ", style="bold red") + Text(str(exc)), highlight=False, soft_wrap=True
    )
