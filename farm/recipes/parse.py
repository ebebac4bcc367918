"""Reading recipe documents: local-ai-registry/v1 JSON and LocalMaxxing run pages, into one validated Recipe.

Every refusal is a farm.errors.RecipeError that names the file and the dotted field, so a bad recipe is
caught before anything is queued; no input makes the parsers raise anything else (farm.recipes.limits bounds
size, nesting, numbers and text). The launch argv is the recipe's core: it is read from the most faithful
source the document has (farm.recipes.registry.parse_registry lists the order), rewritten to the engine's
canonical launcher (farm.recipes.commands), kept free of environment words, and checked against the engine
and the hardware count the recipe claims. RecipeProvenance.command_source says which field it came from.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from farm.errors import RecipeError
from farm.recipes.fields import parallel_sizes
from farm.recipes.limits import decode_text, read_limited
from farm.recipes.model import (
    KNOWN_ENGINES,
    Recipe,
)
from farm.recipes.page import PAGE_FORMAT, PAGE_PREFIX, parse_localmaxxing_page, split_token_list
from farm.recipes.registry import REGISTRY_SCHEMA, parse_registry

__all__ = [
    "KNOWN_ENGINES",
    "PAGE_FORMAT",
    "REGISTRY_SCHEMA",
    "load_recipe",
    "parallel_sizes",
    "parse_localmaxxing_page",
    "parse_recipe_bytes",
    "parse_registry",
    "split_token_list",
]


def load_recipe(path: Path, *, max_bytes: int | None = None) -> Recipe:
    """Read a recipe file and parse it by its content: JSON is a registry recipe, text with
    `localmaxxing · ...` section headers is a LocalMaxxing run page. A file over `max_bytes`
    (default: Settings.max_input_bytes, 1 MB) is refused unread."""
    source = str(path)
    return parse_recipe_bytes(read_limited(path, RecipeError, limit=max_bytes), source)


def parse_recipe_bytes(data: bytes, source: str) -> Recipe:
    """A recipe document's bytes, parsed by content (see load_recipe)."""
    text = decode_text(data, RecipeError, source, "a recipe")
    digest = hashlib.sha256(data).hexdigest()
    if text.lstrip().startswith(("{", "[")):
        return parse_registry(text, source, content_sha256=digest)
    if any(line.strip().startswith(PAGE_PREFIX) for line in text.splitlines()):
        return parse_localmaxxing_page(text, source, content_sha256=digest)
    raise RecipeError(
        f"not a recipe: neither {REGISTRY_SCHEMA} JSON nor a LocalMaxxing run page "
        f"(no '{PAGE_PREFIX.strip()}' section headers)",
        source=source,
    )
