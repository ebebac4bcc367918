"""The simulator as an engine: `python -m farm sim serve` in its own process group, supervised like vLLM."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from farm.engines.process import EngineProcess
from farm.recipes.model import Recipe

SIM_ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
"""The simulator needs no secrets; it gets only what Python needs to start."""


def sim_argv(
    recipe: Recipe,
    *,
    profile: str,
    host: str,
    port: int,
    overrides: Mapping[str, str] = {},
    faults: Sequence[str] = (),
) -> tuple[str, ...]:
    """The simulator's command line for a recipe: it serves the recipe's model under the given profile."""
    argv = [
        sys.executable,
        "-m",
        "farm",
        "sim",
        "serve",
        "--profile",
        profile,
        "--host",
        host,
        "--port",
        str(port),
        "--model",
        recipe.model_id,
    ]
    for key, value in sorted(overrides.items()):
        argv += ["--set", f"{key}={value}"]
    argv += list(faults)
    return tuple(argv)


def sim_engine(
    recipe: Recipe,
    *,
    profile: str,
    port: int,
    log_path: Path,
    host: str = "127.0.0.1",
    overrides: Mapping[str, str] = {},
    faults: Sequence[str] = (),
    stop_grace_s: float = 5.0,
) -> EngineProcess:
    env = {k: v for k, v in os.environ.items() if k in SIM_ENV_ALLOWLIST}
    return EngineProcess(
        sim_argv(recipe, profile=profile, host=host, port=port, overrides=overrides, faults=faults),
        env=env,
        log_path=log_path,
        base_url=f"http://{host}:{port}",
        served_model=recipe.model_id,
        simulated=True,
        stop_grace_s=stop_grace_s,
    )
