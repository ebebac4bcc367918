"""Loading a sweep spec: a TOML file in jobs/ read into a SweepSpec, with the recipe it names.

Every refusal is a farm.errors.SweepSpecError naming the spec file and the dotted field (for example
`plan.decode.long_output_tokens`); a recipe that does not parse raises the recipe's own RecipeError. A section
left out of the TOML is not measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from farm.errors import SweepSpecError
from farm.recipes.model import Recipe
from farm.recipes.parse import load_recipe
from farm.recipes.sweep import SweepPlan, SweepSpec

__all__ = ["LoadedSweep", "load_sweep", "plan_hash"]


@dataclass(frozen=True)
class LoadedSweep:
    """A validated sweep spec with the recipe it measures and where both came from."""

    spec: SweepSpec
    recipe: Recipe
    spec_path: Path
    recipe_path: Path
    spec_sha256: str


def load_sweep(path: Path, recipe_override: Path | None = None) -> LoadedSweep:
    """Read and validate a sweep spec and its recipe (the spec's `recipe` path is relative to the spec file;
    `recipe_override` replaces it)."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SweepSpecError(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SweepSpecError(f"not UTF-8 text (byte offset {exc.start})", source=source) from exc
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(f"not valid TOML: {exc}", source=source) from exc

    try:
        spec = SweepSpec.model_validate(document)
    except ValidationError as exc:
        raise _spec_error(exc, source) from exc
    if not spec.plan.measures_anything:
        raise SweepSpecError(
            "measures nothing: add at least one of [plan.decode], [plan.prefill], [plan.short_ttft], "
            "[plan.prefix_cache], [plan.concurrency]",
            source=source,
            field="plan",
        )

    recipe_path = recipe_override if recipe_override is not None else Path(os.path.normpath(path.parent / spec.recipe))
    if not recipe_path.is_file():
        raise SweepSpecError(f"no recipe file at {recipe_path}", source=source, field="recipe")
    recipe = load_recipe(recipe_path)
    _check_fits_context(spec.plan, recipe, source)
    return LoadedSweep(
        spec=spec,
        recipe=recipe,
        spec_path=path,
        recipe_path=recipe_path,
        spec_sha256=hashlib.sha256(data).hexdigest(),
    )


def plan_hash(plan: SweepPlan) -> str:
    """sha256 of the plan as canonical JSON (sorted keys, no spaces): equal plans hash equal."""
    canonical = json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _check_fits_context(plan: SweepPlan, recipe: Recipe, source: str) -> None:
    """A prefill prompt longer than the engine's context is refused by the server; refuse it here instead."""
    limit = recipe.serving.max_context_tokens
    if limit is None or plan.prefill is None:
        return
    for index, tokens in enumerate(plan.prefill.prompt_tokens):
        if tokens + plan.prefill.output_tokens > limit:
            raise SweepSpecError(
                f"{tokens} prompt tokens + {plan.prefill.output_tokens} output tokens exceed the recipe's "
                f"context of {limit} tokens ({recipe.id})",
                source=source,
                field=f"plan.prefill.prompt_tokens[{index}]",
            )


def _spec_error(exc: ValidationError, source: str) -> SweepSpecError:
    errors = exc.errors()
    first = errors[0]
    field = _dotted(first["loc"])
    message = _describe(first)
    if len(errors) > 1:
        others = "; ".join(f"{_dotted(e['loc']) or '(spec)'}: {_describe(e)}" for e in errors[1:])
        message += f" (also: {others})"
    return SweepSpecError(message, source=source, field=field or None)


def _dotted(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _describe(error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(error["loc"][:-1])
        return f"unknown key (allowed here: {', '.join(allowed)})" if allowed else "unknown key"
    if error["type"] == "missing":
        return "missing: this key is required"
    message = error["msg"].removeprefix("Value error, ")
    # A table's own contents are long and already in the file; a value is short and worth repeating.
    return message if isinstance(error["input"], dict) else f"{message} (got {error['input']!r})"


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the spec accepts at a table's location, found by walking the models."""
    model: type[BaseModel] | None = SweepSpec
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return []
        model = _model_of(model.model_fields[part].annotation)
    return sorted(model.model_fields) if model is not None else []


def _model_of(annotation: Any) -> type[BaseModel] | None:
    candidates = (annotation, *get_args(annotation))
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None
