"""vLLM: its line of the table (`ENGINE`), its argument spec (spec.py, per version), its process and failure
classes (process.py), its adapter (adapter.py), vLLM on the CPU (cpu.py, tinymodel.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineKind

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.vllm.spec import shipped_vllm_spec

    return shipped_vllm_spec()


ENGINE = EngineKind(
    name="vllm",
    spec=_spec,
    spec_source="farm/engines/vllm/vllm_serve_args.json, dumped from vLLM 0.32.0's parser",
    launcher=("vllm", "serve"),
    aliases=("vllm-openai",),
    python_modules=("vllm.entrypoints.openai.api_server",),
    model_flags=("--model",),
    positional_model=True,
    parallel_flags={
        "tensor": ("--tensor-parallel-size", "--tensor_parallel_size", "-tp"),
        "pipeline": ("--pipeline-parallel-size", "--pipeline_parallel_size", "-pp"),
        "data": ("--data-parallel-size", "--data_parallel_size", "-dp"),
    },
    context_flags=("--max-model-len", "--max_model_len"),
    metric_prefix="vllm:",
    # Served with VLLM_SERVER_DEV_MODE=1; the hit rate is vllm:prefix_cache_hits over vllm:prefix_cache_queries.
    prefix_cache_reset="/reset_prefix_cache",
    adapter="farm.engines.vllm.adapter",
)
