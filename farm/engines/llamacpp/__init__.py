"""llama.cpp (llama-server): its line of the table (`ENGINE`), its argument spec per release and adapter
(adapter.py), older spellings in current ones (spellings.py), the newer options 0.3.16's dump lacks
(supplement.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineImages, EngineKind
from farm.engines.llamacpp.counters import METRICS

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec
    from farm.engines.environment_names import EngineEnvironment
    from farm.engines.reparse import Mirror


def _spec_of(release: str) -> Callable[[], ArgSpec]:
    def load() -> ArgSpec:
        from farm.engines.llamacpp.spec import shipped_llamacpp_spec

        return shipped_llamacpp_spec(release)

    return load


def _read_version(executable: tuple[str, ...]) -> str | None:
    from farm.engines.llamacpp.spec import release_of_build

    return release_of_build(executable)


RELEASES = ("0.3.16", "0.3.36")
"""The llama-cpp-python releases whose vendored llama-server has a shipped spec (spec.SPEC_FILES), oldest
first; the last is what the farm's workers run (deploy/install-llama-server.sh)."""


def _environment() -> EngineEnvironment:
    from farm.engines.llamacpp.environment import ENVIRONMENT

    return ENVIRONMENT


def _read_back(spec: ArgSpec) -> Mirror:
    from farm.engines.llamacpp.readback import read_back

    return read_back(spec)


def _prepare_demo() -> object:
    from farm.engines.llamacpp.install import ensure_llama_server

    return ensure_llama_server()


def _host_spec(path: Path) -> ArgSpec:
    from farm.engines.llamacpp.spec import load_llamacpp_spec

    return load_llamacpp_spec(path)


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
    # llama-server's spellings of the draft model file (its --help, and newer builds' --spec-draft-model)
    kv_cache_split=(("--cache-type-k", "-ctk"), ("--cache-type-v", "-ctv")),
    draft_model_flags=("--model-draft", "-md", "--spec-draft-model"),
    context_flags=("-c", "--ctx-size", "--ctx_size"),
    metric_prefix="llamacpp:",
    metric_names=METRICS,
    prefix_cache_resetter="farm.engines.llamacpp.cache",  # slot erase where allowed, `cache_prompt: false`
    artifact="gguf",
    adapter="farm.engines.llamacpp.adapter",
    environment=_environment,
    # ghcr.io/ggml-org/llama.cpp's `:server` images start /app/llama-server
    images=EngineImages(
        repositories=("ghcr.io/ggml-org/llama.cpp",),
        tag_prefix="server",
        entrypoints=(None, "/app/llama-server", "llama-server"),
    ),
    read_back=_read_back,
    demo=EngineDemo(
        spec="smollm2-llamacpp-cpu.toml",
        profile="llamacpp-cpu.toml",
        what="llama-server on the CPU, SmolLM2-135M-Instruct",
        stand_in=False,
        prepare=_prepare_demo,
        preparing="building llama-server and fetching SmolLM2",
    ),
    host_spec=_host_spec,
)
