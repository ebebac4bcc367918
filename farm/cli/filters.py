"""The result filters as CLI options, built from their one declaration (farm.filters.FILTERS).

`@filter_options()` gives a command one option per filter (`--model`, `--hardware`, ..., `--real-only`) and
hands the command a parsed `filters: ResultFilter`; a bad value exits with the farm's own error naming it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import typer

from farm.cli.common import farm_errors
from farm.filters import FILTERS, FilterParameter, ResultFilter, filter_from_mapping


def _option(parameter: FilterParameter) -> tuple[Any, Any]:
    flag = "--" + parameter.name.replace("_", "-")
    if parameter.kind == "boolean":
        return bool, typer.Option(False, flag, help=parameter.help)
    if parameter.repeatable:
        return list[str], typer.Option([], flag, help=f"{parameter.help} (repeatable)")
    return str | None, typer.Option(None, flag, help=parameter.help)


def filter_options(*, exclude: tuple[str, ...] = ()) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give the command an option per result filter (less `exclude`) and pass it `filters=ResultFilter`."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "filters"]
        declared = [p for p in FILTERS if p.name not in exclude]
        added = []
        annotations: dict[str, Any] = {p.name: p.annotation for p in own}
        for parameter in declared:
            annotation, default = _option(parameter)
            added.append(
                inspect.Parameter(
                    parameter.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
                )
            )
            annotations[parameter.name] = annotation

        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            values: dict[str, list[str]] = {}
            for parameter in declared:
                given = kwargs.pop(parameter.name)
                if parameter.kind == "boolean":
                    values[parameter.name] = ["true"] if given else []
                elif parameter.repeatable:
                    values[parameter.name] = list(given)
                else:
                    values[parameter.name] = [given] if given is not None else []
            with farm_errors():
                filters: ResultFilter = filter_from_mapping(values)
            command(filters=filters, **kwargs)

        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        run.__signature__ = inspect.Signature([*keyword, *added])  # type: ignore[attr-defined]
        run.__annotations__ = {**annotations, "return": None}
        del run.__wrapped__
        return run

    return decorate
