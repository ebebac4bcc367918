"""llama-server options newer than the 0.3.16 dump, which farm.engines.llamacpp.adapter merges into its spec.

The 0.3.16 dump (llama_server_args_0.3.16.json) is llama-server's own `--help` at llama.cpp 4227c9b, the build
vendored in llama-cpp-python 0.3.16. 0.3.36's dump has nearly all of these itself (its own entries stand; where its
help names no kind, `MODE` or `N`, this file's kind judges). Recipes from the registry use newer options
(`--spec-type`, `--reasoning off`, `--cache-ram`...). They are listed here by hand from `SOURCE`: the option table
llama-gen-docs generates from common/arg.cpp into tools/server/README.md, checked against common/arg.cpp for how
values are read. Each entry names every spelling that source gives it; the kind of each value is this file's
(llamacpp.KINDS and llamacpp.REFUSED still decide for the names they list).

`ALIASES` adds the newer spellings of options the dump already has (`--spec-draft-model` is `-md`); the option
keeps the dump's canonical spelling, so what is rendered runs on the older server too. `NEWER` adds options the
dump lacks; where the source gives an option both an older and a newer spelling (`--cpu-mask-draft`,
`--spec-draft-cpu-mask`), the older one is canonical for the same reason. A worker whose llama-server is older
than an option it is given fails to start with `invalid argument`, which the worker reports as a bad argument.

A host that dumps its own llama-server's `--help` (deploy/gen_llama_server_args.py) gets exactly that list:
this supplement is for the shipped spec only.
"""

from __future__ import annotations

from collections.abc import Mapping

from farm.engines.argspec import ValueKind, declared

K = ValueKind
_o = declared

SOURCE = (
    "ggml-org/llama.cpp tools/server/README.md at 00dc8057ab28c9cb4c79a6dd6dfce07fe779f63b (the llama-gen-docs "
    "table of common/arg.cpp) and common/arg.cpp at 0017d6fb63f9590e791a7562b276148f7bd5b7fc"
)

SOURCE_SHORT = "llama.cpp tools/server/README.md 00dc8057, common/arg.cpp 0017d6fb"
"""`SOURCE` as the spec's `source` quotes it in a refusal."""

SWITCH_WORDS = ("0", "1", "disabled", "enabled", "false", "off", "on", "true")
"""What llama.cpp's is_truthy / is_falsey accept (common/arg.cpp)."""

NEWER_CHOICES: Mapping[str, tuple[str, ...]] = {
    "--split-mode": ("tensor",),
}
"""Values newer servers take for options the dump already has: `-sm tensor`, tensor parallelism across devices
(ggml-org/llama.cpp#19378; docs/multi-gpu.md, #22729, lists none, layer, row and tensor)."""

ALIASES: Mapping[str, tuple[str, ...]] = {
    "-ctkd": ("--spec-draft-type-k",),
    "-ctvd": ("--spec-draft-type-v",),
    "--temp": ("--temperature",),
    "--typical": ("--typical-p",),
    "--swa-checkpoints": ("-ctxcp", "--ctx-checkpoints"),
    "--mmproj": ("-mm",),
    "--mmproj-url": ("-mmu",),
    "--no-mmproj": ("--no-mmproj-auto",),
    "--no-webui": ("--no-ui",),
    "-hfd": ("--spec-draft-hf",),
    "-td": ("--spec-draft-threads",),
    "-tbd": ("--spec-draft-threads-batch",),
    "--override-tensor-draft": ("--spec-draft-override-tensor",),
    "--cpu-moe-draft": ("--spec-draft-cpu-moe",),
    "--n-cpu-moe-draft": ("--spec-draft-n-cpu-moe", "--spec-draft-ncmoe"),
    "--draft-p-min": ("--spec-draft-p-min",),
    "-devd": ("--spec-draft-device",),
    "-ngld": ("--spec-draft-ngl",),
    "-md": ("--spec-draft-model",),
}
"""Newer spellings of options the dump has, keyed by a spelling the dump knows."""

_SWITCHES = (
    _o("--perf", K.FLAG),
    _o("--kv-offload", K.FLAG, "-kvo"),
    _o("--repack", K.FLAG),
    _o("--no-host", K.FLAG),
    _o("--op-offload", K.FLAG),
    _o("--log-jsonl", K.FLAG),
    _o("--no-log-jsonl", K.FLAG),
    _o("--no-log-prefix", K.FLAG),
    _o("--no-log-timestamps", K.FLAG),
    _o("--backend-sampling", K.FLAG, "-bs"),
    _o("--no-kv-unified", K.FLAG, "-no-kvu"),
    _o("--cache-idle-slots", K.FLAG),
    _o("--no-cache-idle-slots", K.FLAG),
    _o("--context-shift", K.FLAG),
    _o("--warmup", K.FLAG),
    _o("--mmproj-auto", K.FLAG),
    _o("--mmproj-offload", K.FLAG),
    _o("--webui", K.FLAG, "--ui"),
    _o("--no-agent", K.FLAG, "-no-ag"),
    _o("--cache-prompt", K.FLAG),
    _o("--no-cache-prompt", K.FLAG),
    _o("--no-jinja", K.FLAG),
    _o("--reasoning-preserve", K.FLAG),
    _o("--no-reasoning-preserve", K.FLAG),
    _o("--skip-chat-parsing", K.FLAG),
    _o("--no-skip-chat-parsing", K.FLAG),
    _o("--prefill-assistant", K.FLAG),
    _o("--spec-draft-backend-sampling", K.FLAG),
    _o("--no-spec-draft-backend-sampling", K.FLAG),
    _o("--spec-default", K.FLAG),
)

_MEMORY_AND_PLACEMENT = (
    _o("--load-mode", K.CHOICE, "-lm", choices=("auto", "dio", "mlock", "mmap", "mmap+mlock", "none")),
    _o("--lazy-mode", K.CHOICE, "-lzm", choices=("auto", "off", "on")),
    _o("--moe-cache-mib", K.NUMBER),
    _o("--n-cpu-ffn", K.NUMBER, "-ncffn"),
    _o("--fit", K.CHOICE, "-fit", choices=SWITCH_WORDS),
    _o("--fit-target", K.TEXT, "-fitt"),
    _o("--fit-ctx", K.NUMBER, "-fitc"),
    _o("--kv-unified-per-slot", K.NUMBER),
    _o("--checkpoint-min-step", K.NUMBER, "-cms"),
    _o("--cache-ram", K.NUMBER, "-cram"),
    _o("--lookup-cache-static", K.PATH, "-lcs"),
    _o("--lookup-cache-dynamic", K.PATH, "-lcd"),
)

_SERVING = (
    _o("--top-nsigma", K.NUMBER, "--top-n-sigma"),
    _o("--adaptive-target", K.NUMBER),
    _o("--adaptive-decay", K.NUMBER),
    _o("--mmproj-device", K.TEXT, "-mmdev"),
    _o("--image-min-tokens", K.NUMBER),
    _o("--image-max-tokens", K.NUMBER),
    _o("--mtmd-batch-max-tokens", K.NUMBER),
    _o("--video-fps", K.NUMBER),
    _o("--video-timestamp-interval", K.NUMBER),
    _o("--tags", K.TEXT),
    _o("--embd-normalize", K.NUMBER),
    _o("--sse-ping-interval", K.NUMBER),
    _o("--media-path", K.PATH),
    _o("--reasoning", K.CHOICE, "-rea", choices=(*SWITCH_WORDS, "-1", "auto")),
    _o("--reasoning-effort", K.TEXT),
    _o("--reasoning-budget-message", K.TEXT),
    _o("--sleep-idle-seconds", K.NUMBER),
    _o("--log-prompts-dir", K.PATH),
)

_NGRAM_KNOBS = (
    "mod-n-min", "mod-n-max", "mod-n-match", "simple-size-n", "simple-size-m", "simple-min-hits", "map-k-size-n",
    "map-k-size-m", "map-k-min-hits", "map-k4v-size-n", "map-k4v-size-m", "map-k4v-min-hits", "size-n", "size-m",
    "min-hits",
)  # fmt: skip
"""The `--spec-ngram-*` sizes and hit counts (the last three are older spellings the source lists as removed)."""

_SPECULATIVE = (
    # A comma-separated list (none, draft-simple, draft-eagle3, draft-mtp, draft-dflash, ngram-mod, ...); llama.cpp
    # appends each use to the list of types, so `--spec-type draft-mtp --spec-type ngram-mod` asks for both.
    _o("--spec-type", K.WORD, repeatable=True),
    _o("--spec-draft-n-max", K.NUMBER),
    _o("--spec-draft-n-min", K.NUMBER),
    _o("--draft-p-split", K.NUMBER, "--spec-draft-p-split"),
    _o("--spec-draft-sampling", K.CHOICE, choices=("greedy", "probabilistic")),
    _o("--cpu-mask-draft", K.TEXT, "-Cd", "--spec-draft-cpu-mask"),
    _o("--cpu-range-draft", K.TEXT, "-Crd", "--spec-draft-cpu-range"),
    _o("--cpu-strict-draft", K.NUMBER, "--spec-draft-cpu-strict"),
    _o("--prio-draft", K.NUMBER, "--spec-draft-prio"),
    _o("--poll-draft", K.NUMBER, "--spec-draft-poll"),
    _o("--cpu-mask-batch-draft", K.TEXT, "-Cbd", "--spec-draft-cpu-mask-batch"),
    _o("--cpu-strict-batch-draft", K.NUMBER, "--spec-draft-cpu-strict-batch"),
    _o("--prio-batch-draft", K.NUMBER, "--spec-draft-prio-batch"),
    _o("--poll-batch-draft", K.NUMBER, "--spec-draft-poll-batch"),
    *(_o(f"--spec-ngram-{name}", K.NUMBER) for name in _NGRAM_KNOBS),
)

_REFUSED = tuple(
    _o(name, K.REFUSED, *aliases, nargs=nargs)
    for name, aliases, nargs in (
        ("--cache-list", ("-cl",), 0),
        ("--rpc", (), None),
        ("--docker-repo", ("-dr",), None),
        ("--video-ffmpeg-dir", (), None),
        ("--reuse-port", (), 0),
        ("--cors-origins", (), None),
        ("--cors-methods", (), None),
        ("--cors-headers", (), None),
        ("--cors-credentials", (), 0),
        ("--no-cors-credentials", (), 0),
        ("--ui-mcp-proxy", ("--webui-mcp-proxy",), 0),
        ("--tools", (), None),
        ("--tools-runtime", (), None),
        ("--mcp-servers-config", (), None),
        ("--mcp-servers-json", (), None),
        ("--agent", ("-ag",), 0),
        ("--models-dir", (), None),
        ("--models-preset", (), None),
        ("--spec-synth-len", (), None),
        ("--spec-synth-rates", (), None),
        ("--embd-gemma-default", (), 0),
        ("--fim-qwen-30b-default", (), 0),
        ("--gpt-oss-20b-default", (), 0),
        ("--gpt-oss-120b-default", (), 0),
        ("--vision-gemma-4b-default", (), 0),
        ("--vision-gemma-12b-default", (), 0),
    )
)
"""Newer options the farm refuses; the reasons are llamacpp.REFUSED's."""

NEWER = (*_SWITCHES, *_MEMORY_AND_PLACEMENT, *_SERVING, *_SPECULATIVE, *_REFUSED)
"""Options the dump lacks."""
