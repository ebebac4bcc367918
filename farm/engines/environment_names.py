"""The names a recipe's environment may carry, by exact name, each with its reason.

Three sources, checked in this order by farm.engines.environment:

1. REFUSED: names refused whatever their value, each with why. They load a library or code, redirect a download,
   switch off a checksum, name a file the engine writes (or reads), open a listener, or inject test faults.
2. The runtime tables (RUNTIME): the CUDA/ROCm/NCCL/PyTorch/OpenMP/hub variables every engine's runtime reads,
   hand-listed from their documentation, each allowed one with what it tunes.
3. The engines' own declared variables, generated from their packages by deploy/gen_engine_environment.py
   (vllm_environment.json, sglang_environment.json, llama_server_environment.json, flashinfer_environment.json):
   a declared switch or number tunes the engine and passes with a value of its kind; a declared string (a path,
   a URL, a module name) passes only where ENGINE_STRINGS names it with its reason.

A name in none of them is refused: the farm passes what it knows, not what a prefix suggests.
"""

from __future__ import annotations

SWITCH = "switch"
"""A value 0/1/true/false/yes/no/on/off."""
NUMBER = "number"
"""An integer or a decimal number."""
TOKEN = "token"  # noqa: S105 (a kind of value, a plain word; not a credential)
"""A short word or list of words (letters, digits, `_.,:+^-`): no path, no URL, no space."""

_LOADS = "loads code or a library into the engine"
_TOOL = "loads a tool library into every process of the runtime (a profiler or tracer hook runs any code)"
_DOWNLOADS = "changes where or how downloads come from, past the farm's checks of what the engine loads"
_CHECKSUM = "switches off a checksum of downloaded kernel binaries"
_WRITES = "names a file or directory the engine writes (a log, a dump, a trace), which could overwrite the host's files"
_READS = "names a file the engine reads as configuration, which the recipe cannot ship"
_LISTENS = "sets where the engine listens or connects"
_DUMPS = "writes core dumps or debug dumps of the process to disk"
_TESTING = "injects the engine's own test faults (crashes, stalls, random failures)"
_DEVICES = "chooses the host's network devices: the host's own setting"
_PICKLE = "loads code: it deserializes with pickle, which runs code from what it reads"

REFUSED: dict[str, str] = {
    # the dynamic loader and the interpreter
    **{
        name: "loads code: libraries or modules into every process the engine starts"
        for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")
    },
    # CUDA and its libraries
    "CUDA_INJECTION64_PATH": _TOOL,
    "CUDA_INJECTION32_PATH": _TOOL,
    "CUDA_CACHE_PATH": _WRITES,
    "CUDA_COREDUMP_FILE": _DUMPS,
    "CUDA_COREDUMP_PIPE": _DUMPS,
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": _DUMPS,
    "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": _DUMPS,
    "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP": _DUMPS,
    "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": _DUMPS,
    "CUDA_MPS_PIPE_DIRECTORY": _LISTENS,
    "CUDA_MPS_LOG_DIRECTORY": _WRITES,
    "CUDA_HOME": _LOADS,
    "CUDA_PATH": _LOADS,
    "CUBLAS_LOGDEST_DBG": _WRITES,
    "CUBLASLT_LOG_FILE": _WRITES,
    "CUDNN_LOGDEST_DBG": _WRITES,
    "CUDNN_FRONTEND_LOG_FILE": _WRITES,
    # NCCL (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)
    "NCCL_NET_PLUGIN": _LOADS,
    "NCCL_TUNER_PLUGIN": _LOADS,
    "NCCL_PROFILER_PLUGIN": _LOADS,
    "NCCL_ENV_PLUGIN": _LOADS,
    "NCCL_NET": "chooses the network transport by name, a plugin's among them",
    "NCCL_DEBUG_FILE": _WRITES,
    "NCCL_TOPO_DUMP_FILE": _WRITES,
    "NCCL_GRAPH_DUMP_FILE": _WRITES,
    "NCCL_TOPO_FILE": _READS,
    "NCCL_GRAPH_FILE": _READS,
    "NCCL_CONF_FILE": _READS,
    "NCCL_SOCKET_IFNAME": _DEVICES,
    "NCCL_SOCKET_FAMILY": _DEVICES,
    "NCCL_IB_HCA": _DEVICES,
    "NCCL_COMM_ID": _LISTENS,
    "NCCL_HOSTID": _LISTENS,
    "NCCL_RAS_ENABLE": "opens NCCL's RAS listener",
    "NCCL_RAS_ADDR": _LISTENS,
    # PyTorch
    "TORCH_LOGS_OUT": _WRITES,
    "TORCH_TRACE": _WRITES,
    "TORCH_COMPILE_DEBUG": "writes the compiler's debug tree into the working directory",
    "TORCH_COMPILE_DEBUG_DIR": _WRITES,
    "TORCH_NCCL_DUMP_ON_TIMEOUT": _DUMPS,
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": _WRITES,
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": _WRITES,
    "TORCH_EXTENSIONS_DIR": _LOADS,
    "TORCH_HOME": _DOWNLOADS,
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": _PICKLE,
    "PYTORCH_TUNABLEOP_FILENAME": _WRITES,
    "TORCHINDUCTOR_DEBUG_DIR": _WRITES,
    # Triton
    "TRITON_PTXAS_PATH": "runs another assembler binary",
    "TRITON_PTXAS_BLACKWELL_PATH": "runs another assembler binary",
    "TRITON_LIBCUDA_PATH": _LOADS,
    "TRITON_LIBDEVICE_PATH": _LOADS,
    "TRITON_CUDACRT_PATH": _LOADS,
    "TRITON_CUDART_PATH": _LOADS,
    "TRITON_CUPTI_LIB_PATH": _TOOL,
    "TRITON_HOME": _WRITES,
    "TRITON_KERNEL_OVERRIDE": "loads kernels from an override directory instead of compiling them",
    "TRITON_OVERRIDE_DIR": _LOADS,
    "TRITON_KERNEL_DUMP": _WRITES,
    "TRITON_DUMP_DIR": _WRITES,
    # ROCm
    "HSA_TOOLS_LIB": _TOOL,
    "HSA_TOOLS_REPORT_LOAD_FAILURE": _TOOL,
    "ROCP_TOOL_LIB": _TOOL,
    "ROCTX_TOOL_LIB": _TOOL,
    "HIP_PATH": _LOADS,
    "ROCM_PATH": _LOADS,
    "ROCM_HOME": _LOADS,
    # the model hub
    "HF_ENDPOINT": _DOWNLOADS,
    "HF_HUB_ENABLE_HF_TRANSFER": _DOWNLOADS,
    "HF_HUB_DISABLE_XET": _DOWNLOADS,
    "HF_XET_HIGH_PERFORMANCE": _DOWNLOADS,
    "HF_XET_CACHE": _WRITES,
    "HF_HUB_USER_AGENT_ORIGIN": _DOWNLOADS,
    "HF_ALLOW_CODE_EVAL": _LOADS,
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "the worker's profile decides which credential downloads use",
    # FlashInfer: its kernel-binary repository and its JIT
    "FLASHINFER_CUBINS_REPOSITORY": _DOWNLOADS,
    "FLASHINFER_CUBIN_CHECKSUM_DISABLED": _CHECKSUM,
    "FLASHINFER_CUBIN_DIR": _LOADS,
    "FLASHINFER_NVCC": "runs another compiler binary",
    "FLASHINFER_NVCC_LAUNCHER": "runs a command before the compiler",
    "FLASHINFER_CXX_LAUNCHER": "runs a command before the compiler",
    "FLASHINFER_KDA_PTXAS": "runs another assembler binary",
    "FLASHINFER_LOGDEST": _WRITES,
    "FLASHINFER_JIT_BUILD_LOG": _WRITES,
    "FLASHINFER_AUTOTUNER_LOAD_FROM_FILE": _READS,
    "FLASHINFER_DSL_FMHA_LOCAL_DIR": _LOADS,
    "CUTE_CUBIN_PATH": _LOADS,
    "CUTE_DSL_KEEP": "keeps the compiler's intermediate files in the working directory",
    "CUTE_DSL_COMPILER_OPT": "passes options to the kernel compiler",
    "GGML_OPENVINO_DEBUG_OUTPUT": _WRITES,
    # vLLM (vllm/envs.py)
    "VLLM_ALLOW_INSECURE_SERIALIZATION": _PICKLE,
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets API clients load adapters at run time",
    "VLLM_SERVER_DEV_MODE": "opens development endpoints (collective_rpc, reset, sleep) on the API",
    "VLLM_USE_MODELSCOPE": _DOWNLOADS,
    "VLLM_TRACE_FUNCTION": _WRITES,
    "VLLM_ASSETS_CACHE_MODEL_CLEAN": "deletes downloaded model files after loading",
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS": _DOWNLOADS,
    "VLLM_ENABLE_RESPONSES_API_STORE": "keeps every response in the engine's memory",
    "VLLM_NCCL_SO_PATH": _LOADS,
    "VLLM_CUDART_SO_PATH": _LOADS,
    "VLLM_CUDA_COMPATIBILITY_PATH": _LOADS,
    "VLLM_RUST_FRONTEND_PATH": _LOADS,
    "VLLM_PLUGINS": _LOADS,
    "VLLM_DEBUG_DUMP_PATH": _WRITES,
    "VLLM_TORCH_PROFILER_DIR": _WRITES,
    # SGLang (sglang/srt/environ.py)
    "SGLANG_CUDA_COREDUMP": _DUMPS,
    "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": _DUMPS,
    "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "runs py-spy on the engine and writes its dump",
    "SGLANG_USE_MODELSCOPE": _DOWNLOADS,
    "SGLANG_USE_PICKLE_IPC": _PICKLE,
    "SGLANG_RUST_SERVER": "replaces the HTTP server the farm talks to",
    "SGLANG_LOAD_SNAPSHOT_USE_ZMQ": _LISTENS,
    "SGLANG_IS_IN_CI": "the engine's CI mode, not a setting of a benchmark",
    "SGLANG_IS_IN_CI_AMD": "the engine's CI mode, not a setting of a benchmark",
    "SGLANG_PLUGINS": _LOADS,
    "SGLANG_EXTERNAL_MODEL_PACKAGE": _LOADS,
    "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE": _LOADS,
    "SGLANG_HTTP_SERVER_APP_PATH": _LOADS,
    # llama.cpp / ggml
    "GGML_BACKEND_PATH": _LOADS,
    "GGML_ET_KERNELS_PATH": _LOADS,
    "GGML_BACKTRACE_LLDB": "runs a debugger on the engine",
    "GGML_VULKAN_OUTPUT_TENSOR": _WRITES,
    "LLAMA_SERVER_CHILD_MODE": "runs the server as another process's child",
    "LLAMA_APP_CMD": "runs another command",
    # Ollama
    "OLLAMA_LLM_LIBRARY": _LOADS,
    "OLLAMA_MODELS": "names a path on the worker",
    "OLLAMA_ORIGINS": _LISTENS,
}
"""Refused whatever the value, each with its reason."""

REFUSED_PREFIXES: dict[str, str] = {
    "LLAMA_ARG_": "llama-server reads it as an option, past the argument policy",
    "SGLANG_ARG": "the engine reads it as an option, past the argument policy",
    "SGLANG_TEST_": _TESTING,
    "LD_": "loads code: the dynamic loader's settings (preloads, audit libraries, search paths)",
    "GGML_RPC_": _LISTENS,
    "GGML_RDMA_": _LISTENS,
    "GGML_REMOTING_": _LISTENS,
    "AIP_": "llama-server's Vertex AI mode (its own port and routes)",
    "MOONCAKE_": _LISTENS,
    "B12X_PROBE_": "runs a probe command on a source tree",
}

_NCCL = "NCCL transport and channel tuning (NCCL's documented variables)"
_NCCL_DEBUG = "NCCL's log level and subsystems (to the engine log)"
_CUDA = "CUDA runtime behaviour (launch, module loading, JIT cache size)"
_LIB_LOG = "a CUDA library's log level or mask (to the engine log; its destination stays the default)"
_ALLOC = "PyTorch's allocator configuration"
_TORCH = "PyTorch tuning or diagnostics on the engine log"
_THREADS = "thread counts and placement of the CPU math libraries"
_HUB = "the hub client's quieter or longer-waiting behaviour; where downloads come from is unchanged"
_ARCH = "the GPU architectures kernels are built for"
_ROCM = "the ROCm runtime's memory and queue behaviour"

RUNTIME: dict[str, tuple[str, str]] = {
    **{
        name: (SWITCH, _NCCL)
        for name in (
            "NCCL_P2P_DISABLE",
            "NCCL_P2P_DIRECT_DISABLE",
            "NCCL_P2P_READ_ENABLE",
            "NCCL_P2P_USE_CUDA_MEMCPY",
            "NCCL_SHM_DISABLE",
            "NCCL_SHM_USE_CUDA_MEMCPY",
            "NCCL_IB_DISABLE",
            "NCCL_IB_PCI_RELAXED_ORDERING",
            "NCCL_IB_ADAPTIVE_ROUTING",
            "NCCL_NET_GDR_READ",
            "NCCL_NVLS_ENABLE",
            "NCCL_CUMEM_ENABLE",
            "NCCL_CUMEM_HOST_ENABLE",
            "NCCL_CROSS_NIC",
            "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
            "NCCL_GRAPH_MIXING_SUPPORT",
            "NCCL_COLLNET_ENABLE",
            "NCCL_CHECK_POINTERS",
            "NCCL_IGNORE_CPU_AFFINITY",
            "NCCL_NVB_DISABLE",
            "NCCL_PXN_DISABLE",
            "NCCL_RUNTIME_CONNECT",
            "NCCL_SET_THREAD_NAME",
            "NCCL_ASYNC_ERROR_HANDLING",
            "NCCL_BLOCKING_WAIT",
            "NCCL_LL128_ENABLE",
            "NCCL_NET_SHARED_BUFFERS",
            "NCCL_WIN_ENABLE",
        )
    },
    **{
        name: (NUMBER, _NCCL)
        for name in (
            "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_NCHANNELS",
            "NCCL_MIN_CTAS",
            "NCCL_MAX_CTAS",
            "NCCL_NTHREADS",
            "NCCL_BUFFSIZE",
            "NCCL_NCHANNELS_PER_NET_PEER",
            "NCCL_IB_TIMEOUT",
            "NCCL_IB_RETRY_CNT",
            "NCCL_IB_GID_INDEX",
            "NCCL_IB_TC",
            "NCCL_IB_SL",
            "NCCL_IB_QPS_PER_CONNECTION",
            "NCCL_P2P_NET_CHUNKSIZE",
            "NCCL_P2P_NVL_CHUNKSIZE",
            "NCCL_P2P_PCI_CHUNKSIZE",
            "NCCL_NVLS_CHUNKSIZE",
            "NCCL_WORK_FIFO_DEPTH",
            "NCCL_LL_THRESHOLD",
            "NCCL_TREE_THRESHOLD",
            "NCCL_SOCKET_NTHREADS",
            "NCCL_NSOCKS_PERTHREAD",
        )
    },
    **{
        name: (TOKEN, _NCCL)
        for name in ("NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_PROTO", "NCCL_ALGO", "NCCL_LAUNCH_MODE")
    },
    "NCCL_DEBUG": (TOKEN, _NCCL_DEBUG),
    "NCCL_DEBUG_SUBSYS": (TOKEN, _NCCL_DEBUG),
    "CUDA_LAUNCH_BLOCKING": (SWITCH, _CUDA),
    "CUDA_DEVICE_MAX_CONNECTIONS": (NUMBER, _CUDA),
    "CUDA_MODULE_LOADING": (TOKEN, _CUDA),
    "CUDA_DEVICE_ORDER": (TOKEN, _CUDA),
    "CUDA_CACHE_DISABLE": (SWITCH, _CUDA),
    "CUDA_CACHE_MAXSIZE": (NUMBER, _CUDA),
    "CUDA_FORCE_PTX_JIT": (SWITCH, _CUDA),
    "CUDA_DISABLE_PTX_JIT": (SWITCH, _CUDA),
    "CUDA_AUTO_BOOST": (SWITCH, _CUDA),
    "CUDA_SCALE_LAUNCH_QUEUES": (TOKEN, _CUDA),
    "CUDA_MANAGED_FORCE_DEVICE_ALLOC": (SWITCH, _CUDA),
    "CUBLAS_WORKSPACE_CONFIG": (TOKEN, "cuBLAS's workspace sizes (`:4096:8`)"),
    "CUBLAS_LOGINFO_DBG": (SWITCH, _LIB_LOG),
    "CUBLASLT_LOG_LEVEL": (NUMBER, _LIB_LOG),
    "CUBLASLT_LOG_MASK": (NUMBER, _LIB_LOG),
    "CUDNN_LOGINFO_DBG": (SWITCH, _LIB_LOG),
    "CUDNN_LOGERR_DBG": (SWITCH, _LIB_LOG),
    "CUDNN_LOGWARN_DBG": (SWITCH, _LIB_LOG),
    "CUDNN_LOGLEVEL_DBG": (NUMBER, _LIB_LOG),
    "CUDNN_FRONTEND_LOG_INFO": (SWITCH, _LIB_LOG),
    "TORCH_CUDA_ARCH_LIST": (TOKEN, _ARCH),
    "PYTORCH_CUDA_ALLOC_CONF": (TOKEN, _ALLOC),
    "PYTORCH_ALLOC_CONF": (TOKEN, _ALLOC),
    "PYTORCH_HIP_ALLOC_CONF": (TOKEN, _ALLOC),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": (SWITCH, _ALLOC),
    "PYTORCH_NVML_BASED_CUDA_CHECK": (SWITCH, _TORCH),
    "PYTORCH_TUNABLEOP_ENABLED": (SWITCH, _TORCH),
    "PYTORCH_TUNABLEOP_TUNING": (SWITCH, _TORCH),
    "PYTORCH_TUNABLEOP_VERBOSE": (NUMBER, _TORCH),
    "TORCH_LOGS": (TOKEN, "which PyTorch logs go to the engine log (their destination is TORCH_LOGS_OUT, refused)"),
    "TORCH_SHOW_CPP_STACKTRACES": (SWITCH, _TORCH),
    "TORCH_CPP_LOG_LEVEL": (TOKEN, _TORCH),
    "TORCH_DISTRIBUTED_DEBUG": (TOKEN, _TORCH),
    "TORCH_USE_CUDA_DSA": (SWITCH, _TORCH),
    "TORCH_BLAS_PREFER_CUBLASLT": (SWITCH, _TORCH),
    "TORCH_BLAS_PREFER_HIPBLASLT": (SWITCH, _TORCH),
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": (SWITCH, _TORCH),
    "TORCH_FORCE_WEIGHTS_ONLY_LOAD": (SWITCH, "PyTorch loads checkpoints without pickle's code (safer)"),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": (NUMBER, _TORCH),
    "TORCH_NCCL_BLOCKING_WAIT": (SWITCH, _TORCH),
    "TORCH_NCCL_AVOID_RECORD_STREAMS": (SWITCH, _TORCH),
    "TORCH_NCCL_USE_COMM_NONBLOCKING": (SWITCH, _TORCH),
    "TORCH_NCCL_HIGH_PRIORITY": (SWITCH, _TORCH),
    "TORCH_NCCL_ENABLE_MONITORING": (SWITCH, _TORCH),
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": (NUMBER, _TORCH),
    "TORCH_NCCL_TRACE_BUFFER_SIZE": (NUMBER, _TORCH),
    "TORCH_NCCL_DESYNC_DEBUG": (SWITCH, _TORCH),
    "TORCHINDUCTOR_COMPILE_THREADS": (NUMBER, _TORCH),
    "TORCHINDUCTOR_MAX_AUTOTUNE": (SWITCH, _TORCH),
    "TORCHINDUCTOR_FX_GRAPH_CACHE": (SWITCH, _TORCH),
    "TORCHINDUCTOR_AUTOGRAD_CACHE": (SWITCH, _TORCH),
    "TORCHDYNAMO_DISABLE": (SWITCH, _TORCH),
    "TRITON_PRINT_AUTOTUNING": (SWITCH, "Triton prints its autotuning choices to the engine log"),
    "TRITON_DEFAULT_FP_FUSION": (SWITCH, "Triton's floating-point fusion"),
    "TRITON_ALWAYS_COMPILE": (SWITCH, "Triton compiles again instead of reusing its cache"),
    **{
        name: (NUMBER, _THREADS)
        for name in (
            "OMP_NUM_THREADS",
            "OMP_MAX_ACTIVE_LEVELS",
            "MKL_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "KMP_BLOCKTIME",
            "MALLOC_ARENA_MAX",
        )
    },
    **{
        name: (TOKEN, _THREADS)
        for name in (
            "OMP_PROC_BIND",
            "OMP_PLACES",
            "OMP_WAIT_POLICY",
            "OMP_SCHEDULE",
            "OMP_STACKSIZE",
            "KMP_AFFINITY",
            "KMP_TPAUSE",
            "MKL_ENABLE_INSTRUCTIONS",
            "MKL_DEBUG_CPU_TYPE",
            "OPENBLAS_CORETYPE",
        )
    },
    **{name: (SWITCH, _THREADS) for name in ("OMP_DYNAMIC", "MKL_DYNAMIC", "KMP_SETTINGS", "KMP_DUPLICATE_LIB_OK")},
    "TOKENIZERS_PARALLELISM": (SWITCH, "the tokenizers library's threads"),
    "TZ": (TOKEN, "the time zone of the engine's log timestamps"),
    "HF_HUB_DISABLE_TELEMETRY": (SWITCH, _HUB),
    "HF_HUB_DISABLE_PROGRESS_BARS": (SWITCH, _HUB),
    "HF_HUB_DISABLE_SYMLINKS_WARNING": (SWITCH, _HUB),
    "HF_HUB_DISABLE_EXPERIMENTAL_WARNING": (SWITCH, _HUB),
    "HF_HUB_DOWNLOAD_TIMEOUT": (NUMBER, _HUB),
    "HF_HUB_ETAG_TIMEOUT": (NUMBER, _HUB),
    "HF_HUB_VERBOSITY": (TOKEN, _HUB),
    "TRANSFORMERS_VERBOSITY": (TOKEN, _HUB),
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": (SWITCH, _HUB),
    "SAFETENSORS_FAST_GPU": (SWITCH, "safetensors loads tensors straight to the GPU"),
    "HIP_FORCE_DEV_KERNARG": (SWITCH, _ROCM),
    "HIP_LAUNCH_BLOCKING": (SWITCH, _ROCM),
    "HSA_FORCE_FINE_GRAIN_PCIE": (SWITCH, _ROCM),
    "HSA_NO_SCRATCH_RECLAIM": (SWITCH, _ROCM),
    "HSA_ENABLE_SDMA": (SWITCH, _ROCM),
    "HSA_OVERRIDE_GFX_VERSION": (TOKEN, _ROCM),
    "USE_PINNED_ONECCL": (SWITCH, "Intel XPU builds: oneCCL's pinned host buffers"),
}
"""Runtime variables every engine may be given: name -> (kind of value, what it tunes)."""

ENGINE_STRINGS: dict[str, tuple[str, str]] = {
    "FLASHINFER_CUDA_ARCH_LIST": (TOKEN, _ARCH),
    "CUTE_DSL_ARCH": (TOKEN, _ARCH),
    "VLLM_CPU_OMP_THREADS_BIND": (TOKEN, "the CPUs vLLM's CPU backend binds its threads to"),
    "VLLM_ATTENTION_BACKEND": (TOKEN, "the attention backend by its name in vLLM's fixed list"),
    "VLLM_DISABLED_KERNELS": (TOKEN, "kernels vLLM may not pick, by name"),
    "VLLM_LOGGING_LEVEL": (TOKEN, "vLLM's log level"),
    "VLLM_PP_LAYER_PARTITION": (TOKEN, "how pipeline stages split the layers (numbers)"),
    "SGLANG_MAMBA_SSM_DTYPE": (TOKEN, "a data type by name"),
    "SGLANG_MAMBA_CONV_DTYPE": (TOKEN, "a data type by name"),
}
"""Engine variables declared as strings (or whose kind the source does not say) that are plain tuning words."""

FORMER_NAMES: dict[str, tuple[str, str]] = {
    "VLLM_USE_V1": (SWITCH, "an older vLLM's V1 engine switch"),
    "VLLM_FLASH_ATTN_VERSION": (NUMBER, "an older vLLM's FlashAttention version"),
    "VLLM_MAX_TOKENS_PER_EXPERT": (NUMBER, "a MoE kernel's token budget in vLLM builds that read it"),
    "VLLM_XPU_ENABLE_XPU_GRAPH": (SWITCH, "a vLLM XPU build's graph switch (registry XPU recipes)"),
    "VLLM_XPU_HOST_STAGED_COLLECTIVES": (SWITCH, "a patched vLLM XPU build's collectives through host memory"),
    "SGLANG_ENABLE_DEEP_GEMM": (SWITCH, "an older SGLang's DeepGEMM switch"),
    "SGLANG_ENABLE_SPEC_V2": (SWITCH, "an older SGLang's speculative decoding v2 switch"),
    "SGLANG_EXL3_MAX_BATCH_TOKENS": (NUMBER, "an SGLang EXL3 overlay build's batch budget"),
    "SGLANG_DISABLE_TP_MEMORY_INBALANCE_CHECK": (SWITCH, "an older SGLang's TP memory balance check"),
    "B12X_MHC_MAX_TOKENS": (NUMBER, "a B12X kernel's token budget in builds that read it"),
    "B12X_ENABLE_DYNAMIC_DOWN_SCALE": (SWITCH, "a B12X kernel switch in builds that read it"),
    **{
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
}
"""Switches and numbers the engines' current packages no longer read (or a fork's build reads), kept because
registry recipes carry them; a value of their kind only, so they cannot carry a path or a module."""

OWN_PREFIXES: dict[str, tuple[str, ...]] = {
    "vllm": ("VLLM_",),
    "sglang": ("SGLANG_", "SGL_"),
    "llama.cpp": ("GGML_", "LLAMA_"),
    "flashinfer": ("FLASHINFER_", "B12X_", "CUTE_DSL_"),
}
"""Of each generated table, the names the farm takes as that package's own (the rest, like HOME or HF_TOKEN in
llama.cpp's sources, are judged by the other tables)."""

ENGINE_TABLES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "flashinfer"),
    "sglang": ("sglang", "flashinfer"),
    "llama.cpp": ("llama.cpp",),
}
"""Which generated tables apply to each engine: its own, and FlashInfer's for the engines that load it."""

OLLAMA: dict[str, tuple[str, str]] = {
    **{
        name: (NUMBER, "Ollama's scheduling and memory tuning")
        for name in (
            "OLLAMA_NUM_PARALLEL",
            "OLLAMA_MAX_LOADED_MODELS",
            "OLLAMA_MAX_QUEUE",
            "OLLAMA_CONTEXT_LENGTH",
            "OLLAMA_GPU_OVERHEAD",
        )
    },
    **{
        name: (SWITCH, "Ollama's scheduling and memory tuning")
        for name in ("OLLAMA_FLASH_ATTENTION", "OLLAMA_SCHED_SPREAD", "OLLAMA_NEW_ENGINE", "OLLAMA_DEBUG")
    },
    "OLLAMA_KV_CACHE_TYPE": (TOKEN, "Ollama's KV cache type"),
    "OLLAMA_KEEP_ALIVE": (TOKEN, "how long Ollama keeps a model loaded"),
    "OLLAMA_LOAD_TIMEOUT": (TOKEN, "how long Ollama waits for a model to load"),
}
"""Ollama's documented tuning variables (ollama envconfig)."""
