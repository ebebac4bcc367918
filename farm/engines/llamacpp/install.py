"""llama-server for the CPU demo and tests: built from the llama.cpp that llama-cpp-python vendors, with the
SmolLM2 GGUF, once per machine (deploy/install-llama-server.sh, cached in ~/.cache/bench-farm)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import farm
from farm.errors import FarmError, InputError

INSTALLER = Path(farm.__file__).resolve().parent.parent / "deploy" / "install-llama-server.sh"
INSTALL_TIMEOUT_S = 3600.0
"""About 12 minutes on 2 cores the first time (a C++ build); instant after."""


def ensure_llama_server(installer: Path = INSTALLER) -> tuple[Path, Path]:
    """Build llama-server and fetch the SmolLM2 GGUF once per machine; return (binary, model file)."""
    if not installer.exists():
        raise InputError("the llama-server installer is missing (run from a checkout)", source=installer)
    try:
        done = subprocess.run(
            ["bash", str(installer)], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=True
        )
    except subprocess.CalledProcessError as exc:
        raise FarmError(f"{installer} failed (exit {exc.returncode}): {(exc.stderr or '')[-2000:]}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FarmError(f"{installer} did not finish: {exc}") from exc
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if len(lines) < 2:
        raise FarmError(f"{installer} printed no binary and model paths: {done.stdout[-500:]!r}")
    return Path(lines[-2]), Path(lines[-1])
