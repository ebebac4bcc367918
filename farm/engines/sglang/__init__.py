"""SGLang: its line of the table (`ENGINE`), its argument spec (spec.py) and adapter (adapter.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineImages, EngineKind
from farm.engines.sglang.counters import METRICS
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec
    from farm.engines.environment_names import EngineEnvironment
    from farm.engines.reparse import Mirror


def _spec() -> ArgSpec:
    from farm.engines.sglang.spec import SGLANG

    return SGLANG


def _release_0_5_23() -> ArgSpec:
    from farm.engines.sglang.spec import sglang_release_spec

    return sglang_release_spec("0.5.23")


def _environment() -> EngineEnvironment:
    from farm.engines.sglang.environment import ENVIRONMENT

    return ENVIRONMENT


def _read_back(spec: ArgSpec) -> Mirror:
    from farm.engines.sglang.readback import read_back

    return read_back(spec)


ENGINE = EngineKind(
    name="sglang",
    spec=_spec,
    spec_source="sglang/srt/server_args.py at 001067ff (ServerArgs.add_cli_args); 0.5.23 narrowed to its parser",
    # The registry's SGLang recipes were recorded on builds newer than 0.5.23 (two accepted ones use options it
    # lacks), so main at 001067ff judges by default; a worker that runs 0.5.23 says so in its profile.
    spec_versions={"0.5.23": _release_0_5_23},
    launcher=("python", "-m", "sglang.launch_server"),
    launcher_spellings=(("sglang", "serve"),),  # SGLang's own CLI launches the same server
    serving_options={
        "tensor_parallel": "--tp-size",
        "max_context_tokens": "--context-length",
        "gpu_memory_utilization": "--mem-fraction-static",
    },
    registry_flags={
        "tensorParallel": ("--tp-size",),
        "kvCacheDtype": ("--kv-cache-dtype",),
        "attentionBackend": ("--attention-backend",),
    },
    official_images=(r"^(?:docker\.io/)?lmsysorg/sglang(?:[:@]|$)",),
    python_modules=("sglang.launch_server",),
    python_package="sglang",
    gguf_file_only=True,
    kv_cache_dtype_option="--kv-cache-dtype",
    attention_data_parallel="--enable-dp-attention",
    model_flags=("--model-path", "--model"),
    revision_option="--revision",
    parallel_flags={
        "tensor": ("--tp-size", "--tp", "--tensor-parallel-size"),
        "pipeline": ("--pp-size", "--pipeline-parallel-size"),
        "data": ("--dp-size", "--dp", "--data-parallel-size"),
    },
    context_flags=("--context-length", "--context_length"),
    metric_prefix="sglang:",
    metric_names=METRICS,
    prefix_cache_reset="/flush_cache",  # refused while requests run
    adapter="farm.engines.sglang.adapter",
    environment=_environment,
    images=EngineImages(repositories=("lmsysorg/sglang",), whole_command=True),
    read_back=_read_back,
    loads_model_id=True,
    read_version=version_reader(command=("--version",), package="sglang", modules=("sglang.launch_server",)),
)
