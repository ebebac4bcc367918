"""SGLang's argument spec: the `sglang serve` / `python -m sglang.launch_server` options a benchmark recipe may
use, each with the kind its value is judged as, and the ones the farm refuses with the reason.

Written from SGLang's own CLI source (`SOURCE`): the `ServerArgs` dataclass fields, which
`add_cli_args_from_dataclass` turns into options (a `bool` field is a store-true switch, an
`Optional[bool]` with `BooleanOptionalAction` takes `--no-`, a `List[...]` field takes one or more values, a
`Literal` or `choices=` list is a closed choice), and the options `ServerArgs.add_cli_args` registers by hand
(the parsers, `--config`, the deprecated spellings). Each spelling is the one SGLang declares: its aliases
(`--tensor-parallel-size`, `--ep`) are kept, and so are `--tp` and `--dp`, the abbreviations SGLang's own
documentation writes; any other argparse abbreviation (`--speculative-algo`) is refused. A deprecated
spelling (`--cuda-graph-max-bs`) stays its own option, rendered as written, so an older SGLang still reads it.

Backend selectors whose lists SGLang lets plugins extend (`add_attention_backend_choices` and the like:
attention, MoE runner, GEMM, linear attention) are plain names, not closed choices: a fork's `b12x` backend is
a name, never code. Lists the farm relies on for safety stay closed: `--load-format` without the formats that
fetch weights from elsewhere, `--nnodes 1`, `--node-rank 0`, `--disaggregation-mode null`.

An option missing here is refused unless a host's profile allows it; SGLang options that are not listed are
mostly multi-node, PD-disaggregation, RL and debugging knobs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from importlib import resources

from farm.engines.argspec import ArgSpec, OptionSpec, ValueKind, declared
from farm.errors import ArgumentPolicyError

K = ValueKind
_o = declared

SOURCE = (
    "sgl-project/sglang python/sglang/srt/server_args.py at 001067fffe33427bee0ed2f007fb7551a1d76b44 "
    "(ServerArgs fields and ServerArgs.add_cli_args; types as arg_groups/arg_utils.py derives them)"
)

_TLS = "the worker speaks plain HTTP on loopback"
_NO_SECRETS = "secrets never go in argv (they would be stored and logged)"
_NO_LISTENER = "the worker speaks HTTP to the engine on its own loopback port and opens no other listener"
_REMOTE_WEIGHTS = "loads weights from another instance over the network; the host maps the model"

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

KV_CACHE_DTYPES = ("auto", "bf16", "bfloat16", "fp4_e2m1", "fp4_mx_block16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4")
MOE_A2A_BACKENDS = (
    "ascend_fuseep", "ascend_tp", "deepep", "deepep_v2", "flashinfer", "megamoe", "mooncake", "mori", "nixl", "none",
    "pplx",
)  # fmt: skip
"""MOE_A2A_BACKEND_CHOICES: a closed list (SGLang has no hook to extend it)."""
CUDA_GRAPH_BACKENDS = ("breakable", "disabled", "full", "tc_piecewise")
MAMBA_RADIX_CACHE_STRATEGIES = ("auto", "extra_buffer", "extra_buffer_lazy", "no_buffer")
DSA_TOPK_BACKENDS = ("flashinfer", "sgl-kernel", "torch")
PREFILL_CP_SPLITS = ("in-seq-split", "round-robin-split")

_MODEL = (
    _o("--model-path", K.REPO, "--model"),
    _o("--tokenizer-path", K.REPO),
    _o("--tokenizer-mode", K.CHOICE, choices=("auto", "slow")),
    _o("--tokenizer-backend", K.CHOICE, choices=("fastokens", "huggingface")),
    _o("--tokenizer-worker-num", K.INT),
    _o("--detokenizer-worker-num", K.INT),
    _o("--skip-tokenizer-init", K.FLAG),
    _o("--load-format", K.CHOICE, choices=SGLANG_LOAD_FORMATS),
    _o("--model-loader-extra-config", K.JSON),
    _o("--trust-remote-code", K.FLAG),
    _o("--context-length", K.INT),
    _o("--is-embedding", K.FLAG),
    _o("--enable-multimodal", K.FLAG),
    _o("--revision", K.WORD),
    _o("--model-impl", K.WORD),
    _o("--model-config-parser", K.WORD),
    _o("--json-model-override-args", K.JSON),
    _o("--dtype", K.CHOICE, choices=("auto", "bfloat16", "float", "float16", "float32", "half")),
    _o("--quantization", K.CHOICE, choices=SGLANG_QUANTIZATIONS),
    _o("--quantization-param-path", K.PATH),
    _o("--kv-cache-dtype", K.CHOICE, choices=KV_CACHE_DTYPES),
    _o("--enable-fp32-lm-head", K.FLAG),
    _o("--modelopt-quant", K.WORD),
    _o("--modelopt-checkpoint-restore-path", K.PATH),
    _o("--modelopt-checkpoint-save-path", K.OUTPUT, reason="saves the quantized checkpoint"),
    _o("--modelopt-export-path", K.OUTPUT, reason="exports the quantized model"),
    _o("--quantize-and-serve", K.FLAG),
    _o("--enable-tf32-matmul", K.FLAG),
    _o("--startup-weight-load-mode", K.CHOICE, choices=("overlap", "serial")),
    _o("--weight-loader-disable-mmap", K.FLAG),
    _o("--weight-loader-prefetch-checkpoints", K.FLAG),
    _o("--weight-loader-prefetch-num-threads", K.INT),
    _o("--weight-loader-drop-cache-after-load", K.FLAG),
    _o(
        "--download-dir", K.OUTPUT, reason="downloads weights into it (the host's own cache comes from its environment)"
    ),
    _o("--model-checksum", K.REPO, nargs="?"),
    _o("--decrypted-config-file", K.PATH),
    _o("--decrypted-draft-config-file", K.PATH),
    _o("--language-model-only", K.FLAG),
)

_MEMORY_AND_SCHEDULING = (
    _o("--mem-fraction-static", K.FLOAT),
    _o("--max-running-requests", K.INT),
    _o("--max-queued-requests", K.INT),
    _o("--max-total-tokens", K.INT),
    _o("--chunked-prefill-size", K.INT),
    _o("--prefill-decode-interval", K.INT),
    _o("--enable-dynamic-chunking", K.FLAG),
    _o("--max-prefill-tokens", K.INT),
    _o("--prefill-max-requests", K.INT),
    _o(
        "--schedule-policy",
        K.CHOICE,
        choices=("dfs-weight", "fcfs", "lof", "lpm", "priority", "random", "routing-key"),
    ),
    _o("--enable-priority-scheduling", K.FLAG),
    _o("--disable-priority-preemption", K.FLAG),
    _o("--default-priority-value", K.INT),
    _o("--abort-on-priority-when-disabled", K.FLAG),
    _o("--schedule-low-priority-values-first", K.FLAG),
    _o("--priority-scheduling-preemption-threshold", K.INT),
    _o("--retraction-policy", K.CHOICE, choices=("length", "priority")),
    _o("--schedule-conservativeness", K.FLOAT),
    _o("--page-size", K.INT),
    _o("--c128-page-size", K.INT),
    _o("--swa-full-tokens-ratio", K.FLOAT),
    _o("--disable-hybrid-swa-memory", K.FLAG),
    _o("--radix-eviction-policy", K.CHOICE, choices=("lfu", "lru", "priority", "slru")),
    _o("--radix-cache-backend", K.WORD),
    _o("--prefill-only-disable-kv-cache", K.FLAG),
    _o("--disable-radix-cache", K.FLAG),
    _o("--enable-page-major-kv-layout", K.FLAG),
    _o("--enable-unified-memory", K.FLAG),
    _o("--disable-chunked-prefix-cache", K.FLAG),
    _o("--disable-overlap-schedule", K.FLAG),
    _o("--num-continuous-decode-steps", K.INT),
    _o("--scheduler-recv-interval", K.INT),
    _o("--enable-mixed-chunk", K.FLAG),
    _o("--enable-prefill-delayer", K.FLAG),
    _o("--prefill-delayer-max-delay-passes", K.INT),
    _o("--prefill-delayer-token-usage-low-watermark", K.FLOAT),
    _o("--prefill-delayer-queue-min-ratio", K.FLOAT),
    _o("--prefill-delayer-max-delay-ms", K.FLOAT),
    _o("--min-free-slots-delay", K.INT),
    _o("--cpu-offload-gb", K.INT),
    _o("--offload-group-size", K.INT),
    _o("--offload-num-in-group", K.INT),
    _o("--offload-prefetch-step", K.INT),
    _o("--offload-mode", K.WORD),
)

_PARALLELISM = (
    # `--tp` and `--dp` are argparse abbreviations SGLang's own documentation writes as the spellings (`--tp 2`,
    # `--dp 2 --tp 2`), and most real SGLang commands use: aliases here, rendered as `--tp-size`/`--dp-size`.
    _o("--tp-size", K.INT, "--tensor-parallel-size", "--tp"),
    _o("--pp-size", K.INT, "--pipeline-parallel-size"),
    _o("--dp-size", K.INT, "--data-parallel-size", "--dp"),
    _o("--ep-size", K.INT, "--expert-parallel-size", "--ep"),
    _o("--dcp-size", K.INT, "--decode-context-parallel-size"),
    _o("--attn-cp-size", K.INT, "--attention-context-parallel-size"),
    _o("--moe-dp-size", K.INT, "--moe-data-parallel-size"),
    _o("--moe-dense-tp-size", K.INT),
    _o("--dwdp-size", K.INT),
    _o("--pp-max-micro-batch-size", K.INT),
    _o("--pp-async-batch-depth", K.INT),
    _o(
        "--load-balance-method",
        K.CHOICE,
        choices=("auto", "follow_bootstrap_room", "round_robin", "total_requests", "total_tokens"),
    ),
    _o("--dcp-comm-backend", K.CHOICE, choices=("a2a", "ag_rs", "fi_a2a")),
    _o("--dcp-replicate-q-proj", K.BOOL),
    _o("--enable-prefill-cp", K.FLAG),
    _o("--cp-strategy", K.CHOICE, choices=("interleave", "zigzag")),
    _o("--enable-dsa-cache-layer-split", K.FLAG),
    _o("--enable-cp-decode-attn-tp", K.FLAG),
    _o("--enable-dp-attention", K.FLAG),
    _o("--enable-dp-attention-local-control-broadcast", K.FLAG),
    _o("--enable-dp-lm-head", K.FLAG),
    _o("--enable-tp-lm-head-all-to-all", K.BOOL),
    _o("--enable-attn-tp-input-scattered", K.FLAG),
    _o("--enable-shared-experts-attn-tp", K.FLAG),
    _o("--enable-dense-mlp-attn-tp", K.FLAG),
    _o("--disable-attn-tp-gather", K.FLAG),
    _o("--enable-p2p-check", K.FLAG),
    _o("--dist-timeout", K.INT),
    _o("--dist-init-addr", K.LOOPBACK, "--nccl-init-addr"),
    _o("--nccl-port", K.PORT),
    _o("--nnodes", K.CHOICE, choices=("1",)),
    _o("--node-rank", K.CHOICE, choices=("0",)),
    _o("--disaggregation-mode", K.CHOICE, choices=("null",)),
    _o("--enable-two-batch-overlap", K.FLAG),
    _o("--enable-single-batch-overlap", K.FLAG),
    _o("--tbo-token-distribution-threshold", K.FLOAT),
)

_DEVICE_AND_SERVING = (
    _o("--device", K.WORD),
    _o("--base-gpu-id", K.INT),
    _o("--gpu-id-step", K.INT),
    _o("--random-seed", K.INT),
    _o("--mlx-enable-sampling", K.FLAG),
    _o("--watchdog-timeout", K.FLOAT),
    _o("--soft-watchdog-timeout", K.FLOAT),
    _o("--sleep-on-idle", K.FLAG),
    _o("--numa-node", K.INT, nargs="+"),
    _o("--gc-threshold", K.INT, nargs="+"),
    _o("--host", K.LISTEN),
    _o("--port", K.LISTEN),
    _o("--skip-server-warmup", K.FLAG),
    _o("--enable-http2", K.FLAG),
    _o("--http2-max-concurrent-streams", K.INT),
    _o("--served-model-name", K.WORD),
    _o("--weight-version", K.WORD),
    _o("--chat-template", K.TEMPLATE),
    _o("--hf-chat-template-name", K.WORD),
    _o("--completion-template", K.TEMPLATE),
    _o("--file-storage-path", K.OUTPUT, reason="stores uploaded files in the directory"),
    _o("--enable-cache-report", K.FLAG),
    _o("--reasoning-parser", K.WORD),
    _o("--tool-call-parser", K.WORD),
    _o("--default-chat-template-kwargs", K.JSON),
    _o("--strip-thinking-cache", K.FLAG),
    _o("--enable-strict-thinking", K.FLAG),
    _o("--sampling-defaults", K.CHOICE, choices=("model", "openai")),
    _o("--preferred-sampling-params", K.JSON),
    _o("--allow-auto-truncate", K.FLAG),
    _o("--stream-interval", K.INT),
    _o("--batch-notify-size", K.INT),
    _o("--stream-response-default-include-usage", K.FLAG),
    _o("--incremental-streaming-output", K.FLAG),
    _o("--stream-output", K.FLAG),
    _o("--enable-streaming-session", K.FLAG),
    _o("--enable-session-radix-cache", K.FLAG),
    _o("--constrained-json-whitespace-pattern", K.TEXT),
    _o("--constrained-json-disable-any-whitespace", K.FLAG),
    _o("--enable-dynamic-batch-tokenizer", K.FLAG),
    _o("--dynamic-batch-tokenizer-batch-size", K.INT),
    _o("--dynamic-batch-tokenizer-batch-timeout", K.FLOAT),
    _o("--enable-tokenizer-batch-encode", K.FLAG),
    _o("--disable-tokenizer-batch-decode", K.FLAG),
    _o("--enable-memory-saver", K.FLAG),
    _o("--enable-weights-cpu-backup", K.FLAG),
    _o("--enable-draft-weights-cpu-backup", K.FLAG),
    _o("--enable-return-hidden-states", K.FLAG),
    _o("--return-hidden-states-mode", K.CHOICE, choices=("full", "last")),
    _o("--enable-return-routed-experts", K.FLAG),
    _o("--disable-outlines-disk-cache", K.FLAG),
    _o("--enable-mis", K.FLAG),
    _o("--enable-deterministic-inference", K.FLAG),
    _o("--rl-on-policy-target", K.CHOICE, choices=("fsdp",)),
    _o("--dllm-algorithm", K.WORD),
    _o("--dllm-algorithm-config", K.PATH),
    _o("--dllm-fdfo", K.BOOL),
)

_LOGGING_AND_METRICS = (
    _o("--log-level", K.WORD),
    _o("--log-level-http", K.WORD),
    _o("--log-requests", K.FLAG),
    _o("--log-requests-level", K.CHOICE, choices=("0", "1", "2", "3")),
    _o("--log-requests-format", K.CHOICE, choices=("json", "text")),
    _o(
        "--log-requests-target",
        K.OUTPUT,
        nargs="+",
        choices=("stdout", "stderr"),
        reason="a directory it writes request logs into (stdout and stderr reach the worker's engine log)",
    ),
    _o("--crash-dump-folder", K.OUTPUT, reason="dumps the requests of a crash into the folder"),
    _o("--show-time-cost", K.FLAG),
    _o("--enable-metrics", K.FLAG),
    _o("--enable-mfu-metrics", K.FLAG),
    _o("--enable-metrics-for-all-schedulers", K.FLAG),
    _o("--decode-log-interval", K.INT),
    _o("--gc-warning-threshold-secs", K.FLOAT),
    _o("--enable-request-time-stats-logging", K.FLAG),
    _o("--export-metrics-to-file", K.FLAG),
    _o("--export-metrics-to-file-dir", K.OUTPUT, reason="writes metrics files into the directory"),
)

_KERNELS_AND_GRAPHS = (
    _o("--attention-backend", K.WORD),
    _o("--prefill-attention-backend", K.WORD),
    _o("--decode-attention-backend", K.WORD),
    _o("--sampling-backend", K.CHOICE, choices=("ascend", "flashinfer", "pytorch")),
    _o("--grammar-backend", K.CHOICE, choices=("llguidance", "none", "outlines", "xgrammar")),
    _o("--mm-attention-backend", K.WORD),
    _o("--fp8-gemm-backend", K.WORD),
    _o("--fp4-gemm-backend", K.WORD),
    _o("--bf16-gemm-backend", K.WORD),
    _o("--dsa-prefill-backend", K.WORD),
    _o("--dsa-decode-backend", K.WORD),
    _o("--nsa-prefill-backend", K.WORD),
    _o("--nsa-decode-backend", K.WORD),
    _o("--dsv4-prefill-backend", K.CHOICE, choices=("auto", "flashmla_sparse", "flashmla_sparse_q8")),
    _o("--dsa-paged-mqa-logits-backend", K.CHOICE, choices=("aiter", "auto", "cutedsl", "deepgemm")),
    _o("--dsa-topk-backend", K.CHOICE, choices=DSA_TOPK_BACKENDS),
    _o("--disable-flashinfer-autotune", K.FLAG),
    _o("--flashinfer-autotune-skip-ops", K.WORD, nargs="+"),
    _o("--mamba-backend", K.CHOICE, choices=("flashinfer", "triton")),
    _o("--cuda-graph-config", K.JSON),
    _o("--cuda-graph-backend-decode", K.CHOICE, choices=CUDA_GRAPH_BACKENDS),
    _o("--cuda-graph-backend-prefill", K.CHOICE, choices=CUDA_GRAPH_BACKENDS),
    _o("--cuda-graph-max-bs-decode", K.INT),
    _o("--cuda-graph-max-bs-prefill", K.INT),
    _o("--cuda-graph-bs-decode", K.INT, nargs="+"),
    _o("--cuda-graph-bs-prefill", K.INT, nargs="+"),
    _o("--cuda-graph-tc-compiler", K.CHOICE, choices=("eager", "inductor")),
    _o("--disable-prefill-cuda-graph", K.FLAG),
    _o("--disable-decode-cuda-graph", K.FLAG),
    _o("--disable-cuda-graph-padding", K.FLAG),
    _o("--enable-profile-cuda-graph", K.FLAG),
    _o("--enable-cudagraph-gc", K.FLAG),
    _o("--enable-torch-compile", K.FLAG),
    _o("--torch-compile-max-bs", K.INT),
    _o("--enable-nccl-nvls", K.FLAG),
    _o("--enable-symm-mem", K.FLAG),
    _o("--triton-attention-reduce-in-fp32", K.FLAG),
    _o("--triton-attention-num-kv-splits", K.INT),
    _o("--triton-attention-split-tile-size", K.INT),
    _o("--flashinfer-mla-disable-ragged", K.FLAG),
    _o("--enable-fused-qk-norm-rope", K.FLAG),
    _o("--enable-fused-moe-sum-all-reduce", K.FLAG),
    _o("--enable-deepseek-v4-fp4-indexer", K.FLAG),
    _o("--disable-custom-all-reduce", K.FLAG),
    _o("--enable-mscclpp", K.FLAG),
    _o("--enable-torch-symm-mem", K.FLAG),
    _o("--enable-scattered-sconv", K.FLAG),
    _o("--pre-warm-nccl", K.FLAG),
    _o("--enable-quant-communications", K.FLAG),
    _o("--enable-flashinfer-allreduce-fusion", K.FLAG),
    _o("--enforce-disable-flashinfer-allreduce-fusion", K.FLAG),
    _o("--flashinfer-allreduce-fusion-backend", K.CHOICE, choices=("auto", "mnnvl", "trtllm")),
    _o("--enable-aiter-allreduce-fusion", K.FLAG),
    _o("--enable-pcie-oneshot-allreduce", K.FLAG),  # not in SOURCE; kept from SGLang builds that recipes name
)

_SPECULATIVE = (
    _o("--speculative-algorithm", K.WORD),
    _o("--speculative-draft-model-path", K.REPO, "--speculative-draft-model"),
    _o("--speculative-draft-model-revision", K.WORD),
    _o("--speculative-draft-load-format", K.CHOICE, choices=SGLANG_LOAD_FORMATS),
    _o("--speculative-num-steps", K.INT),
    _o("--speculative-eagle-topk", K.INT),
    _o("--speculative-num-draft-tokens", K.INT),
    _o("--speculative-dflash-block-size", K.INT),
    _o("--speculative-dspark-block-size", K.INT),
    _o("--speculative-dspark-sps-table-path", K.PATH),
    _o("--speculative-dspark-confidence-sts-path", K.PATH),
    _o("--speculative-dspark-align-verify-tokens-to-graph-tier", K.FLAG),
    _o("--speculative-accept-threshold-single", K.FLOAT),
    _o("--speculative-accept-threshold-acc", K.FLOAT),
    _o("--speculative-use-rejection-sampling", K.FLAG),
    _o("--speculative-token-map", K.REPO),
    _o("--speculative-attention-mode", K.CHOICE, choices=("decode", "prefill")),
    _o("--speculative-draft-attention-backend", K.WORD),
    _o("--speculative-dsa-topk-backend", K.CHOICE, choices=DSA_TOPK_BACKENDS),
    _o(
        "--speculative-draft-kv-cache-dtype",
        K.CHOICE,
        choices=("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"),
    ),
    _o("--speculative-draft-window-size", K.INT),
    _o("--speculative-dflash-draft-window-size", K.INT),
    _o("--speculative-moe-runner-backend", K.WORD),
    _o("--speculative-moe-a2a-backend", K.CHOICE, choices=MOE_A2A_BACKENDS),
    _o("--speculative-draft-model-quantization", K.CHOICE, choices=SGLANG_QUANTIZATIONS),
    _o("--speculative-skip-dp-mlp-sync", K.FLAG),
    _o("--enable-multi-layer-eagle", K.FLAG),
    _o("--speculative-adaptive", K.FLAG),
    _o("--speculative-adaptive-config", K.PATH),
    _o("--speculative-ngram-min-bfs-breadth", K.INT),
    _o("--speculative-ngram-max-bfs-breadth", K.INT),
    _o("--speculative-ngram-match-type", K.CHOICE, choices=("BFS", "PROB")),
    _o("--speculative-ngram-max-trie-depth", K.INT),
    _o("--speculative-ngram-capacity", K.INT),
    _o("--speculative-ngram-external-corpus-path", K.PATH),
    _o("--speculative-ngram-external-sam-budget", K.INT),
    _o("--speculative-ngram-external-corpus-max-tokens", K.INT),
)

_MOE = (
    _o("--moe-a2a-backend", K.CHOICE, choices=MOE_A2A_BACKENDS),
    _o("--moe-runner-backend", K.WORD),
    _o("--enable-w4a4-mxfp4-megamoe", K.FLAG),
    _o("--deepep-v2-mode", K.CHOICE, choices=("direct", "hybrid")),
    _o("--flashinfer-mxfp4-moe-precision", K.CHOICE, choices=("bf16", "default")),
    _o("--deepep-mode", K.CHOICE, choices=("auto", "low_latency", "normal")),
    _o("--deepep-dispatcher-output-dtype", K.CHOICE, choices=("auto", "bf16", "fp8", "int8", "nvfp4")),
    _o("--deepep-config", K.JSON),  # SGLang also reads a file path here: only the JSON form is judged
    _o("--ep-num-redundant-experts", K.INT),
    _o("--ep-dispatch-algorithm", K.CHOICE, choices=("dynamic", "fake", "lp", "static")),
    _o("--init-expert-location", K.PATH, choices=("trivial",)),
    _o("--enable-eplb", K.FLAG),
    _o("--eplb-algorithm", K.WORD),
    _o("--eplb-rebalance-num-iterations", K.INT),
    _o("--eplb-rebalance-layers-per-chunk", K.INT),
    _o("--eplb-min-rebalancing-utilization-threshold", K.FLOAT),
    _o("--expert-distribution-recorder-mode", K.CHOICE, choices=("per_pass", "per_token", "stat", "stat_approx")),
    _o("--expert-distribution-recorder-buffer-size", K.INT),
    _o("--expert-balancedness-report-mode", K.CHOICE, choices=("both", "off", "prometheus", "server_log")),
    _o("--enable-waterfill", K.FLAG),
    _o("--disable-flashinfer-cutlass-moe-fp4-allgather", K.FLAG),
    _o("--disable-shared-experts-fusion", K.FLAG),
    _o("--enforce-shared-experts-fusion", K.FLAG),
    _o("--kt-weight-path", K.PATH),
    _o("--kt-method", K.WORD),
    _o("--kt-cpuinfer", K.INT),
    _o("--kt-threadpool-count", K.INT),
    _o("--kt-num-gpu-experts", K.INT),
    _o("--kt-max-deferred-experts-per-token", K.INT),
)

_MAMBA_AND_CACHES = (
    _o("--max-mamba-cache-size", K.INT),
    _o("--mamba-ssm-dtype", K.CHOICE, choices=("bfloat16", "float16", "float32")),
    _o("--mamba-max-states-per-path", K.INT),
    _o("--enable-mamba-cache-stochastic-rounding", K.FLAG),
    _o("--mamba-cache-philox-rounds", K.INT),
    _o("--mamba-full-memory-ratio", K.FLOAT),
    _o("--mamba-radix-cache-strategy", K.CHOICE, choices=MAMBA_RADIX_CACHE_STRATEGIES),
    _o("--mamba-scheduler-strategy", K.CHOICE, choices=MAMBA_RADIX_CACHE_STRATEGIES),
    _o("--mamba-track-interval", K.INT),
    _o("--enable-int8-mamba-checkpoint", K.FLAG),
    _o("--int8-mamba-ckpt-size", K.INT),
    _o("--linear-attn-backend", K.WORD),
    _o("--linear-attn-decode-backend", K.WORD),
    _o("--linear-attn-prefill-backend", K.WORD),
    _o("--linear-attn-verify-backend", K.WORD),
    _o("--enable-linear-replayssm", K.FLAG),
    _o("--linear-replayssm-cache-len", K.INT),
    _o("--enable-linear-replayssm-spec", K.FLAG),
    _o("--enable-gdn-replayssm-spec", K.FLAG),
    _o("--enable-hierarchical-cache", K.FLAG),
    _o("--hicache-host-memory-mode", K.CHOICE, choices=("buffer_only", "cache")),
    _o("--hicache-ratio", K.FLOAT),
    _o("--hicache-size", K.INT),
    _o("--hicache-write-policy", K.CHOICE, choices=("write_back", "write_through", "write_through_selective")),
    _o("--hicache-io-backend", K.CHOICE, choices=("direct", "kernel", "kernel_ascend")),
    _o(
        "--hicache-mem-layout",
        K.CHOICE,
        choices=("layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head"),
    ),
    _o("--enable-hisparse", K.FLAG),
    _o("--hisparse-config", K.JSON, "--hierarchical-sparse-attention-extra-config"),
)

_MULTIMODAL_AND_LORA = (
    _o("--enable-broadcast-mm-inputs-process", K.FLAG),
    _o("--enable-prefix-mm-cache", K.FLAG),
    _o("--mm-enable-dp-encoder", K.FLAG),
    _o("--mm-process-config", K.JSON),
    _o("--mm-processor-worker-num", K.INT),
    _o("--mm-io-worker-num", K.INT),
    _o("--allowed-media-domains", K.WORD, nargs="+"),
    _o("--media-url-max-file-size-mb", K.INT),
    _o("--mm-preprocess-cache-size-mb", K.INT),
    _o("--limit-mm-data-per-request", K.JSON),
    _o("--image-processor-backend", K.CHOICE, choices=("auto", "pil", "torchvision")),
    _o("--disable-fast-image-processor", K.FLAG),
    _o("--mm-feature-transport", K.CHOICE, choices=("cpu", "cuda_ipc", "cuda_vmm")),
    _o("--keep-mm-feature-on-device", K.FLAG),
    _o("--enable-lora", K.FLAG),
    _o("--enable-lora-overlap-loading", K.FLAG),
    _o("--max-lora-rank", K.INT),
    _o("--lora-target-modules", K.WORD, nargs="*"),
    _o("--lora-paths", K.LORA, nargs="*"),
    _o("--max-loaded-loras", K.INT),
    _o("--max-loras-per-batch", K.INT),
    _o("--lora-eviction-policy", K.CHOICE, choices=("fifo", "lru")),
    _o("--lora-backend", K.CHOICE, choices=("ascend", "csgmv", "torch_native", "triton")),
    _o("--max-lora-chunk-size", K.CHOICE, choices=("16", "32", "64", "128")),
    _o("--experts-shared-outer-loras", K.BOOL),
    _o("--lora-use-virtual-experts", K.FLAG),
    _o("--lora-strict-loading", K.BOOL),
    _o("--lora-drain-wait-threshold", K.FLOAT),
)

_DEPRECATED_SPELLINGS = (
    _o("--cuda-graph-max-bs", K.INT),
    _o("--cuda-graph-bs", K.INT, nargs="+"),
    _o("--disable-cuda-graph", K.FLAG),
    _o("--enable-breakable-cuda-graph", K.FLAG),
    _o("--disable-piecewise-cuda-graph", K.FLAG),
    _o("--enforce-piecewise-cuda-graph", K.FLAG),
    _o("--piecewise-cuda-graph-tokens", K.INT, nargs="+"),
    _o("--piecewise-cuda-graph-compiler", K.CHOICE, choices=("eager", "inductor")),
    _o("--piecewise-cuda-graph-max-tokens", K.INT),
    _o("--enable-dsa-prefill-context-parallel", K.FLAG),
    _o("--enable-nsa-prefill-context-parallel", K.FLAG),
    _o("--enable-prefill-context-parallel", K.FLAG),
    _o("--dsa-prefill-cp-mode", K.CHOICE, choices=PREFILL_CP_SPLITS),
    _o("--nsa-prefill-cp-mode", K.CHOICE, choices=PREFILL_CP_SPLITS),
    _o("--prefill-cp-mode", K.CHOICE, choices=("in-seq-split",)),
)
"""Spellings `add_cli_args` keeps for older recipes, each writing a newer option's value."""

_CODE_LOADING = (
    _o("--enable-custom-logit-processor", K.CODE, nargs=0, reason="runs logit processors sent with requests"),
    _o("--custom-weight-loader", K.CODE, nargs="*", reason="imports weight loaders by name"),
)
"""Options that load code other than the model's: refused unless the host's profile lists them."""

_REFUSED = (
    _o("--api-key", K.REFUSED, reason=_NO_SECRETS),
    _o("--admin-api-key", K.REFUSED, reason=_NO_SECRETS),
    _o("--ssl-keyfile-password", K.REFUSED, reason=_NO_SECRETS),
    _o("--ssl-keyfile", K.REFUSED, reason=_TLS),
    _o("--ssl-certfile", K.REFUSED, reason=_TLS),
    _o("--ssl-ca-certs", K.REFUSED, reason=_TLS),
    _o("--enable-ssl-refresh", K.REFUSED, reason=_TLS),
    _o("--otlp-traces-endpoint", K.REFUSED, reason="sends traces outside; no outbound telemetry"),
    _o("--enable-trace", K.REFUSED, reason="exports OpenTelemetry traces; the farm allows no telemetry export"),
    _o("--kv-events-config", K.REFUSED, reason="publishes KV-cache events to an endpoint for an outside consumer"),
    _o("--tool-server", K.REFUSED, reason="connects the engine to tool servers beyond the worker's host"),
    _o("--grpc-port", K.REFUSED, reason=_NO_LISTENER),
    _o("--smg-grpc-mode", K.REFUSED, reason=_NO_LISTENER),
    _o("--grpc-mode", K.REFUSED, reason=_NO_LISTENER),
    _o("--gated-launch-port", K.REFUSED, reason=_NO_LISTENER),
    _o("--engine-info-bootstrap-port", K.REFUSED, reason=_NO_LISTENER),
    _o("--sidecar", K.REFUSED, reason="runs a Python module by name beside the engine"),
    _o("--sidecar-args", K.REFUSED, reason="arguments for a sidecar module, which the farm never runs"),
    _o("--forward-hooks", K.REFUSED, reason="attaches forward hooks: Python callables named by import path"),
    _o("--fastapi-root-path", K.REFUSED, reason="the worker reaches the API at its standard paths"),
    _o("--use-ray", K.REFUSED, reason="starts Ray, whose services listen beyond the worker's loopback port"),
    _o(
        "--hicache-storage-backend",
        K.REFUSED,
        reason="keeps the KV cache in a storage service, or loads a backend class by module path",
    ),
    _o(
        "--hicache-storage-backend-extra-config",
        K.REFUSED,
        reason="configures a KV-cache storage service or a backend module path",
    ),
    _o("--lmcache-config-file", K.REFUSED, reason="reads a cache configuration (remote stores) past every check"),
    _o("--flexkv-config-file", K.REFUSED, reason="reads a cache configuration (remote stores) past every check"),
    _o("--remote-instance-weight-loader-seed-instance-ip", K.REFUSED, reason=_REMOTE_WEIGHTS),
    _o("--remote-instance-weight-loader-seed-instance-service-port", K.REFUSED, reason=_REMOTE_WEIGHTS),
    _o("--remote-instance-weight-loader-send-weights-group-ports", K.REFUSED, reason=_REMOTE_WEIGHTS),
    _o("--modelexpress-config", K.REFUSED, reason=_REMOTE_WEIGHTS),
    _o("--encoder-urls", K.REFUSED, reason="connects to encoder servers beyond the worker's host"),
    _o("--encoder-register-urls", K.REFUSED, reason="registers with servers beyond the worker's host"),
    _o("--decoupled-spec-bind-endpoint", K.REFUSED, reason="binds a ZMQ endpoint for a separate draft engine"),
    _o("--decoupled-spec-connect-endpoints", K.REFUSED, reason="dials ZMQ endpoints of a separate draft engine"),
    _o("--delete-ckpt-after-loading", K.REFUSED, reason="deletes the model checkpoint from the host's cache"),
    _o("--config", K.REFUSED, reason="reads more arguments from a file on the worker, past every check"),
)
"""Options no host allows, with the reason quoted in the error."""

SGLANG = ArgSpec(
    engine="sglang",
    version="0.5 (main at 001067ff)",
    source=SOURCE,
    prefixes=(("python", "-m", "sglang.launch_server"), ("sglang", "serve")),
    model_option="--model-path",
    # SGLang loads the model, its tokenizer and config at --revision; the draft at its own revision
    revisions={
        "model": ("--revision",),
        "--tokenizer-path": ("--revision",),
        "--speculative-draft-model-path": ("--speculative-draft-model-revision",),
    },
    underscores=False,
    # Without data-parallel attention each `--dp-size` replica runs on its own tp x pp devices.
    device_options=("--tp-size", "--pp-size", "--dp-size"),
    devices_shared_when={"--dp-size": "--enable-dp-attention"},
    options=(
        *_MODEL,
        *_MEMORY_AND_SCHEDULING,
        *_PARALLELISM,
        *_DEVICE_AND_SERVING,
        *_LOGGING_AND_METRICS,
        *_KERNELS_AND_GRAPHS,
        *_SPECULATIVE,
        *_MOE,
        *_MAMBA_AND_CACHES,
        *_MULTIMODAL_AND_LORA,
        *_DEPRECATED_SPELLINGS,
        *_CODE_LOADING,
        *_REFUSED,
    ),
)
"""The allowlist as read from SGLang's main branch at 001067ff (`SOURCE`)."""

RELEASE_DUMPS = {"0.5.23": "sglang_server_args.json"}
"""Dumps of released SGLang parsers (deploy/gen_sglang_server_args.py on the release's wheel), beside this file."""

ABBREVIATIONS = frozenset({"--tp", "--dp"})
"""What SGLang's docs write for --tp-size and --dp-size: argparse reads them as abbreviations, in every release."""


@cache
def sglang_release_spec(version: str) -> ArgSpec:
    """The allowlist narrowed to one SGLang release's own parser: an option (or spelling) the release lacks is
    not an option of it, and a closed choice keeps only the values the release takes. What the farm judges
    (the kinds, the refusals) stays the allowlist's; what the release adds beyond it stays refused."""
    if version not in RELEASE_DUMPS:
        raise ArgumentPolicyError(f"no SGLang {version!r} parser dump (shipped: {', '.join(RELEASE_DUMPS)})")
    name = RELEASE_DUMPS[version]
    data = json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))
    known = {spelling: raw for raw in data["options"] for spelling in raw["option_strings"]}
    options: list[OptionSpec] = []
    for option in SGLANG.options:
        spellings = tuple(s for s in (option.name, *option.aliases) if s in known or s in ABBREVIATIONS)
        if not spellings:
            continue
        raw = known.get(spellings[0], {})
        choices = option.choices
        if choices is not None and raw.get("choices"):
            choices = tuple(c for c in choices if c in raw["choices"])
        options.append(replace(option, name=spellings[0], aliases=spellings[1:], choices=choices))
    return replace(
        SGLANG, version=str(data["version"]), source=f"{name} (SGLang's parser) and {SOURCE}", options=tuple(options)
    )
