"""The environment a recipe may give its engine: an allowlist, in one place.

A recipe's environment (`tokenized.environment`, leading `VAR=value` words, a container's `environment`) tunes
the engine; it never reaches the worker's own tools (the docker client), never carries a secret (tokens come from
the worker's environment), and never sets what the argument policy judges (an engine option by environment,
a listening address, a plugin, a path).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from farm.errors import ArgumentPolicyError

ALLOWED_PREFIXES = (
    "VLLM_",
    "NCCL_",
    "CUDA_",
    "CUBLAS_",
    "CUDNN_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "SGLANG_",
    "SGL_",
    "GGML_",
    "OLLAMA_",
    "MLX_",
    "HIP_",
    "HSA_",
    "ROCM_",
    "ROCR_",
    "NVIDIA_",
    "TRITON_",
    "FLASHINFER_",
    "UCX_",
    "GLOO_",
    "TP_",
    "SAFETENSORS_",
    "B12X_",
    "CUTE_DSL_",
)
"""Name prefixes of tuning variables a recipe may set."""

_CACHE_PATH = (
    "a cache directory on the recipe author's machine: the worker's own cache (under its roots) applies, and "
    "what the command loads is the same"
)
DROPPED_NAMES = {
    **{
        name: _CACHE_PATH
        for name in (
            "LLAMA_CACHE",
            "HF_HOME",
            "HF_HUB_CACHE",
            "HUGGINGFACE_HUB_CACHE",
            "TRANSFORMERS_CACHE",
            "VLLM_CACHE_ROOT",
            "SGLANG_CACHE_DIR",
            "TRITON_CACHE_DIR",
            "TORCHINDUCTOR_CACHE_DIR",
            "FLASHINFER_WORKSPACE_BASE",
            "XDG_CACHE_HOME",
        )
    },
    "HF_HUB_OFFLINE": "the worker's profile decides whether downloads happen",
    "TRANSFORMERS_OFFLINE": "the worker's profile decides whether downloads happen",
    **{
        name: "the author's choice of devices: the worker assigns the job's devices itself (their count is the "
        "recipe's hardware_count, which the command's parallelism must match)"
        for name in (
            "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "ONEAPI_DEVICE_SELECTOR",
            "ZE_AFFINITY_MASK",
            "GGML_VK_VISIBLE_DEVICES",
        )
    },
}
"""Variables a recipe may carry that are dropped, not refused: they name where the author's machine keeps files,
which says nothing about what runs. Credentials (is_secret_name) are dropped the same way."""

ALLOWED_NAMES = frozenset({"TOKENIZERS_PARALLELISM", "MALLOC_ARENA_MAX", "TZ", "USE_PINNED_ONECCL"})

BENIGN_NAMES = frozenset({"NCCL_CUMEM_HOST_ENABLE", "VLLM_XPU_HOST_STAGED_COLLECTIVES"})
"""Tuning variables whose names trip a refusal pattern without meaning it (`_HOST_` here is host memory: NCCL's
cuMem allocations, collectives staged through host memory on Intel XPUs; not an address)."""

_SECRET = re.compile(r"(TOKEN(?!S|IZ)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_REFUSED_PARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_SECRET, "a secret: tokens come from the worker's own environment, never from a recipe"),
    (re.compile(r"PLUGIN|LOGGING_CONFIG|INSECURE_SERIALIZATION|RUNTIME_LORA|CUSTOM_OP|EXTENSION"), "loads code"),
    (
        re.compile(r"(^|_)(HOST|HOST_IP|IP|ADDR|ADDRESS|PORT|URL|URI|ENDPOINT|SERVER|ORIGINS|PROXY)(_|$)"),
        "sets where the engine listens or connects",
    ),
    (re.compile(r"(^|_)(DIR|PATH|ROOT|HOME|CACHE|FILE|PREFIX)(_|$)"), "names a path on the worker"),
    (re.compile(r"USE_MODELSCOPE|USAGE_STATS|TRACE|OTEL|OTLP"), "sends data or downloads beyond the farm's checks"),
    (re.compile(r"^HF_HUB_OFFLINE$|^TRANSFORMERS_OFFLINE$"), "the worker's profile decides whether downloads happen"),
)
_REFUSED_PREFIXES = {
    "LLAMA_ARG_": "llama-server reads it as an option, past the argument policy",
    "SGLANG_ARG": "the engine reads it as an option, past the argument policy",
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE = re.compile(r"^[\w.,:+=@/ -]*$")

ENV_LIMIT = 64
"""At most this many variables: more is not tuning."""


def refused_reason(name: str) -> str | None:
    """Why a recipe may not set `name`; None when it may."""
    if not _NAME.match(name):
        return "not a valid variable name"
    for prefix, why in _REFUSED_PREFIXES.items():
        if name.startswith(prefix):
            return why
    if name not in ALLOWED_NAMES and not name.startswith(ALLOWED_PREFIXES):
        return f"not on the farm's list of tuning variables (prefixes {', '.join(ALLOWED_PREFIXES[:6])}, ...)"
    if name in BENIGN_NAMES:
        return None
    for pattern, why in _REFUSED_PARTS:
        if pattern.search(name):
            return why
    return None


def dropped_names(environment: Mapping[str, str]) -> dict[str, str]:
    """The recipe's variables that the engine does not get, each with why: credentials and DROPPED_NAMES."""
    dropped: dict[str, str] = {}
    for name in environment:
        if not _NAME.match(name):
            continue
        if is_secret_name(name):
            dropped[name] = "a credential: the engine gets the worker's own, where its profile passes one"
        elif name in DROPPED_NAMES:
            dropped[name] = DROPPED_NAMES[name]
    return dropped


def is_secret_name(name: str) -> bool:
    """A variable that holds a credential (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, *_API_KEY, *_PASSWORD, ...)."""
    return bool(_SECRET.search(name))


def check_recipe_environment(environment: Mapping[str, str], engine: str) -> dict[str, str]:
    """The recipe's environment to give the engine: every name allowed and every value plain, ArgumentPolicyError
    otherwise. Credentials are dropped, never passed: a recipe may name HF_TOKEN, but the engine gets the worker's
    own token, and only where the host's profile passes it."""
    if len(environment) > ENV_LIMIT:
        raise ArgumentPolicyError(f"{len(environment)} variables; at most {ENV_LIMIT}", field="environment")
    kept: dict[str, str] = {}
    for name, value in environment.items():
        if _NAME.match(name) and (is_secret_name(name) or name in DROPPED_NAMES):
            continue
        why = refused_reason(name)
        if why is not None:
            raise ArgumentPolicyError(f"{name!r}: {why} ({engine} recipe)", field="environment")
        plain = _unquoted(value)
        if not isinstance(plain, str) or len(plain) > 1024 or not _VALUE.match(plain):
            raise ArgumentPolicyError(
                f"{name}: the value must be plain text (letters, digits, ._,:+=@/ -), at most 1024 characters",
                field="environment",
            )
        kept[name] = plain
    return kept


def _unquoted(value: object) -> object:
    """A value without the one pair of matching quotes a shell would have removed (`-e MODE="mtp0"` as the
    registry copied it keeps them: `"mtp0"`); a value with other quotes inside stays as it is (and is refused)."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if '"' not in inner and "'" not in inner:
            return inner
    return value


def recipe_environment(recipe: object, engine: str) -> dict[str, str]:
    """The judged environment of a recipe's process launch (the recipe's `environment`; empty when it has none)."""
    return check_recipe_environment(dict(getattr(recipe, "environment", None) or {}), engine)
