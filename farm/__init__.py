"""bench farm: queue recipe benchmark sweeps, run them on matching hosts, store every figure with provenance."""

from __future__ import annotations

from functools import cache


@cache
def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bench-farm")
    except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    """`farm.__version__`, read from the installed metadata on first use: importlib.metadata costs a CLI
    command's start a tenth of a second, and most commands never print the version."""
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module 'farm' has no attribute {name!r}")
