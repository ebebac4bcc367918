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
from farm.recipes.fields import max_model_len
from farm.recipes.limits import check_depth, check_strings, decode_text, read_limited
from farm.recipes.model import Recipe
from farm.recipes.parse import load_recipe
from farm.recipes.sweep import SweepPlan, SweepSpec

__all__ = [
    "LoadedSweep",
    "check_fits_context",
    "load_sweep",
    "parse_spec_text",
    "plan_hash",
    "recipe_context",
    "validate_spec",
]


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
    data = read_limited(path, SweepSpecError)
    document = parse_spec_text(decode_text(data, SweepSpecError, source, "a sweep spec"), source)

    spec = validate_spec(document, source)
    if not spec.plan.measures_anything:
        raise SweepSpecError(
            "measures nothing: add at least one of [plan.decode], [plan.prefill], [plan.short_ttft], "
            "[plan.prefix_cache], [plan.concurrency], [plan.open_loop]",
            source=source,
            field="plan",
        )

    recipe_path = recipe_override if recipe_override is not None else Path(os.path.normpath(path.parent / spec.recipe))
    if "\0" in str(recipe_path) or not recipe_path.is_file():
        raise SweepSpecError(f"no recipe file at {recipe_path}", source=source, field="recipe")
    recipe = load_recipe(recipe_path)
    check_fits_context(spec.plan, recipe, source)
    return LoadedSweep(
        spec=spec,
        recipe=recipe,
        spec_path=path,
        recipe_path=recipe_path,
        spec_sha256=hashlib.sha256(data).hexdigest(),
    )


def parse_spec_text(text: str, source: str) -> dict[str, Any]:
    """TOML text into a document, within the limits (depth, integer digits, valid Unicode without NUL)."""
    check_depth(text, SweepSpecError, source)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(f"not valid TOML: {exc}", source=source) from exc
    except (ValueError, RecursionError) as exc:  # tomllib's int() on a 5,000-digit integer, or deep nesting
        raise SweepSpecError(f"not a spec the farm can read: {exc}", source=source) from exc
    check_strings(document, SweepSpecError, source)
    return document


def validate_spec(document: dict[str, Any], source: str) -> SweepSpec:
    """A parsed spec document into a SweepSpec; every error names the field and the limit."""
    try:
        return SweepSpec.model_validate(document)
    except ValidationError as exc:
        raise _spec_error(exc, source) from exc


def plan_hash(plan: SweepPlan) -> str:
    """sha256 of the plan as canonical JSON (sorted keys, no spaces): equal plans hash equal."""
    canonical = json.dumps(plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def recipe_context(recipe: Recipe) -> int | None:
    """The context the recipe's server will have: the smallest of serving.max_context_tokens and the
    argv's own setting in any spelling (`--max-model-len`, `--max_model_len=128k`, `-c`, `--context-length`)."""
    limits = [recipe.serving.max_context_tokens, max_model_len(recipe.argv, recipe.engine.name)]
    known = [limit for limit in limits if limit is not None and limit > 0]
    return min(known) if known else None


def check_fits_context(plan: SweepPlan, recipe: Recipe, source: str) -> None:
    """Every request the plan sends must fit the recipe's context; the server would refuse it, so refuse it
    here, naming the field and the limit."""
    limit = recipe_context(recipe)
    if limit is None:
        return
    needs: list[tuple[str, int, str]] = []
    if plan.prefill is not None:
        for index, tokens in enumerate(plan.prefill.prompt_tokens):
            needs.append(
                (
                    f"plan.prefill.prompt_tokens[{index}]",
                    tokens + plan.prefill.output_tokens,
                    f"{tokens} prompt tokens + {plan.prefill.output_tokens} output tokens",
                )
            )
    if plan.short_ttft is not None:
        tokens = plan.short_ttft.prompt_tokens
        needs.append(("plan.short_ttft.prompt_tokens", tokens + 1, f"{tokens} prompt tokens + 1 output token"))
    if plan.concurrency is not None:
        tokens, output = plan.concurrency.prompt_tokens, plan.concurrency.output_tokens
        needs.append(
            ("plan.concurrency.prompt_tokens", tokens + output, f"{tokens} prompt tokens + {output} output tokens")
        )
    if plan.decode is not None:
        output = plan.decode.long_output_tokens
        needs.append(("plan.decode.long_output_tokens", output, f"{output} output tokens"))
    if plan.open_loop is not None:
        tokens, output = plan.open_loop.prompt_tokens, plan.open_loop.output_tokens
        needs.append(
            ("plan.open_loop.prompt_tokens", tokens + output, f"{tokens} prompt tokens + {output} output tokens")
        )
    for field, total, what in needs:
        if total > limit:
            raise SweepSpecError(
                f"{what} exceed the recipe's context of {limit} tokens ({recipe.id})", source=source, field=field
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
