"""TabbyAPI's argument spec (`TABBYAPI`) and its config schema (`TABBYAPI_CONFIG`).

It is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, OptionSpec, ValueKind, declared

K = ValueKind
_o = declared

_B = K.FLAG
"""A boolean config key (true or false)."""


def _k(kind: ValueKind, name: str = "", **more: object) -> OptionSpec:
    """A config key's spec; for a nested CONFIG mapping, `name` is the section whose schema judges it."""
    return OptionSpec(name=name, kind=kind, **more)  # type: ignore[arg-type]


_WORKER_LISTENS = (
    "where TabbyAPI listens is the worker's to set, in the config it hands TabbyAPI (which ignores its command line "
    "once it has a config)"
)
_NO_TELEMETRY = "ships the server's logs to an outside Seq server: the farm allows no outbound telemetry"

TABBYAPI_CONFIG: dict[str, dict[str, OptionSpec]] = {
    "network": {
        "host": _k(K.REFUSED, reason=_WORKER_LISTENS),
        "port": _k(K.REFUSED, reason=_WORKER_LISTENS),
        "disable_auth": _k(_B),
        "disable_fetch_requests": _k(_B),
        "send_tracebacks": _k(_B),
        "api_servers": _k(K.CHOICE, choices=("OAI", "Kobold", "oai", "kobold"), nargs="+"),
        "sse_ping_interval": _k(K.INT),
    },
    "logging": {
        key: _k(_B) for key in ("log_prompt", "log_generation_params", "log_requests", "log_chat_completion_requests")
    },
    "model": {
        "model_dir": _k(K.PATH),
        "inline_model_loading": _k(_B),
        "use_dummy_models": _k(_B),
        "dummy_model_names": _k(K.WORD, nargs="+"),
        "model_name": _k(K.REPO_FILE),
        "use_as_default": _k(K.WORD, nargs="+"),
        "backend": _k(K.CHOICE, choices=("exllamav2", "exllamav3")),
        "max_seq_len": _k(K.INT),
        "cache_size": _k(K.INT),
        "cache_mode": _k(K.WORD),
        "tensor_parallel": _k(_B),
        "tensor_parallel_backend": _k(K.CHOICE, choices=("native", "nccl")),
        "gpu_split_auto": _k(_B),
        "autosplit_reserve": _k(K.NUMBER, nargs="+"),
        "gpu_split": _k(K.NUMBER, nargs="+"),
        "rope_scale": _k(K.FLOAT),
        "rope_alpha": _k(K.WORD),
        "chunk_size": _k(K.INT),
        "output_chunking": _k(_B),
        "max_batch_size": _k(K.INT),
        "prompt_template": _k(K.REPO_FILE),  # templates/NAME.jinja in TabbyAPI's folder
        "vision": _k(_B),
        "force_enable_thinking": _k(_B),
        "reasoning": _k(_B),
        "reasoning_start_token": _k(K.TEXT),
        "reasoning_end_token": _k(K.TEXT),
        "reasoning_suppress_header": _k(K.TEXT),
        "tool_format": _k(K.WORD),
        # Newer keys the registry's configs use (TabbyAPI builds after the source below).
        "start_in_reasoning": _k(K.CHOICE, choices=("auto", "always", "never")),
        "template_vars_default": _k(K.JSON),
        "vision_offload": _k(_B),
        "ngram_ram": _k(_B),
        "cpu_moe_split_experts": _k(K.INT),
        "draft_model": _k(K.CONFIG, name="draft_model"),  # the draft_model section, nested here by newer builds
    },
    "draft_model": {
        "draft_mode": _k(K.CHOICE, choices=("model", "disabled", "mtp", "ngram")),
        "draft_model_dir": _k(K.PATH),
        "draft_model_name": _k(K.REPO_FILE),
        "draft_rope_scale": _k(K.FLOAT),
        "draft_rope_alpha": _k(K.WORD),
        "draft_cache_mode": _k(K.WORD),
        "draft_gpu_split": _k(K.NUMBER, nargs="+"),
        "draft_num_tokens": _k(K.INT),
        "ngram_match_min": _k(K.INT),
    },
    "lora": {
        "lora_dir": _k(K.PATH),
        "loras": _k(
            K.REFUSED, reason="loads LoRA adapters (exllamav2 reads .bin adapters with torch.load, which runs code)"
        ),
    },
    "embeddings": {
        "embedding_model_dir": _k(K.PATH),
        "embeddings_device": _k(K.CHOICE, choices=("cpu", "auto", "cuda")),
        "embedding_model_name": _k(K.REPO_FILE),
    },
    "sampling": {"override_preset": _k(K.REPO_FILE)},  # sampler_overrides/NAME.yml in TabbyAPI's folder
    "memory": {"sysmem_recurrent_cache": _k(K.INT), "cuda_malloc_async": _k(_B), "sysmem_kv_cache": _k(K.INT)},
    "developer": {
        "unsafe_launch": _k(_B),
        "disable_request_streaming": _k(_B),
        "realtime_process_priority": _k(_B),
        "seqlog": _k(K.REFUSED, reason=_NO_TELEMETRY),
        "seqlog_server_url": _k(K.REFUSED, reason=_NO_TELEMETRY),
        "seqlog_api_key": _k(K.REFUSED, reason="secrets never go in a recipe (they would be stored and logged)"),
    },
    "config": {"config": _k(K.REFUSED, reason="reads another config file, past every check")},
}
"""TabbyAPI's config schema (`TabbyConfigModel` in theroyallab/tabbyAPI common/config_models.py at 004e8374): each
section's keys and how a value is judged. Paths (model, draft, LoRA and embedding folders) lie under the host's
roots or the container's read-only mounts; model, template and preset names are files inside TabbyAPI's folders,
never absolute and never climbing out. Where TabbyAPI listens is the worker's (the farm strips `network.host` and
`network.port` from a registry asset), and LoRA adapters are refused."""

TABBYAPI = ArgSpec(
    engine="tabbyapi",
    version="2025 (main at 004e8374)",
    source="theroyallab/tabbyAPI common/args.py and common/config_models.py (the config model's fields)",
    prefixes=(("python", "main.py"), ("python", "start.py"), ("./start.sh",)),
    underscores=False,
    config_keys=TABBYAPI_CONFIG,
    options=(
        _o("--host", K.LISTEN),
        _o("--port", K.LISTEN),
        _o("--model-name", K.REPO),
        _o("--model-dir", K.PATH),
        _o("--max-seq-len", K.INT),
        _o("--cache-mode", K.WORD),
        _o("--cache-size", K.INT),
        _o("--chunk-size", K.INT),
        _o("--max-batch-size", K.INT),
        _o("--gpu-split-auto", K.WORD),
        _o("--gpu-split", K.NUMBER, nargs="+"),
        _o("--tensor-parallel", K.WORD),
        _o("--rope-scale", K.FLOAT),
        _o("--rope-alpha", K.FLOAT),
        _o("--backend", K.WORD),
        _o("--prompt-template", K.WORD),
        _o("--draft-model-name", K.REPO),
        _o("--draft-model-dir", K.PATH),
        _o("--disable-auth", K.WORD),
        # The registry's config asset, read into the command (farm.recipes.assets); a path is refused.
        _o("--config", K.CONFIG),
        _o("--api-servers", K.WORD, nargs="+"),
    ),
)
