"""Argument specs of the engines whose parsers the farm cannot run here: SGLang, Ollama, LM Studio, TabbyAPI, MLX.

Each is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, OptionSpec, ValueKind

K = ValueKind


def _o(name: str, kind: ValueKind, *aliases: str, nargs: str | int | None = None, **more: object) -> OptionSpec:
    if kind in (K.FLAG, K.BOOL):
        nargs = 0
    return OptionSpec(name=name, aliases=aliases, kind=kind, nargs=nargs, **more)  # type: ignore[arg-type]


_TLS = "the worker speaks plain HTTP on loopback"
_NO_SECRETS = "secrets never go in argv (they would be stored and logged)"

SGLANG_LOAD_FORMATS = (
    "auto", "bitsandbytes", "dummy", "expert_pack", "fastsafetensors", "gguf", "layered", "mistral", "npcache",
    "presharded", "pt", "safetensors", "sharded_state",
)  # fmt: skip
"""SGLang's LOAD_FORMAT_CHOICES without the ones that fetch weights from elsewhere (remote, remote_instance,
private, runai_streamer, flash_rl)."""

SGLANG_QUANTIZATIONS = (
    "auto-round", "auto-round-int8", "awq", "awq_marlin", "bitsandbytes", "compressed-tensors", "fp8", "gguf", "gptq",
    "gptq_marlin", "humming", "marlin", "mlx_q4", "mlx_q8", "modelopt", "modelopt_fp4", "modelopt_fp8",
    "modelopt_mixed", "modelslim", "moe_wna16", "mxfp4", "mxfp8", "mxfp_w4a8", "nvfp4_online", "petit_nvfp4", "quark",
    "quark_int4fp8_moe", "quark_mxfp4", "unquant", "w4afp8", "w8a8_fp8", "w8a8_int8",
)  # fmt: skip
"""SGLang's QUANTIZATION_CHOICES (server_args.py)."""

SGLANG = ArgSpec(
    engine="sglang",
    version="0.5",
    source="sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs.add_cli_args)",
    prefixes=(("python", "-m", "sglang.launch_server"), ("sglang", "serve")),
    model_option="--model-path",
    underscores=False,
    device_options=("--tp-size", "--pp-size"),
    options=(
        _o("--model-path", K.REPO, "--model"),
        _o("--tokenizer-path", K.REPO),
        _o("--tokenizer-mode", K.CHOICE, choices=("auto", "slow")),
        _o("--skip-tokenizer-init", K.FLAG),
        _o("--load-format", K.CHOICE, choices=SGLANG_LOAD_FORMATS),
        _o("--model-loader-extra-config", K.JSON),
        _o("--trust-remote-code", K.FLAG),
        _o("--context-length", K.INT),
        _o("--is-embedding", K.FLAG),
        _o("--revision", K.WORD),
        _o("--host", K.LISTEN),
        _o("--port", K.LISTEN),
        _o("--dtype", K.WORD),
        _o("--kv-cache-dtype", K.WORD),
        _o("--quantization", K.CHOICE, choices=SGLANG_QUANTIZATIONS),
        _o("--served-model-name", K.WORD),
        _o("--chat-template", K.TEMPLATE),
        _o("--completion-template", K.TEMPLATE),
        _o("--mem-fraction-static", K.FLOAT),
        _o("--max-running-requests", K.INT),
        _o("--max-total-tokens", K.INT),
        _o("--chunked-prefill-size", K.INT),
        _o("--max-prefill-tokens", K.INT),
        _o("--schedule-policy", K.WORD),
        _o("--schedule-conservativeness", K.FLOAT),
        _o("--page-size", K.INT),
        _o("--cuda-graph-max-bs", K.INT),
        _o("--cuda-graph-bs", K.INT, nargs="+"),
        _o("--disable-cuda-graph", K.FLAG),
        _o("--disable-radix-cache", K.FLAG),
        _o("--disable-overlap-schedule", K.FLAG),
        _o("--enable-mixed-chunk", K.FLAG),
        _o("--enable-torch-compile", K.FLAG),
        _o("--torch-compile-max-bs", K.INT),
        _o("--tp-size", K.INT, "--tensor-parallel-size"),
        _o("--pp-size", K.INT, "--pipeline-parallel-size"),
        _o("--dp-size", K.INT, "--data-parallel-size"),
        _o("--ep-size", K.INT, "--expert-parallel-size"),
        _o("--enable-dp-attention", K.FLAG),
        _o("--moe-runner-backend", K.WORD),
        _o("--moe-a2a-backend", K.WORD),
        _o("--stream-interval", K.INT),
        _o("--random-seed", K.INT),
        _o("--log-level", K.WORD),
        _o("--log-requests", K.FLAG),
        _o("--enable-metrics", K.FLAG),
        _o("--decode-log-interval", K.INT),
        _o("--attention-backend", K.WORD),
        _o("--prefill-attention-backend", K.WORD),
        _o("--decode-attention-backend", K.WORD),
        _o("--sampling-backend", K.CHOICE, choices=("ascend", "flashinfer", "pytorch")),
        _o("--grammar-backend", K.CHOICE, choices=("llguidance", "none", "outlines", "xgrammar")),
        _o("--radix-eviction-policy", K.CHOICE, choices=("lfu", "lru", "priority", "slru")),
        _o("--fp8-gemm-backend", K.WORD),
        _o("--fp4-gemm-backend", K.WORD),
        _o("--swa-full-tokens-ratio", K.FLOAT),
        _o("--enable-pcie-oneshot-allreduce", K.FLAG),
        _o("--enable-multi-layer-eagle", K.FLAG),
        _o("--enable-deterministic-inference", K.FLAG),
        _o("--enable-two-batch-overlap", K.FLAG),
        _o("--enable-flashinfer-allreduce-fusion", K.FLAG),
        _o("--disable-custom-all-reduce", K.FLAG),
        _o("--disable-shared-experts-fusion", K.FLAG),
        _o("--num-continuous-decode-steps", K.INT),
        _o("--allow-auto-truncate", K.FLAG),
        _o("--enable-memory-saver", K.FLAG),
        _o("--triton-attention-reduce-in-fp32", K.FLAG),
        _o("--speculative-draft-model-revision", K.WORD),
        _o("--mm-attention-backend", K.WORD),
        _o("--speculative-algorithm", K.WORD),
        _o("--speculative-draft-model-path", K.REPO, "--speculative-draft-model"),
        _o("--speculative-num-steps", K.INT),
        _o("--speculative-eagle-topk", K.INT),
        _o("--speculative-num-draft-tokens", K.INT),
        _o("--reasoning-parser", K.WORD),
        _o("--tool-call-parser", K.WORD),
        _o("--json-model-override-args", K.JSON),
        _o("--preferred-sampling-params", K.JSON),
        _o("--lora-paths", K.LORA, nargs="*"),
        _o("--max-loras-per-batch", K.INT),
        _o("--enable-hierarchical-cache", K.FLAG),
        _o("--hicache-ratio", K.FLOAT),
        _o("--watchdog-timeout", K.FLOAT),
        _o("--skip-server-warmup", K.FLAG),
        _o("--enable-cache-report", K.FLAG),
        _o("--download-dir", K.PATH),
        _o("--base-gpu-id", K.INT),
        _o("--gpu-id-step", K.INT),
        _o("--dist-init-addr", K.LOOPBACK, "--nccl-init-addr"),
        _o("--nnodes", K.CHOICE, choices=("1",)),
        _o("--node-rank", K.CHOICE, choices=("0",)),
        _o("--nccl-port", K.PORT),
        _o("--enable-custom-logit-processor", K.CODE, reason="runs logit processors sent with requests"),
        _o("--custom-weight-loader", K.CODE, nargs="*", reason="imports weight loaders by name"),
        _o("--api-key", K.REFUSED, reason=_NO_SECRETS),
        _o("--ssl-keyfile", K.REFUSED, reason=_TLS),
        _o("--ssl-certfile", K.REFUSED, reason=_TLS),
        _o("--otlp-traces-endpoint", K.REFUSED, reason="sends traces outside; no outbound telemetry"),
        _o("--file-storage-path", K.PATH),
        _o("--crash-dump-folder", K.PATH),
        _o("--config", K.REFUSED, reason="reads more arguments from a file on the worker, past every check"),
    ),
)

OLLAMA = ArgSpec(
    engine="ollama",
    version="0.12",
    source="ollama/ollama cmd/cmd.go (serve, run)",
    prefixes=(("ollama", "run"), ("ollama", "serve")),
    positional_model=True,
    underscores=False,
    abbreviations=False,
    options=(
        _o("--verbose", K.FLAG),
        _o("--nowordwrap", K.FLAG),
        _o("--format", K.WORD),
        _o("--keepalive", K.WORD),
        _o("--think", K.WORD, nargs="?"),
        _o("--hidethinking", K.FLAG),
        _o("--insecure", K.REFUSED, reason="pulls over an unverified connection"),
    ),
)

LMSTUDIO = ArgSpec(
    engine="lmstudio",
    version="0.3",
    source="lmstudio-ai/lms src/subcommands (server start, load)",
    prefixes=(("lms", "server", "start"), ("lms", "load")),
    positional_model=True,
    underscores=False,
    abbreviations=False,
    options=(
        _o("--port", K.LISTEN),
        _o("--cors", K.REFUSED, reason="opens the API to every web origin"),
        _o("--context-length", K.INT),
        _o("--gpu", K.WORD),
        _o("--identifier", K.WORD),
        _o("--ttl", K.INT),
        _o("--yes", K.FLAG, "-y"),
        _o("--exact", K.FLAG),
        _o("--quiet", K.FLAG),
    ),
)

TABBYAPI = ArgSpec(
    engine="tabbyapi",
    version="2025",
    source="theroyallab/tabbyAPI common/args.py (from the config model)",
    prefixes=(("python", "main.py"), ("python", "start.py"), ("./start.sh",)),
    underscores=False,
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
        _o("--config", K.REFUSED, reason="reads more arguments from a file on the worker, past every check"),
        _o("--api-servers", K.WORD, nargs="+"),
    ),
)

MLX = ArgSpec(
    engine="mlx",
    version="0.28",
    source="ml-explore/mlx-lm mlx_lm/server.py (main's argparse)",
    prefixes=(("mlx_lm.server",), ("python", "-m", "mlx_lm.server"), ("mlx_lm", "server")),
    model_option="--model",
    underscores=False,
    options=(
        _o("--model", K.REPO),
        _o("--adapter-path", K.PATH),
        _o("--host", K.LISTEN),
        _o("--port", K.LISTEN),
        _o("--draft-model", K.REPO),
        _o("--num-draft-tokens", K.INT),
        _o("--trust-remote-code", K.FLAG),
        _o("--log-level", K.WORD),
        _o("--chat-template", K.TEMPLATE),
        _o("--use-default-chat-template", K.FLAG),
        _o("--temp", K.FLOAT),
        _o("--top-p", K.FLOAT),
        _o("--top-k", K.INT),
        _o("--min-p", K.FLOAT),
        _o("--max-tokens", K.INT),
        _o("--chat-template-args", K.JSON),
        _o("--decode-concurrency", K.INT),
        _o("--prompt-concurrency", K.INT),
        _o("--prefill-step-size", K.INT),
        _o("--prompt-cache-size", K.INT),
        _o("--prompt-cache-bytes", K.INT),
        _o("--pipeline", K.FLAG),
    ),
)

SPECS: dict[str, ArgSpec] = {s.engine: s for s in (SGLANG, OLLAMA, LMSTUDIO, TABBYAPI, MLX)}
