"""vLLM: its line of the table (`ENGINE`), its argument spec (spec.py, per version), its process and failure
classes (process.py), its adapter (adapter.py), vLLM on the CPU (cpu.py, tinymodel.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from farm.engines.base import EngineKind

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec_of(version: str) -> Callable[[], ArgSpec]:
    def load() -> ArgSpec:
        from farm.engines.vllm.spec import shipped_vllm_spec

        return shipped_vllm_spec(version)

    return load


VERSIONS = ("0.32.0", "0.33.0")
"""The vLLM releases with a shipped spec (spec.SERVE_ARGS_FILES), oldest first; the last is the default."""


ENGINE = EngineKind(
    name="vllm",
    spec=_spec_of(VERSIONS[-1]),
    spec_source="farm/engines/vllm/vllm_serve_args_<version>.json, dumped from each vLLM release's parser",
    spec_versions={version: _spec_of(version) for version in VERSIONS},
    default_version=VERSIONS[-1],
    launcher=("vllm", "serve"),
    serving_options={
        "tensor_parallel": "--tensor-parallel-size",
        "max_context_tokens": "--max-model-len",
        "gpu_memory_utilization": "--gpu-memory-utilization",
    },
    registry_flags={
        "tensorParallel": ("--tensor-parallel-size",),
        "kvCacheDtype": ("--kv-cache-dtype",),
        "attentionBackend": ("--attention-backend",),
    },
    official_images=(r"^(?:docker\.io/)?vllm/vllm-openai(?:[:@]|$)",),
    aliases=("vllm-openai",),
    python_modules=("vllm.entrypoints.openai.api_server",),
    model_flags=("--model",),
    revision_option="--revision",
    positional_model=True,
    parallel_flags={
        "tensor": ("--tensor-parallel-size", "--tensor_parallel_size", "-tp"),
        "pipeline": ("--pipeline-parallel-size", "--pipeline_parallel_size", "-pp"),
        "data": ("--data-parallel-size", "--data_parallel_size", "-dp"),
    },
    context_flags=("--max-model-len", "--max_model_len"),
    metric_prefix="vllm:",
    # Served only with VLLM_SERVER_DEV_MODE=1 (off unless the profile says dev_mode_reset: vllm/cache.py); the hit
    # rate is vllm:prefix_cache_hits over vllm:prefix_cache_queries.
    prefix_cache_reset="/reset_prefix_cache",
    prefix_cache_resetter="farm.engines.vllm.cache",  # reads {"success": ...}, says 404 as dev mode off
    adapter="farm.engines.vllm.adapter",
)
