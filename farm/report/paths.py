"""File names for exported documents, derived from ids by a safe mapping (pure, no I/O).

An id comes from other people's recipes, so it may hold `../`, a slash, a NUL, a leading dot or a name that
Windows reserves. `safe_file_name` keeps letters, digits, `.`, `_` and `-`, turns every other character into
`_`, never starts with a dot, and adds a short hash of the id whenever it changed anything, so two ids never
collide on one name. The result is one plain path component: joined to a directory, it stays inside it.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 150
"""Characters of the id kept in a name: far below every file system's 255-byte limit, with room for the hash."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RESERVED = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
)


def safe_file_name(identifier: str, suffix: str = "") -> str:
    """A file name for `identifier` that is a single path component (see the module docstring)."""
    name = _UNSAFE.sub("_", identifier)[:MAX_NAME].lstrip(".") or "_"
    if name.split(".")[0].upper() in _RESERVED:
        name = "_" + name
    if name != identifier:
        digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name}-{digest}"
    return name + suffix
