"""The names a recipe's environment may carry, by exact name, each with its reason: what every engine's runtime
shares. Each engine's own names live in its home (farm/engines/<engine>/environment.py, an EngineEnvironment).

farm.engines.environment checks, in this order:

1. refused names (REFUSED here, and each engine's own), whatever their value, each with why: they load a library
   or code, redirect a download, switch off a checksum, name a file the engine writes (or reads), open a listener,
   or inject test faults; and refused families (REFUSED_PREFIXES, and the engine's);
2. the runtime tables (RUNTIME): the CUDA/ROCm/NCCL/PyTorch/OpenMP/hub variables, hand-listed from their
   documentation, each allowed one with what it tunes; and the engine's own hand-listed names;
3. the tables generated from the packages by deploy/gen_engine_environment.py (each engine's environment.json,
   FlashInfer's flashinfer_environment.json here): a declared switch or number passes with a value of its kind; a
   declared string (a path, a URL, a module name) passes only where a hand list names it.

A name in none of them is refused: the farm passes what it knows, not what a prefix suggests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SWITCH = "switch"
"""A value 0/1/true/false/yes/no/on/off."""
NUMBER = "number"
"""An integer or a decimal number."""
TOKEN = "token"  # noqa: S105 (a kind of value, a plain word; not a credential)
"""A short word or list of words (letters, digits, `_.,:+^-`): no path, no URL, no space."""

LOADS = "loads code or a library into the engine"
TOOL = "loads a tool library into every process of the runtime (a profiler or tracer hook runs any code)"
DOWNLOADS = "changes where or how downloads come from, past the farm's checks of what the engine loads"
CHECKSUM = "switches off a checksum of downloaded kernel binaries"
WRITES = "names a file or directory the engine writes (a log, a dump, a trace), which could overwrite the host's files"
READS = "names a file the engine reads as configuration, which the recipe cannot ship"
LISTENS = "sets where the engine listens or connects"
DUMPS = "writes core dumps or debug dumps of the process to disk"
TESTING = "injects the engine's own test faults (crashes, stalls, random failures)"
DEVICES = "chooses the host's network devices: the host's own setting"
PICKLE = "loads code: it deserializes with pickle, which runs code from what it reads"

REFUSED: dict[str, str] = {
    # the dynamic loader and the interpreter
    **{
        name: "loads code: libraries or modules into every process the engine starts"
        for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")
    },
    # CUDA and its libraries
    "CUDA_INJECTION64_PATH": TOOL,
    "CUDA_INJECTION32_PATH": TOOL,
    "CUDA_CACHE_PATH": WRITES,
    "CUDA_COREDUMP_FILE": DUMPS,
    "CUDA_COREDUMP_PIPE": DUMPS,
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": DUMPS,
    "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": DUMPS,
    "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP": DUMPS,
    "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": DUMPS,
    "CUDA_MPS_PIPE_DIRECTORY": LISTENS,
    "CUDA_MPS_LOG_DIRECTORY": WRITES,
    "CUDA_HOME": LOADS,
    "CUDA_PATH": LOADS,
    "CUBLAS_LOGDEST_DBG": WRITES,
    "CUBLASLT_LOG_FILE": WRITES,
    "CUDNN_LOGDEST_DBG": WRITES,
    "CUDNN_FRONTEND_LOG_FILE": WRITES,
    # NCCL (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)
    "NCCL_NET_PLUGIN": LOADS,
    "NCCL_TUNER_PLUGIN": LOADS,
    "NCCL_PROFILER_PLUGIN": LOADS,
    "NCCL_ENV_PLUGIN": LOADS,
    "NCCL_NET": "chooses the network transport by name, a plugin's among them",
    "NCCL_DEBUG_FILE": WRITES,
    "NCCL_TOPO_DUMP_FILE": WRITES,
    "NCCL_GRAPH_DUMP_FILE": WRITES,
    "NCCL_TOPO_FILE": READS,
    "NCCL_GRAPH_FILE": READS,
    "NCCL_CONF_FILE": READS,
    "NCCL_SOCKET_IFNAME": DEVICES,
    "NCCL_SOCKET_FAMILY": DEVICES,
    "NCCL_IB_HCA": DEVICES,
    "NCCL_COMM_ID": LISTENS,
    "NCCL_HOSTID": LISTENS,
    "NCCL_RAS_ENABLE": "opens NCCL's RAS listener",
    "NCCL_RAS_ADDR": LISTENS,
    # PyTorch
    "TORCH_LOGS_OUT": WRITES,
    "TORCH_TRACE": WRITES,
    "TORCH_COMPILE_DEBUG": "writes the compiler's debug tree into the working directory",
    "TORCH_COMPILE_DEBUG_DIR": WRITES,
    "TORCH_NCCL_DUMP_ON_TIMEOUT": DUMPS,
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": WRITES,
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": WRITES,
    "TORCH_EXTENSIONS_DIR": LOADS,
    "TORCH_HOME": DOWNLOADS,
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": PICKLE,
    "PYTORCH_TUNABLEOP_FILENAME": WRITES,
    "TORCHINDUCTOR_DEBUG_DIR": WRITES,
    # Triton
    "TRITON_PTXAS_PATH": "runs another assembler binary",
    "TRITON_PTXAS_BLACKWELL_PATH": "runs another assembler binary",
    "TRITON_LIBCUDA_PATH": LOADS,
    "TRITON_LIBDEVICE_PATH": LOADS,
    "TRITON_CUDACRT_PATH": LOADS,
    "TRITON_CUDART_PATH": LOADS,
    "TRITON_CUPTI_LIB_PATH": TOOL,
    "TRITON_HOME": WRITES,
    "TRITON_KERNEL_OVERRIDE": "loads kernels from an override directory instead of compiling them",
    "TRITON_OVERRIDE_DIR": LOADS,
    "TRITON_KERNEL_DUMP": WRITES,
    "TRITON_DUMP_DIR": WRITES,
    # ROCm
    "HSA_TOOLS_LIB": TOOL,
    "HSA_TOOLS_REPORT_LOAD_FAILURE": TOOL,
    "ROCP_TOOL_LIB": TOOL,
    "ROCTX_TOOL_LIB": TOOL,
    "HIP_PATH": LOADS,
    "ROCM_PATH": LOADS,
    "ROCM_HOME": LOADS,
    # the model hub
    "HF_ENDPOINT": DOWNLOADS,
    "HF_HUB_ENABLE_HF_TRANSFER": DOWNLOADS,
    "HF_HUB_DISABLE_XET": DOWNLOADS,
    "HF_XET_HIGH_PERFORMANCE": DOWNLOADS,
    "HF_XET_CACHE": WRITES,
    "HF_HUB_USER_AGENT_ORIGIN": DOWNLOADS,
    "HF_ALLOW_CODE_EVAL": LOADS,
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "the worker's profile decides which credential downloads use",
    # FlashInfer: its kernel-binary repository and its JIT
    "FLASHINFER_CUBINS_REPOSITORY": DOWNLOADS,
    "FLASHINFER_CUBIN_CHECKSUM_DISABLED": CHECKSUM,
    "FLASHINFER_CUBIN_DIR": LOADS,
    "FLASHINFER_NVCC": "runs another compiler binary",
    "FLASHINFER_NVCC_LAUNCHER": "runs a command before the compiler",
    "FLASHINFER_CXX_LAUNCHER": "runs a command before the compiler",
    "FLASHINFER_KDA_PTXAS": "runs another assembler binary",
    "FLASHINFER_LOGDEST": WRITES,
    "FLASHINFER_JIT_BUILD_LOG": WRITES,
    "FLASHINFER_AUTOTUNER_LOAD_FROM_FILE": READS,
    "FLASHINFER_DSL_FMHA_LOCAL_DIR": LOADS,
    "CUTE_CUBIN_PATH": LOADS,
    "CUTE_DSL_KEEP": "keeps the compiler's intermediate files in the working directory",
    "CUTE_DSL_COMPILER_OPT": "passes options to the kernel compiler",
}
"""Refused whatever the value, each with its reason."""

REFUSED_PREFIXES: dict[str, str] = {
    "LLAMA_ARG_": "the engine reads it as an option, past the argument policy",
    "SGLANG_ARG": "the engine reads it as an option, past the argument policy",
    "LD_": "loads code: the dynamic loader's settings (preloads, audit libraries, search paths)",
    "MOONCAKE_": LISTENS,
    "B12X_PROBE_": "runs a probe command on a source tree",
}
"""Families refused whatever the engine (an engine's options by environment too: a container image may run
another server than the recipe's engine)."""

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

LIBRARY_TUNING: dict[str, tuple[str, str]] = {
    "FLASHINFER_CUDA_ARCH_LIST": (TOKEN, _ARCH),
    "CUTE_DSL_ARCH": (TOKEN, _ARCH),
    "B12X_MHC_MAX_TOKENS": (NUMBER, "a B12X kernel's token budget in builds that read it"),
    "B12X_ENABLE_DYNAMIC_DOWN_SCALE": (SWITCH, "a B12X kernel switch in builds that read it"),
}
"""FlashInfer's (and its CuTe DSL and B12X kernels') variables the farm lists by hand: words its package reads
without a declared kind, and switches of builds registry recipes ran."""

LIBRARIES: dict[str, tuple[tuple[str, ...], str]] = {
    "flashinfer": (("FLASHINFER_", "B12X_", "CUTE_DSL_"), "flashinfer_environment.json"),
}
"""Kernel libraries that engines load, each with the prefixes of its own names and its generated table (in this
folder, from flashinfer-python 0.7.4 by deploy/gen_engine_environment.py)."""


@dataclass(frozen=True)
class EngineEnvironment:
    """What one engine's home says of the variables it reads (farm/engines/<engine>/environment.py)."""

    refused: Mapping[str, str] = field(default_factory=dict)
    """Names refused whatever the value, each with its reason."""
    refused_prefixes: Mapping[str, str] = field(default_factory=dict)
    """Families of names refused, each with its reason."""
    tuning: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Names listed by hand: name -> (kind of value, what it tunes). Strings the package declares that are plain
    words, and switches older releases or forks read that registry recipes carry."""
    own_prefixes: tuple[str, ...] = ()
    """The prefixes of the engine's own names in its generated table (the rest, like HOME or HF_TOKEN in
    llama.cpp's sources, are judged by the runtime tables)."""
    declared: Path | None = None
    """The table generated from the engine's package (deploy/gen_engine_environment.py), if it has one."""
    libraries: tuple[str, ...] = ()
    """Kernel libraries (LIBRARIES) the engine loads, whose variables it reads too."""
    rewrites: tuple[tuple[str, str], ...] = ()
    """Prefixes the engine renames at start (SGLang reads SGL_X as SGLANG_X): a name is judged as what it reads."""
