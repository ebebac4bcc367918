"""llama.cpp (llama-server): its line of the table (`ENGINE`), its argument spec per release and adapter
(adapter.py), older spellings in current ones (spellings.py), the newer options 0.3.16's dump lacks
(supplement.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from farm.engines.base import EngineKind
from farm.engines.llamacpp.counters import METRICS

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec_of(release: str) -> Callable[[], ArgSpec]:
    def load() -> ArgSpec:
        from farm.engines.llamacpp.adapter import shipped_llamacpp_spec

        return shipped_llamacpp_spec(release)

    return load


def _read_version(executable: tuple[str, ...]) -> str | None:
    from farm.engines.llamacpp.adapter import release_of_build

    return release_of_build(executable)


RELEASES = ("0.3.16", "0.3.36")
"""The llama-cpp-python releases whose vendored llama-server has a shipped spec (adapter.SPEC_FILES), oldest
first; the last is what the farm's workers run (deploy/install-llama-server.sh)."""


ENGINE = EngineKind(
    name="llama.cpp",
    spec=_spec_of(RELEASES[-1]),
    spec_source="farm/engines/llamacpp/llama_server_args_<release>.json, dumped from llama-server --help of the "
    "llama.cpp each llama-cpp-python release vendors (0.3.16's + llamacpp/supplement.py)",
    spec_versions={release: _spec_of(release) for release in RELEASES},
    default_version=RELEASES[-1],
    read_version=_read_version,
    launcher=("llama-server",),
    not_servers={
        "llama-bench": "llama.cpp's benchmark tool",
        "llama-cli": "llama.cpp's interactive client",
        "llama-batched-bench": "llama.cpp's benchmark tool",
        "llama-perplexity": "llama.cpp's perplexity tool",
    },
    serving_options={"max_context_tokens": "--ctx-size"},
    tools={"llama-bench": "benchmark", "llama-cli": "client"},
    registry_flags={
        "gpuLayers": ("--n-gpu-layers",),
        "kvCacheDtype": ("--cache-type-k", "--cache-type-v"),
        "flashAttn": ("--flash-attn",),
    },
    official_images=(r"^(?:ghcr\.io/)?ggml-org/llama\.cpp:server",),
    aliases=("llama-cpp", "llamacpp", "llama_cpp", "llama-server"),
    model_flags=("-m", "--model", "-hf", "--hf-repo"),
    repository_options=("--hf-repo", "--hf-file"),
    context_flags=("-c", "--ctx-size", "--ctx_size"),
    metric_prefix="llamacpp:",
    metric_names=METRICS,
    prefix_cache_resetter="farm.engines.llamacpp.cache",  # slot erase where allowed, `cache_prompt: false`
    artifact="gguf",
    adapter="farm.engines.llamacpp.adapter",
)
