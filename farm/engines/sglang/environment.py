"""The variables SGLang reads that a recipe may set, or may not: environment.json is every field of SGLang
0.5.23's sglang/srt/environ.py and every name its code reads (deploy/gen_engine_environment.py); here, what the
farm adds by hand."""

from __future__ import annotations

from pathlib import Path

from farm.engines.environment_names import (
    DOWNLOADS,
    DUMPS,
    LISTENS,
    LOADS,
    NUMBER,
    PICKLE,
    SWITCH,
    TESTING,
    TOKEN,
    EngineEnvironment,
)

_CI = "the engine's CI mode, not a setting of a benchmark"

ENVIRONMENT = EngineEnvironment(
    refused={
        "SGLANG_CUDA_COREDUMP": DUMPS,
        "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": DUMPS,
        "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "runs py-spy on the engine and writes its dump",
        "SGLANG_USE_MODELSCOPE": DOWNLOADS,
        "SGLANG_USE_PICKLE_IPC": PICKLE,
        "SGLANG_RUST_SERVER": "replaces the HTTP server the farm talks to",
        "SGLANG_LOAD_SNAPSHOT_USE_ZMQ": LISTENS,
        "SGLANG_IS_IN_CI": _CI,
        "SGLANG_IS_IN_CI_AMD": _CI,
        "SGLANG_PLUGINS": LOADS,
        "SGLANG_EXTERNAL_MODEL_PACKAGE": LOADS,
        "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE": LOADS,
        "SGLANG_HTTP_SERVER_APP_PATH": LOADS,
    },
    refused_prefixes={
        "SGLANG_TEST_": TESTING,
    },
    tuning={
        "SGLANG_MAMBA_SSM_DTYPE": (TOKEN, "a data type by name"),
        "SGLANG_MAMBA_CONV_DTYPE": (TOKEN, "a data type by name"),
        "SGLANG_ENABLE_DEEP_GEMM": (SWITCH, "an older SGLang's DeepGEMM switch"),
        "SGLANG_ENABLE_SPEC_V2": (SWITCH, "an older SGLang's speculative decoding v2 switch"),
        "SGLANG_EXL3_MAX_BATCH_TOKENS": (NUMBER, "an SGLang EXL3 overlay build's batch budget"),
        "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK": (SWITCH, "an older SGLang's TP memory balance check"),
    },
    own_prefixes=("SGLANG_",),
    declared=Path(__file__).parent / "environment.json",
    libraries=("flashinfer",),
    rewrites=(("SGL_", "SGLANG_"),),
)
