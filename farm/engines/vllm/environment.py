"""The variables vLLM reads that a recipe may set, or may not: environment.json is every name of vLLM 0.32.0's
vllm/envs.py with its declared kind (deploy/gen_engine_environment.py); here, what the farm adds by hand."""

from __future__ import annotations

from pathlib import Path

from farm.engines.environment_names import (
    DOWNLOADS,
    LOADS,
    NUMBER,
    PICKLE,
    SWITCH,
    TOKEN,
    WRITES,
    EngineEnvironment,
)

ENVIRONMENT = EngineEnvironment(
    refused={
        "VLLM_ALLOW_INSECURE_SERIALIZATION": PICKLE,
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets API clients load adapters at run time",
        "VLLM_SERVER_DEV_MODE": "opens development endpoints (collective_rpc, reset, sleep) on the API",
        "VLLM_USE_MODELSCOPE": DOWNLOADS,
        "VLLM_TRACE_FUNCTION": WRITES,
        "VLLM_ASSETS_CACHE_MODEL_CLEAN": "deletes downloaded model files after loading",
        "VLLM_MEDIA_URL_ALLOW_REDIRECTS": DOWNLOADS,
        "VLLM_ENABLE_RESPONSES_API_STORE": "keeps every response in the engine's memory",
        "VLLM_NCCL_SO_PATH": LOADS,
        "VLLM_CUDART_SO_PATH": LOADS,
        "VLLM_CUDA_COMPATIBILITY_PATH": LOADS,
        "VLLM_RUST_FRONTEND_PATH": LOADS,
        "VLLM_PLUGINS": LOADS,
        "VLLM_DEBUG_DUMP_PATH": WRITES,
        "VLLM_TORCH_PROFILER_DIR": WRITES,
    },
    tuning={
        "VLLM_CPU_OMP_THREADS_BIND": (TOKEN, "the CPUs vLLM's CPU backend binds its threads to"),
        "VLLM_ATTENTION_BACKEND": (TOKEN, "the attention backend by its name in vLLM's fixed list"),
        "VLLM_DISABLED_KERNELS": (TOKEN, "kernels vLLM may not pick, by name"),
        "VLLM_LOGGING_LEVEL": (TOKEN, "vLLM's log level"),
        "VLLM_PP_LAYER_PARTITION": (TOKEN, "how pipeline stages split the layers (numbers)"),
        "VLLM_USE_V1": (SWITCH, "an older vLLM's V1 engine switch"),
        "VLLM_FLASH_ATTN_VERSION": (NUMBER, "an older vLLM's FlashAttention version"),
        "VLLM_MAX_TOKENS_PER_EXPERT": (NUMBER, "a MoE kernel's token budget in vLLM builds that read it"),
        "VLLM_XPU_ENABLE_XPU_GRAPH": (SWITCH, "a vLLM XPU build's graph switch (registry XPU recipes)"),
        "VLLM_XPU_HOST_STAGED_COLLECTIVES": (SWITCH, "a patched vLLM XPU build's collectives through host memory"),
    },
    own_prefixes=("VLLM_",),
    declared=Path(__file__).parent / "environment.json",
    libraries=("flashinfer",),
)
