"""`farm recipe show|check`: parse and validate recipe documents."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import typer
from rich.table import Table

from farm.cli.common import console, err_console, farm_errors, print_json
from farm.engines.admission import check_recipe_for_submit, check_runnable
from farm.errors import FarmError, InputError
from farm.recipes.commands import ENGINE_ALIASES
from farm.recipes.limits import load_json, read_limited
from farm.recipes.parse import load_recipe

app = typer.Typer(help="Parse and validate recipes (local-ai-registry/v1 JSON or a LocalMaxxing run page).")


@app.command("show")
def show(
    file: Path = typer.Argument(..., help="a recipe document"),
    as_json: bool = typer.Option(False, "--json", help="print the validated recipe as JSON"),
) -> None:
    """Print one recipe as the farm understands it."""
    with farm_errors():
        recipe = load_recipe(file)
    if as_json:
        print_json(recipe.model_dump(mode="json"))
        return
    table = Table(show_header=False, box=None)
    table.add_row("id", recipe.id)
    table.add_row("model", recipe.model_id)
    table.add_row("hardware", f"{recipe.hardware_id} × {recipe.hardware_count}")
    table.add_row("engine", f"{recipe.engine.name} {recipe.engine.version or ''}".strip())
    table.add_row("argv", shlex.join(recipe.argv))
    if recipe.environment:
        table.add_row("environment", " ".join(f"{k}={v}" for k, v in sorted(recipe.environment.items())))
    table.add_row("command from", recipe.provenance.command_source or "-")
    for note in recipe.provenance.command_notes:
        table.add_row("note", note)
    if recipe.container:
        table.add_row("image", recipe.container.image)
    table.add_row("source", recipe.provenance.source_format)
    table.add_row("sha256", recipe.provenance.content_sha256)
    console.print(table)


@app.command("check")
def check(
    files: list[Path] = typer.Argument(..., help="recipe documents"),
    summary: bool = typer.Option(False, "--summary", help="end with counts by engine and the reasons for refusals"),
) -> None:
    """Validate many recipes; go on past a bad one and exit non-zero if any is bad. Nothing is stored.

    Each file is parsed (the command read from the recipe's most faithful source) and then put to the
    argument policy every farm applies at submit; a recipe that parses but that policy refuses is listed as
    POLICY, apart from one that does not parse (FAIL)."""
    outcomes: list[tuple[str, str, str]] = []
    for file in files:
        outcome = _check_one(file)
        outcomes.append(outcome)
        status, _engine, detail = outcome
        line = f"{status:<6} {file}: {detail}"
        (console if status == "ok" else err_console).print(line, markup=False, highlight=False, soft_wrap=True)
    if summary:
        _print_summary(outcomes)
    if any(status != "ok" for status, _, _ in outcomes):
        raise typer.Exit(2)


def _check_one(file: Path) -> tuple[str, str, str]:
    """('ok' | 'FAIL' | 'POLICY', engine, what to print) for one file; never raises."""
    try:
        recipe = load_recipe(file)
    except InputError as exc:
        return "FAIL", _declared_engine(file), exc.detail if exc.field is None else f"field {exc.field!r}: {exc.detail}"
    except Exception as exc:
        return "FAIL", _declared_engine(file), f"internal error ({type(exc).__name__}): {exc}"
    source = recipe.provenance.command_source or "?"
    described = f"{recipe.id} ({recipe.hardware_class}, {recipe.engine.name}, command from {source})"
    try:
        check_recipe_for_submit(recipe)
    except InputError as exc:
        return "POLICY", recipe.engine.name, f"{described} parses, but the submit policy refuses it: {exc.detail}"
    except Exception as exc:
        return "POLICY", recipe.engine.name, f"{described}: policy check failed ({type(exc).__name__}): {exc}"
    notes = "".join(f"\n    note: {note}" for note in recipe.provenance.command_notes)
    try:
        check_runnable(recipe)
    except InputError as exc:
        # Valid, but `farm submit` refuses it: no worker of this farm could run it (its engine, its hardware id).
        notes += f"\n    warning: `farm submit` would refuse it: {exc.detail}"
    return "ok", recipe.engine.name, described + notes


def _declared_engine(file: Path) -> str:
    """The engine a refused registry recipe names (for the summary by engine), or '-' when it names none."""
    try:
        document = load_json(read_limited(file, InputError).decode("utf-8"), InputError, str(file))
        data = document.get("data", document) if isinstance(document, dict) else {}
        name = data.get("engine", {}).get("name") if isinstance(data, dict) else None
        return ENGINE_ALIASES.get(str(name).strip().lower(), str(name)) if name else "-"
    except (FarmError, ValueError, AttributeError):
        return "-"


def _print_summary(outcomes: list[tuple[str, str, str]]) -> None:
    by_engine: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()
    for status, engine, detail in outcomes:
        by_engine.setdefault(engine, Counter())[status] += 1
        if status != "ok":
            reasons[_reason(detail)] += 1
    table = Table("engine", "ok", "policy", "fail")
    for engine, counts in sorted(by_engine.items()):
        table.add_row(engine, str(counts["ok"]), str(counts["POLICY"]), str(counts["FAIL"]))
    console.print(table)
    total = len(outcomes)
    accepted = sum(1 for status, _, _ in outcomes if status == "ok")
    parsed = sum(1 for status, _, _ in outcomes if status != "FAIL")
    console.print(f"{accepted} of {total} accepted; {parsed} of {total} parse", highlight=False)
    for reason, count in reasons.most_common():
        console.print(f"{count:>4}  {reason}", markup=False, highlight=False)


def _reason(detail: str) -> str:
    """A refusal without its particulars (ids, values), so alike refusals count together."""
    text = re.sub(r"'[^'\s]*'|\([^)]*\)", "…", detail)
    text = re.sub(r"\d+", "N", text)
    return text[:110]
