"""The engines the farm knows: their canonical names and aliases, where each one's argument spec comes from, and
which ones a worker can launch (the others are parsed and checked, and refused at submit with the list)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from farm.engines.argspec import ArgSpec
from farm.errors import ArgumentPolicyError


@dataclass(frozen=True)
class EngineKind:
    """One engine the farm reads recipes for."""

    name: str
    """Canonical, lower case (the recipe's `engine.name`)."""
    spec: Callable[[], ArgSpec]
    launchable: bool
    """Whether a worker adapter launches it (process or container)."""
    spec_source: str
    """Where the option list came from."""


def _vllm() -> ArgSpec:
    from farm.engines.vllm.spec import shipped_vllm_spec

    return shipped_vllm_spec()


def _llamacpp() -> ArgSpec:
    from farm.engines.llamacpp.adapter import shipped_llamacpp_spec

    return shipped_llamacpp_spec()


def _other(name: str) -> Callable[[], ArgSpec]:
    def load() -> ArgSpec:
        from farm.engines.lmstudio.spec import LMSTUDIO
        from farm.engines.mlx.spec import MLX
        from farm.engines.ollama.spec import OLLAMA
        from farm.engines.sglang.spec import SGLANG
        from farm.engines.tabbyapi.spec import TABBYAPI

        return {s.engine: s for s in (SGLANG, OLLAMA, LMSTUDIO, TABBYAPI, MLX)}[name]

    return load


ENGINES: dict[str, EngineKind] = {
    "vllm": EngineKind("vllm", _vllm, True, "farm/engines/vllm/vllm_serve_args.json, dumped from vLLM 0.32.0's parser"),
    "llama.cpp": EngineKind(
        "llama.cpp",
        _llamacpp,
        True,
        "farm/engines/llamacpp/llama_server_args.json, dumped from llama-server --help, + llamacpp/supplement.py",
    ),
    "sglang": EngineKind(
        "sglang", _other("sglang"), True, "sglang/srt/server_args.py at 001067ff (ServerArgs.add_cli_args)"
    ),
    "ollama": EngineKind("ollama", _other("ollama"), False, "ollama cmd/cmd.go (serve, run, pull)"),
    "lmstudio": EngineKind("lmstudio", _other("lmstudio"), False, "lmstudio-ai/lms (server start, load)"),
    "tabbyapi": EngineKind("tabbyapi", _other("tabbyapi"), False, "theroyallab/tabbyAPI common/args.py"),
    "mlx": EngineKind("mlx", _other("mlx"), False, "ml-explore/mlx-lm mlx_lm/server.py"),
}

ALIASES = {
    "llama-cpp": "llama.cpp",
    "llamacpp": "llama.cpp",
    "llama_cpp": "llama.cpp",
    "llama-server": "llama.cpp",
    "lm-studio": "lmstudio",
    "lm studio": "lmstudio",
    "lms": "lmstudio",
    "mlx-lm": "mlx",
    "mlx_lm": "mlx",
    "tabby": "tabbyapi",
    "tabby-api": "tabbyapi",
}


def canonical_engine_name(name: str) -> str:
    """An engine's canonical name, regardless of case and known aliases (`vLLM`, `llama-cpp`)."""
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
