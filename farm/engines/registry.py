"""The table of engines: every engine the farm knows, one line each, defined in the engine's own folder
(`farm/engines/<engine>/__init__.py`, an `EngineKind`). Recipes, the judge, the worker, the runner, the exports,
the endpoint bench and the simulator ask this table; no other room names an engine.

An engine without an adapter is parsed and judged, and refused at submit with the list of those a worker runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from farm.engines import llamacpp, lmstudio, mlx, ollama, sglang, tabbyapi, vllm
from farm.engines.base import EngineKind
from farm.errors import ArgumentPolicyError

__all__ = [
    "ALIASES",
    "DEFAULT_ENGINE",
    "ENGINES",
    "EngineKind",
    "canonical_engine_name",
    "engine_kind",
    "launchable_engines",
]

ENGINES: dict[str, EngineKind] = {
    kind.name: kind
    for kind in (
        vllm.ENGINE,
        llamacpp.ENGINE,
        sglang.ENGINE,
        ollama.ENGINE,
        lmstudio.ENGINE,
        tabbyapi.ENGINE,
        mlx.ENGINE,
    )
}

DEFAULT_ENGINE: str = vllm.ENGINE.name
"""The engine a bare argv is read as where no engine is given (its parallelism and context options)."""

ALIASES: Mapping[str, str] = {
    **{name: name for name in ENGINES},
    **{alias: kind.name for kind in ENGINES.values() for alias in kind.aliases},
}
"""The one alias table: every spelling of an engine's name (lower case) to its canonical name."""


def canonical_engine_name(name: str) -> str:
    """An engine's canonical name, regardless of case and known aliases (`vLLM`, `llama-cpp`); an unknown name is
    returned as given (lowercased), for `engine_kind` to refuse."""
    key = name.strip().lower()
    return ALIASES.get(key, key)


def engine_kind(name: str) -> EngineKind:
    canonical = canonical_engine_name(name)
    if canonical not in ENGINES:
        raise ArgumentPolicyError(
            f"unknown engine {name!r} (the farm reads: {', '.join(ENGINES)})", field="engine.name"
        )
    return ENGINES[canonical]


def launchable_engines() -> tuple[str, ...]:
    """Engines a worker adapter can launch."""
    return tuple(name for name, kind in ENGINES.items() if kind.launchable)


def counter_families() -> dict[str, Mapping[str, str]]:
    """Each engine's /metrics prefix and its counters under the farm's names (vLLM's own need no mapping): what
    a sweep that was not told its engine's names learns them from (an endpoint's server)."""
    return {kind.metric_prefix: kind.metric_names for kind in ENGINES.values() if kind.metric_prefix}


def cache_resets() -> dict[str, str | None]:
    """Each engine's /metrics prefix and the path it empties its prefix cache at (None: it has none): what a
    sweep resets before a cold measurement, once it knows the engine from its /metrics page."""
    return {kind.metric_prefix: kind.prefix_cache_reset for kind in ENGINES.values() if kind.metric_prefix}


def cache_resetters() -> dict[str, str]:
    """Each engine's /metrics prefix and the module of its own reset procedure, for the engines that have one
    (`EngineKind.prefix_cache_resetter`: llama.cpp's erase per slot); it takes the place of `cache_resets`."""
    return {
        kind.metric_prefix: kind.prefix_cache_resetter
        for kind in ENGINES.values()
        if kind.metric_prefix and kind.prefix_cache_resetter
    }
