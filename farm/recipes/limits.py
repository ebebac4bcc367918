"""Bounds on every document the farm reads from users: size, nesting, numbers and text.

Recipes and sweep specs are other people's input. A parser must turn every bad document into the farm's own
InputError naming the file and the field, never a RecursionError from deep nesting, a ValueError from an
integer of thousands of digits, or a UnicodeEncodeError later from a lone surrogate. These helpers run before
and after the standard parsers (json, tomllib) so those never see input they could crash on.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.errors import InputError

MAX_INPUT_BYTES = 1_000_000
"""A recipe or spec file (1 MB); the seed recipe is 40 KB. Settings.max_input_bytes overrides it."""
MAX_DEPTH = 64
"""Nesting of objects and arrays; real recipes nest about 8 deep."""
MAX_INT_DIGITS = 30
"""Digits of one integer: enough for any byte count or token count, far below Python's 4,300-digit limit."""
MAX_STRING_CHARS = 200_000
"""One string value (a recipe's notes run to a few kilobytes)."""

ErrorFactory = Callable[..., InputError]


def max_input_bytes() -> int:
    """The size limit from the process settings (FARM_MAX_INPUT_BYTES), else the default."""
    from farm.settings import Settings

    return int(getattr(Settings(), "max_input_bytes", MAX_INPUT_BYTES))


def read_limited(path: Path, error: ErrorFactory, *, limit: int | None = None) -> bytes:
    """A file's bytes, refused when it cannot be read or is larger than the limit."""
    source = str(path)
    limit = max_input_bytes() if limit is None else limit
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    if len(data) > limit:
        raise error(f"larger than the {limit:,}-byte limit for an input file (FARM_MAX_INPUT_BYTES)", source=source)
    return data


def decode_text(data: bytes, error: ErrorFactory, source: str, what: str) -> str:
    """UTF-8 text without NUL bytes."""
    if not data.strip():
        raise error(f"empty file: {what} needs content", source=source)
    nul = data.find(b"\0")
    if nul >= 0:
        raise error(f"binary file (NUL byte at offset {nul}): {what} is UTF-8 text", source=source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"binary file (not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}): {what} is UTF-8 text",
            source=source,
        ) from exc


_STRINGS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'')
_BRACKETS = re.compile(r"[\[\]{}]")


def nesting_depth(text: str) -> int:
    """The deepest nesting of `{`/`[` outside strings (JSON, and TOML's inline tables and arrays).

    Strings are cut out first (double-quoted with escapes, TOML's single-quoted literals), then only the
    brackets are walked, so a 1 MB document costs a few milliseconds."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub("", text)):
        if match.group() in "{[":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(depth - 1, 0)
    return deepest


def check_depth(text: str, error: ErrorFactory, source: str) -> None:
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise error(f"nested {depth} levels deep, more than the limit of {MAX_DEPTH}", source=source)


def load_json(text: str, error: ErrorFactory, source: str) -> Any:
    """json.loads with the limits: depth, integer digits, no NaN or Infinity; then every string checked."""
    check_depth(text, error, source)

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise error(f"an integer of {len(digits)} digits, more than {MAX_INT_DIGITS}", source=source)
        return int(digits)

    def parse_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise error(f"the number {literal[:40]} is out of range", source=source)
        return value

    def parse_constant(name: str) -> float:
        raise error(f"{name} is not a JSON number", source=source)

    try:
        document = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except RecursionError as exc:  # the depth check above makes this unreachable; kept as the last guard
        raise error("nested too deeply to read", source=source) from exc
    check_strings(document, error, source)
    return document


def check_strings(document: Any, error: ErrorFactory, source: str) -> None:
    """Every key and string is valid Unicode (no lone surrogates), without NUL, and not huge; numbers finite.

    Walks without recursion, so depth is bounded only by the check that ran before parsing."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                _check_text(str(key), error, source, child, "key")
                stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, error, source, path, "value")
        elif isinstance(value, float) and not math.isfinite(value):
            raise error("not a finite number", source=source, field=path or None)


def _check_text(text: str, error: ErrorFactory, source: str, path: str, what: str) -> None:
    if len(text) > MAX_STRING_CHARS:
        raise error(f"a {what} of {len(text):,} characters, more than {MAX_STRING_CHARS:,}", source=source, field=path)
    if "\0" in text:
        raise error(f"the {what} holds a NUL character", source=source, field=path or None)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            f"the {what} holds a lone surrogate (\\u{ord(text[exc.start]):04x}): not valid Unicode text",
            source=source,
            field=path or None,
        ) from exc


def dumps_safe(value: Any) -> str:
    """JSON for a value that passed check_strings (used by tests and the fuzz bench to round-trip)."""
    return json.dumps(value, allow_nan=False)
