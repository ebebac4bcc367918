"""Reading recipe documents: local-ai-registry/v1 JSON and LocalMaxxing run pages, into one validated Recipe.

Every refusal is a farm.errors.RecipeError that names the file and the dotted field, so a bad recipe is
caught before anything is queued. The launch argv is the recipe's core: it is taken from the tokenized
arguments when a document has them, cross-checked against the observed command line, and checked against the
engine and the hardware count the recipe claims.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from farm.errors import RecipeError
from farm.recipes.fields import parallel_sizes
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
    "parse_registry",
    "split_token_list",
]


def load_recipe(path: Path) -> Recipe:
    """Read a recipe file and parse it by its content: JSON is a registry recipe, text with
    `localmaxxing · ...` section headers is a LocalMaxxing run page."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecipeError(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    text = _decode(data, source)
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


def _decode(data: bytes, source: str) -> str:
    if not data.strip():
        raise RecipeError("empty file: a recipe needs content", source=source)
    nul = data.find(b"\0")
    if nul >= 0:
        raise RecipeError(f"binary file (NUL byte at offset {nul}): a recipe is UTF-8 text", source=source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RecipeError(
            f"binary file (not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}): a recipe is UTF-8 text",
            source=source,
        ) from exc
