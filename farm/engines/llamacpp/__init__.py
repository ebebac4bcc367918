"""llama.cpp (llama-server): its line of the table (`ENGINE`), its argument spec and adapter (adapter.py), the
newer options the shipped dump lacks (supplement.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineKind
from farm.engines.llamacpp.counters import METRICS

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.llamacpp.adapter import shipped_llamacpp_spec

    return shipped_llamacpp_spec()


ENGINE = EngineKind(
    name="llama.cpp",
    spec=_spec,
    spec_source="farm/engines/llamacpp/llama_server_args.json, dumped from llama-server --help, + "
    "llamacpp/supplement.py",
    launcher=("llama-server",),
    aliases=("llama-cpp", "llamacpp", "llama_cpp", "llama-server"),
    model_flags=("-m", "--model", "-hf", "--hf-repo"),
    context_flags=("-c", "--ctx-size", "--ctx_size"),
    metric_prefix="llamacpp:",
    metric_names=METRICS,
    artifact="gguf",
    adapter="farm.engines.llamacpp.adapter",
)
