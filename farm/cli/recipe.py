"""`farm recipe show|check`: parse and validate recipe documents."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from farm.cli.common import console, err_console, farm_errors, print_json
from farm.engines.policy import check_recipe_for_submit
from farm.errors import InputError
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
    table.add_row("argv", " ".join(recipe.argv))
    if recipe.container:
        table.add_row("image", recipe.container.image)
    table.add_row("source", recipe.provenance.source_format)
    table.add_row("sha256", recipe.provenance.content_sha256)
    console.print(table)


@app.command("check")
def check(files: list[Path] = typer.Argument(..., help="recipe documents")) -> None:
    """Validate many recipes, and judge each one's command as `farm submit` would; exit non-zero if any is bad.
    Nothing is stored."""
    bad = 0
    for file in files:
        try:
            recipe = load_recipe(file)
            check_recipe_for_submit(recipe)
        except InputError as exc:
            bad += 1
            where = "" if exc.source else f"{file}: "
            err_console.print(f"FAIL {where}{exc}", markup=False, highlight=False, soft_wrap=True)
            continue
        console.print(f"ok   {file}: {recipe.id} ({recipe.hardware_class})", markup=False, highlight=False)
    if bad:
        raise typer.Exit(2)
