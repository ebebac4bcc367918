"""Files only the worker's own user reads: engine logs, the spool, the demo's log.

An engine log holds what the engine printed, secrets included before the scrubber sees it (the copy stored as an
artifact is scrubbed; the file on the worker's disk is not), so it is created 0600 in a 0700 directory, and an
older file with looser permissions is tightened when it is opened again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


def private_directory(path: Path) -> Path:
    """`path` and its missing parents, created 0700 (a directory that exists keeps its mode)."""
    path.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    return path


@overload
def open_private(path: Path, mode: Literal["ab", "wb"] = "ab") -> BinaryIO: ...
@overload
def open_private(path: Path, mode: Literal["a", "w"], *, encoding: str = "utf-8") -> TextIO: ...
def open_private(path: Path, mode: Literal["ab", "a", "w", "wb"] = "ab", **kwargs: Any) -> IO[Any]:
    """`path` opened for appending or writing, readable by its owner only (0600 whatever the umask)."""
    private_directory(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise
