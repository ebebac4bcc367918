"""The simulator as an engine: `python -m farm sim serve` in its own process group, supervised like vLLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from farm.engines.process import EngineProcess
from farm.recipes.model import Recipe
from farm.sim.launch import SIM_ENV_ALLOWLIST, sim_process, sim_serve_argv

__all__ = ["SIM_ENV_ALLOWLIST", "sim_argv", "sim_engine"]


def sim_argv(
    recipe: Recipe,
    *,
    profile: str,
    host: str,
    port: int,
    overrides: Mapping[str, str] = {},
    faults: Sequence[str] = (),
) -> tuple[str, ...]:
    """The simulator's command line for a recipe: it serves the recipe's model under the given profile, and checks
    the recipe's --max-model-len at start as vLLM does."""
    return sim_serve_argv(
        profile=profile,
        host=host,
        port=port,
        model=recipe.model_id,
        overrides=overrides,
        faults=faults,
        max_model_len=_max_model_len(recipe.argv),
    )


def _max_model_len(argv: Sequence[str]) -> int | None:
    """The value of `--max-model-len N` or `--max-model-len=N` in a recipe's command, if it names a number."""
    for index, word in enumerate(argv):
        name, _, inline = word.partition("=")
        if name.replace("_", "-") != "--max-model-len":
            continue
        value = inline if inline else (argv[index + 1] if index + 1 < len(argv) else "")
        return int(value) if value.isdigit() else None
    return None


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
    return sim_process(
        sim_argv(recipe, profile=profile, host=host, port=port, overrides=overrides, faults=faults),
        host=host,
        port=port,
        model=recipe.model_id,
        log_path=log_path,
        stop_grace_s=stop_grace_s,
    )
