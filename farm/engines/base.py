"""The engine seam: what the worker needs from an engine under test, whatever runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Engine(Protocol):
    """One engine instance for one job attempt. `stop` is safe to call more than once and on every exit path."""

    @property
    def base_url(self) -> str: ...

    @property
    def served_model(self) -> str: ...

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def simulated(self) -> bool: ...

    @property
    def environment(self) -> dict[str, str]:
        """The environment the engine was started with (secrets are scrubbed before it is stored)."""
        ...

    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the engine serves, or raise EngineError (start-up timeout, exited, crashed)."""
        ...

    def version(self) -> str | None: ...

    def alive(self) -> bool: ...

    def stop(self) -> int | None:
        """Stop the engine's whole process group; return its exit status (None if it never started)."""
        ...

    def log_text(self) -> str: ...

    def classify(self, *, started: bool) -> str:
        """The failure class of an engine that exited, from its log and exit."""
        ...

    @property
    def log_path(self) -> Path: ...
