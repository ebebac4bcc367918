"""bench farm: queue recipe benchmark sweeps, run them on matching hosts, store every figure with provenance."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("bench-farm")
except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
    __version__ = "0+unknown"
