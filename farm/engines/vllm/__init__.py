"""vLLM: its line of the table (`ENGINE`), its argument spec (spec.py, per version), its process and failure
classes (process.py), its adapter (adapter.py), vLLM on the CPU (cpu.py, tinymodel.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineImages, EngineKind
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec
    from farm.engines.environment_names import EngineEnvironment
    from farm.engines.reparse import Mirror


def _spec_of(version: str) -> Callable[[], ArgSpec]:
    def load() -> ArgSpec:
        from farm.engines.vllm.spec import shipped_vllm_spec

        return shipped_vllm_spec(version)

    return load


VERSIONS = ("0.32.0", "0.33.0")
"""The vLLM releases with a shipped spec (spec.SERVE_ARGS_FILES), oldest first; the last is the default."""


def _environment() -> EngineEnvironment:
    from farm.engines.vllm.environment import ENVIRONMENT

    return ENVIRONMENT


def _read_back(spec: ArgSpec) -> Mirror:
    from farm.engines.vllm.readback import read_back

    return read_back(spec)


def _prepare_demo() -> object:
    from farm.engines.vllm.cpu import ensure_tiny_model

    return ensure_tiny_model()


def _host_spec(path: Path) -> ArgSpec:
    from farm.engines.vllm.spec import load_vllm_spec

    return load_vllm_spec(path)


def _mtp_options(tokens: int) -> tuple[str, ...]:
    """Its MTP drafting with that many tokens: one --speculative-config."""
    config = json.dumps({"method": "mtp", "num_speculative_tokens": tokens}, separators=(",", ":"))
    return ("--speculative-config", config)


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
    other_subcommands=True,
    gguf_file_only=True,
    mtp_options=_mtp_options,
    kv_cache_dtype_option="--kv-cache-dtype",
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
    environment=_environment,
    images=EngineImages(
        repositories=("vllm/vllm-openai",), entrypoints=(None, "vllm"), subcommand=("serve",), canonical_arguments=True
    ),
    read_back=_read_back,
    loads_model_id=True,
    # What vLLM needs from the worker's environment; tokens (HF_TOKEN) pass only when a profile adds them.
    host_env_allowlist=(
        *("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR"),
        *("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLLM_*"),
    ),
    demo=EngineDemo(
        spec="tiny-llama-cpu.toml",
        profile="cpu.toml",
        what="vLLM on the CPU, tiny random model",
        stand_in=False,
        prepare=_prepare_demo,
        preparing="building the tiny model",
    ),
    host_spec=_host_spec,
    container_adapter="farm.engines.vllm.container",
    read_version=version_reader(
        command=("--version",), package="vllm", modules=("vllm.entrypoints.openai.api_server",), drop=("serve",)
    ),
)
