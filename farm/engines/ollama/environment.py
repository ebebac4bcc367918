"""Ollama's documented tuning variables (ollama envconfig) a recipe may set, and those it may not."""

from __future__ import annotations

from farm.engines.environment_names import LISTENS, LOADS, NUMBER, SWITCH, TOKEN, EngineEnvironment

_TUNING = "Ollama's scheduling and memory tuning"

ENVIRONMENT = EngineEnvironment(
    refused={
        "OLLAMA_LLM_LIBRARY": LOADS,
        "OLLAMA_MODELS": "names a path on the worker",
        "OLLAMA_ORIGINS": LISTENS,
    },
    tuning={
        **{
            name: (NUMBER, _TUNING)
            for name in (
                "OLLAMA_NUM_PARALLEL",
                "OLLAMA_MAX_LOADED_MODELS",
                "OLLAMA_MAX_QUEUE",
                "OLLAMA_CONTEXT_LENGTH",
                "OLLAMA_GPU_OVERHEAD",
            )
        },
        **{
            name: (SWITCH, _TUNING)
            for name in ("OLLAMA_FLASH_ATTENTION", "OLLAMA_SCHED_SPREAD", "OLLAMA_NEW_ENGINE", "OLLAMA_DEBUG")
        },
        "OLLAMA_KV_CACHE_TYPE": (TOKEN, "Ollama's KV cache type"),
        "OLLAMA_KEEP_ALIVE": (TOKEN, "how long Ollama keeps a model loaded"),
        "OLLAMA_LOAD_TIMEOUT": (TOKEN, "how long Ollama waits for a model to load"),
    },
)
