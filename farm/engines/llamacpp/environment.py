"""The variables llama-server reads that a recipe may set, or may not: environment.json is every name llama.cpp's
sources (as vendored in llama-cpp-python 0.3.36) pass to getenv or their backends' getenv wrappers
(deploy/gen_engine_environment.py); here, what the farm adds by hand."""

from __future__ import annotations

from pathlib import Path

from farm.engines.environment_names import LISTENS, LOADS, SWITCH, WRITES, EngineEnvironment

ENVIRONMENT = EngineEnvironment(
    refused={
        "GGML_BACKEND_PATH": LOADS,
        "GGML_ET_KERNELS_PATH": LOADS,
        "GGML_BACKTRACE_LLDB": "runs a debugger on the engine",
        "GGML_VULKAN_OUTPUT_TENSOR": WRITES,
        "GGML_OPENVINO_DEBUG_OUTPUT": WRITES,
        "LLAMA_SERVER_CHILD_MODE": "runs the server as another process's child",
        "LLAMA_APP_CMD": "runs another command",
    },
    refused_prefixes={
        "GGML_RPC_": LISTENS,
        "GGML_RDMA_": LISTENS,
        "GGML_REMOTING_": LISTENS,
        "AIP_": "llama-server's Vertex AI mode (its own port and routes)",
    },
    tuning={
        f"GGML_SYCL_{name}": (SWITCH, "llama.cpp's SYCL backend switches (its SYCL guide; some from SYCL forks)")
        for name in (
            "DISABLE_OPT",
            "DISABLE_GRAPH",
            "DISABLE_DNN",
            "PRIORITIZE_DMMV",
            "ASYNC_CPY_TENSOR",
            "ASYNC_PEER_COPY",
            "COMM_ALLREDUCE",
            "COMM_SINGLE_KERNEL",
        )
    },
    own_prefixes=("GGML_", "LLAMA_"),
    declared=Path(__file__).parent / "environment.json",
)
