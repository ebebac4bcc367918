"""llama.cpp's `llama-server` argument spec, per release: `llama_server_args_<release>.json`, dumped from the
server's own `--help` by deploy/gen_llama_server_args.py (llama.cpp declares its options in C++, common/arg.cpp)
for the llama.cpp vendored in that llama-cpp-python release (`SPEC_FILES`; the newest, `DEFAULT_RELEASE`, is what
the farm's workers run unless their profile says otherwise). The 0.3.16 dump predates options recipes use, so the
newer options of farm.engines.llamacpp.supplement are merged into it (`with_supplement`); a command written for an
older server is rewritten into the spellings of a newer one (farm.engines.llamacpp.spellings: `-fa 1` is
`--flash-attn on`). llama.cpp's parser takes no abbreviations and reads dashes literally; every option except a
few list-valued ones is single-valued (it would keep the last). Also: llama-bench's options as llama-server's,
and which shipped release a host's build is (`release_of_build`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from farm.engines.argspec import ArgSpec, OptionSpec, ValueKind
from farm.engines.llamacpp import supplement as llamacpp_supplement
from farm.engines.llamacpp.spellings import WORD_VALUES, current_spellings_for
from farm.errors import ArgumentPolicyError

SPEC_FILES: Mapping[str, str] = {
    "0.3.16": "llama_server_args_0.3.16.json",
    "0.3.36": "llama_server_args_0.3.36.json",
}
"""The shipped dumps, by the llama-cpp-python release whose vendored llama.cpp was built (install-llama-server.sh)."""

DEFAULT_RELEASE = "0.3.36"
"""The release the farm's workers run (deploy/install-llama-server.sh's default): what submit judges against."""

ARGS_FILE = SPEC_FILES[DEFAULT_RELEASE]

PREFIXES = (("llama-server",), ("llama.cpp/llama-server",), ("./llama-server",), ("build/bin/llama-server",))
"""How a llama.cpp recipe's command may start."""

_CORS = "CORS settings let web pages reach the API; the worker's engine serves the farm alone"
_TOOLS = "built-in agent tools read and write files and run commands on the host"
_PRESET = "loads a preset model from the internet instead of the recipe's"
_PRESETS = (
    "--embd-bge-small-en-default", "--embd-e5-small-en-default", "--embd-gte-small-default", "--embd-gemma-default",
    "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default", "--fim-qwen-7b-spec",
    "--fim-qwen-14b-spec", "--fim-qwen-30b-default", "--gpt-oss-20b-default", "--gpt-oss-120b-default",
    "--vision-gemma-4b-default", "--vision-gemma-12b-default",
)  # fmt: skip
"""Options that set `--hf-repo` (and a draft) to a model of llama.cpp's choosing, downloaded over the host's."""

REFUSED: Mapping[str, str] = {
    "--api-key": "secrets never go in argv (they would be stored and logged)",
    "--api-key-file": "the worker measures an open loopback API",
    "--ssl-key-file": "the worker speaks plain HTTP on loopback",
    "--ssl-cert-file": "the worker speaks plain HTTP on loopback",
    "--hf-token": "a token in argv; HF_TOKEN comes from the worker's own environment",
    "--model-url": "downloads a model from any URL",
    "--mmproj-url": "downloads a projector from any URL",
    "--rpc": "offloads to RPC servers beyond the worker's host",
    "--api-prefix": "the worker reaches the API at its standard paths",
    "--path": "serves static files from a directory of the host",
    "--help": "prints and exits; serves nothing",
    "--version": "prints and exits; serves nothing",
    "--completion-bash": "prints and exits; serves nothing",
    "--list-devices": "prints and exits; serves nothing",
    "--cache-list": "prints and exits; serves nothing",
    "--docker-repo": "downloads a model from Docker Hub; the host maps the model",
    "--video-ffmpeg-dir": "runs the ffmpeg found in a directory the recipe names",
    "--reuse-port": "the worker's port is the engine's alone",
    "--cors-origins": _CORS,
    "--cors-methods": _CORS,
    "--cors-headers": _CORS,
    "--cors-credentials": _CORS,
    "--no-cors-credentials": _CORS,
    "--ui-mcp-proxy": "proxies the web UI to MCP servers beyond the worker's host",
    "--tools": _TOOLS,
    "--tools-runtime": _TOOLS,
    "--agent": _TOOLS,
    "--mcp-servers-config": "spawns the MCP server commands a file names",
    "--mcp-servers-json": "spawns the MCP server commands it names",
    "--models-dir": "router mode serves other models than the recipe's",
    "--models-preset": "router mode serves other models, with arguments from a file past every check",
    "--spec-synth-len": "synthetic acceptance fakes speculative decoding's results",
    "--spec-synth-rates": "synthetic acceptance fakes speculative decoding's results",
    **{preset: _PRESET for preset in _PRESETS},
}

KINDS: Mapping[str, ValueKind] = {
    "--host": ValueKind.LISTEN,
    "--port": ValueKind.LISTEN,
    "--model": ValueKind.REPO,
    "--gpu-layers": ValueKind.INT_OR_AUTO,  # newer builds take `auto` (their default) or `all` as well as a count
    "--gpu-layers-draft": ValueKind.INT_OR_AUTO,
    "--model-draft": ValueKind.REPO,  # like --model: a file name the host maps, or a path under its roots
    "--model-vocoder": ValueKind.PATH,
    "--lora": ValueKind.PATH,
    "--lora-scaled": ValueKind.PATH,
    "--control-vector": ValueKind.PATH,
    "--control-vector-scaled": ValueKind.PATH,
    "--grammar-file": ValueKind.PATH,
    "--json-schema-file": ValueKind.PATH,
    "--mmproj": ValueKind.PATH,
    "--chat-template-file": ValueKind.PATH,
    "--log-file": ValueKind.OUTPUT,
    "--slot-save-path": ValueKind.OUTPUT,
    "--lookup-cache-static": ValueKind.PATH,
    "--lookup-cache-dynamic": ValueKind.OUTPUT,
    "--log-prompts-dir": ValueKind.OUTPUT,
    "--hf-repo": ValueKind.REPO,
    "--hf-repo-draft": ValueKind.REPO,
    "--hf-repo-v": ValueKind.REPO,
    "--hf-file": ValueKind.REPO_FILE,
    "--hf-file-v": ValueKind.REPO_FILE,
    "--chat-template-kwargs": ValueKind.JSON,
    "--json-schema": ValueKind.JSON,
    **{name: ValueKind.REFUSED for name in REFUSED},
}

WRITES: Mapping[str, str] = {
    "--log-file": "the engine's log; the worker keeps it (engine.log, an artifact of the run)",
    "--slot-save-path": "saves the slots' KV caches into the directory",
    "--lookup-cache-dynamic": "updates its lookup cache file as it generates",
    "--log-prompts-dir": "writes every prompt into the directory",
}
"""llama-server options that write files (kind OUTPUT), from common/arg.cpp; every other path option reads (the
model and draft, --lora, --control-vector, --mmproj, --grammar-file, --chat-template-file,
--lookup-cache-static)."""

SWITCH_VALUES: Mapping[str, bool | None] = {
    "on": True,
    "1": True,
    "true": True,
    "enabled": True,
    "off": False,
    "0": False,
    "false": False,
    "disabled": False,
    "auto": None,
}
"""Newer llama-server versions take `-fa on|off|auto` where older ones read `-fa` as a switch: on a spec whose
option is a switch, on sets it, off leaves it off, auto leaves the server's default."""

REPEATABLE = frozenset(
    {
        "--lora",
        "--lora-scaled",
        "--control-vector",
        "--control-vector-scaled",
        "--override-kv",
        "--override-tensor",
        "--reverse-prompt",
        "--spec-replace",
        "--dry-sequence-breaker",
        "--override-tensor-draft",
        "--spec-type",  # common/arg.cpp appends each use to the list of types (and skips the repeat warning)
    }
)
"""Options llama.cpp collects into a list; every other one keeps only its last value, so a repeat is refused."""

MODEL_OPTIONS = ("--model", "--hf-repo", "--hf-file")
"""What names the main model; replaced on a worker by the host's own file."""

REFUSED_ENV_PREFIXES = ("LLAMA_ARG_",)
"""llama-server reads these as options: a recipe's environment may not set them (they would pass unjudged)."""


BENCH_TO_SERVER: Mapping[str, str] = {
    "-m": "--model",
    "--model": "--model",
    "-hf": "--hf-repo",  # llama-bench downloads a repository's file as llama-server does (recorded runs use it)
    "--hf-repo": "--hf-repo",
    "-ngl": "--n-gpu-layers",
    "--n-gpu-layers": "--n-gpu-layers",
    "-ncmoe": "--n-cpu-moe",
    "--n-cpu-moe": "--n-cpu-moe",
    "-sm": "--split-mode",
    "--split-mode": "--split-mode",
    "-mg": "--main-gpu",
    "--main-gpu": "--main-gpu",
    "-ts": "--tensor-split",
    "--tensor-split": "--tensor-split",
    "-ctk": "--cache-type-k",
    "--cache-type-k": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "--cache-type-v": "--cache-type-v",
    "-t": "--threads",
    "--threads": "--threads",
    "-b": "--batch-size",
    "--batch-size": "--batch-size",
    "-ub": "--ubatch-size",
    "--ubatch-size": "--ubatch-size",
    "-ot": "--override-tensor",
    "--override-tensor": "--override-tensor",
    "-dev": "--device",
    "--device": "--device",
    "-fitt": "--fit-target",
    "--fit-target": "--fit-target",
    "-fitc": "--fit-ctx",
    "--fit-ctx": "--fit-ctx",
}
"""llama-bench options that configure the model and its placement, as llama-server spells them
(tools/llama-bench/llama-bench.cpp and common/arg.cpp)."""

BENCH_SLASH_LISTS = frozenset({"-ts", "--tensor-split", "-dev", "--device"})
"""llama-bench options whose one value is a list written with `/` (a `,` separates configurations), where
llama-server writes the list with `,`."""

_FA_ON, _FA_OFF = ("--flash-attn", "on"), ("--flash-attn", "off")
BENCH_SWITCHES: Mapping[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "-fa": ("--flash-attn", _FA_ON, _FA_OFF),
    "--flash-attn": ("--flash-attn", _FA_ON, _FA_OFF),
    "-nkvo": ("--no-kv-offload", ("--no-kv-offload",), ()),
    "--no-kv-offload": ("--no-kv-offload", ("--no-kv-offload",), ()),
    "-mmp": ("--mmap", (), ("--no-mmap",)),
    "--mmap": ("--mmap", (), ("--no-mmap",)),
}
"""llama-bench's 0/1 switches: (what it sets, the server tokens when on, when off). Flash attention is said
either way, as current llama-server takes it (`-fa on|off`; its default is auto, llama-bench's is off); a spec of
an older server reads `--flash-attn on` as its switch (farm.engines.argspec.ArgSpec.switch_values)."""

BENCH_ONLY = frozenset(
    {
        "-p",
        "--n-prompt",
        "-n",
        "--n-gen",
        "-pg",
        "-d",
        "--n-depth",
        "-r",
        "--repetitions",
        "-o",
        "--output",
        "-oe",
        "--output-err",
        "--delay",
        "--prio",
        "--poll",
        "--cpu-strict",
        "-C",
        "--cpu-mask",
        "-embd",
        "--embeddings",
        "-nopo",
        "--no-op-offload",
        "--numa",
    }
)
"""llama-bench options that shape the benchmark, not the model: the farm's sweep plan replaces them."""
BENCH_FLAGS = frozenset({"-v", "--verbose", "--progress", "-h", "--help", "--no-warmup"})


BENCH_DEFAULTS: Mapping[str, str] = {"--n-gpu-layers": "99"}
"""llama-bench's defaults that llama-server does not share (tools/llama-bench/llama-bench.cpp
`cmd_params_defaults`: every layer on the GPU), made explicit when the bench command leaves them out."""


def llama_bench_to_server(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """A `llama-bench ...` command (what LocalMaxxing pages record for llama.cpp) as the `llama-server` command
    that loads the same model the same way, the benchmark-only tokens it dropped, and the llama-bench defaults it
    made explicit (both for provenance).

    A value list (`-ngl 28,99`: llama-bench runs each) is refused: the server runs one configuration. A `-m`
    without a value (pages that hid the path) is dropped: the model then comes from the recipe's instance."""
    tokens = list(argv)
    if not tokens or not re.fullmatch(r"(?:.*[/\\])?llama-bench(?:\.exe)?", tokens[0], flags=re.IGNORECASE):
        raise ArgumentPolicyError(f"not a llama-bench command: {' '.join(tokens[:2])!r}", field="argv")
    out: list[str] = ["llama-server"]
    dropped: list[str] = []
    i = 1
    while i < len(tokens):
        token = tokens[i]
        i += 1
        name, eq, inline = token.partition("=")
        value: str | None = inline if eq else None
        takes_value = name in BENCH_TO_SERVER or name in BENCH_SWITCHES or name in BENCH_ONLY
        if takes_value and value is None and i < len(tokens) and not tokens[i].startswith("-"):
            value = tokens[i]
            i += 1
        if name in BENCH_ONLY or name in BENCH_FLAGS:
            dropped += [token] if eq or value is None else [token, value]
            continue
        if not takes_value:
            raise ArgumentPolicyError(f"{token!r}: not a llama-bench option the farm can translate", field="argv")
        if value is None:
            if name in ("-m", "--model"):
                dropped.append(token)
                continue
            raise ArgumentPolicyError(f"{token!r}: needs a value", field="argv")
        if "," in value and name not in ("-ot", "--override-tensor"):
            raise ArgumentPolicyError(
                f"{token} {value}: llama-bench runs each of several values; the server runs one", field="argv"
            )
        if name in BENCH_SLASH_LISTS:
            value = value.replace("/", ",")  # one configuration's list: llama-bench `1/1/1`, llama-server `1,1,1`
        if name in BENCH_SWITCHES:
            _, when_on, when_off = BENCH_SWITCHES[name]
            on = value.lower() in ("1", "on", "true", "yes")
            if not on and value.lower() not in ("0", "off", "false", "no"):
                raise ArgumentPolicyError(f"{token} {value}: expected 0/1 or on/off", field="argv")
            out += when_on if on else when_off
            continue
        out += [BENCH_TO_SERVER[name], value]
    defaults: list[str] = []
    for option, value in BENCH_DEFAULTS.items():
        if option not in out:
            defaults += [option, value]
    return (*out, *defaults), tuple(dropped), tuple(defaults)


CLI_ONLY_VALUES = frozenset(
    {"-p", "--prompt", "-f", "--file", "-sys", "--system-prompt", "-sysf", "--system-prompt-file", "--in-prefix",
     "--in-suffix", "-r", "--reverse-prompt", "-n", "--n-predict"}
)  # fmt: skip
"""llama-cli's options that take a value and say what to ask, not how to load or run the model (llama.cpp's
`tools/main` and `common/arg.cpp`, LLAMA_EXAMPLE_MAIN only): the sweep plan sends its own prompts. `-n` is the
client's answer length; given to llama-server it would cap every request of the sweep, so it is the client's."""
CLI_ONLY_SWITCHES = frozenset(
    {"-i", "--interactive", "-if", "--interactive-first", "-cnv", "--conversation", "-no-cnv", "--no-conversation",
     "-st", "--single-turn", "-mli", "--multiline-input", "--no-display-prompt", "--verbose-prompt", "--color",
     "-e", "--escape", "--no-escape"}
)  # fmt: skip
"""llama-cli's switches of the same kind: how the interactive client talks to its user."""


def llama_cli_to_server(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A `llama-cli ...` run as the `llama-server` command that loads the same model the same way, and the
    client-only tokens it dropped. llama-cli and llama-server read the same common options (model, context, GPU
    layers, flash attention, cache types, threads, batch sizes, sampling defaults); what only the client reads
    (its prompt, its conversation mode) is dropped, and everything else is kept for the server's spec to judge."""
    tokens = list(argv)
    if not tokens or not re.fullmatch(r"(?:.*[/\\])?llama-cli(?:\.exe)?", tokens[0], flags=re.IGNORECASE):
        raise ArgumentPolicyError(f"not a llama-cli command: {' '.join(tokens[:2])!r}", field="argv")
    out: list[str] = ["llama-server"]
    dropped: list[str] = []
    i = 1
    while i < len(tokens):
        token = tokens[i]
        name, eq, _ = token.partition("=")
        if name in CLI_ONLY_VALUES:
            width = 1 if eq or i + 1 >= len(tokens) else 2
            dropped += tokens[i : i + width]
            i += width
            continue
        if name in CLI_ONLY_SWITCHES:
            dropped.append(token)
            i += 1
            if name == "--color" and not eq and i < len(tokens) and tokens[i] in ("on", "off", "auto"):
                dropped.append(tokens[i])  # newer builds take `--color on|off|auto`
                i += 1
            continue
        out.append(token)
        i += 1
    return tuple(out), tuple(dropped)


def tool_to_server(argv: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """A recorded run of one of llama.cpp's tools (the table's `tools`) as llama-server's command: the command, the
    tool-only tokens dropped and the tool's defaults made explicit (farm.recipes reads these for provenance)."""
    if argv and re.fullmatch(r"(?:.*[/\\])?llama-cli(?:\.exe)?", argv[0], flags=re.IGNORECASE):
        server, dropped = llama_cli_to_server(argv)
        return server, dropped, ()
    return llama_bench_to_server(argv)


def _known(table: Mapping[str, Any] | frozenset[str], strings: Sequence[str]) -> str | None:
    """The spelling under which one of this module's tables lists an option (newer dumps spell the option first
    in its newer name, `--spec-draft-model` for `--model-draft`); None: not listed."""
    return next((s for s in strings if s in table), None)


def _kind(raw: Mapping[str, Any], strings: Sequence[str]) -> ValueKind:
    if (listed := _known(KINDS, strings)) is not None:
        return KINDS[listed]
    if raw["nargs"] == 0:
        return ValueKind.FLAG
    if raw.get("choices"):
        return ValueKind.CHOICE
    placeholder = (raw.get("placeholders") or [""])[0]
    if placeholder in ("N", "P", "SEED", "<0...100>", "<0|1>", "SIMILARITY", "SCALE"):
        return ValueKind.NUMBER
    return ValueKind.TEXT


_DECLARED: Mapping[str, OptionSpec] = {
    spelling: option for option in llamacpp_supplement.NEWER for spelling in (option.name, *option.aliases)
}
"""The supplement's options by every spelling: how a dump's option whose help names no kind is judged."""

LAYER_WORDS: Mapping[str, tuple[str, ...]] = {
    "--gpu-layers": ("auto", "all"),
    "--gpu-layers-draft": ("auto", "all"),
}
"""The words newer llama-server builds take for a layer count: "either an exact number, 'auto', or 'all'"."""


def spec_from_dump(data: Mapping[str, Any], source: str) -> ArgSpec:
    """A spec from a dump; its version is `RELEASE (commit)` where the dump names its release."""
    try:
        options: list[OptionSpec] = []
        spellings: dict[str, str] = {}
        word_options: list[str] = []
        for raw in data["options"]:
            strings = list(raw["option_strings"])
            longs = [s for s in strings if s.startswith("--")]
            name = (longs or strings)[0]
            spellings.update({s: name for s in strings})
            if raw.get("choices") and set(raw["choices"]) <= set(WORD_VALUES.values()) and not _known(KINDS, strings):
                word_options.append(name)
            layer_words = _known(LAYER_WORDS, strings)
            refused = _known(REFUSED, strings)
            writes = _known(WRITES, strings)
            kind, choices = _kind(raw, strings), tuple(raw["choices"]) if raw.get("choices") else None
            by_hand = _known(_DECLARED, strings)
            if by_hand and choices is None and not _known(KINDS, strings) and raw["nargs"] != 0:
                # The help says only "MODE" or "N": the supplement, read from common/arg.cpp, says what it is.
                kind, choices = _DECLARED[by_hand].kind, _DECLARED[by_hand].choices
            negatives = tuple(sorted(raw.get("negatives") or (), key=lambda n: not n.startswith("--")))  # long first
            if negatives and kind != ValueKind.FLAG:
                # A refused switch (`--agent`): its negation, which only turns it off, is a switch of its own.
                options.append(OptionSpec(name=negatives[0], aliases=negatives[1:], kind=ValueKind.FLAG, nargs=0))
                spellings.update({n: negatives[0] for n in negatives})
                negatives = ()
            if negatives:  # a switch with its negation (0.3.36's `--kv-offload` / `--no-kv-offload`)
                kind = ValueKind.BOOL
                spellings.update({n: name for n in negatives})
            options.append(
                OptionSpec(
                    name=name,
                    aliases=tuple(s for s in (*strings, *negatives) if s != name),
                    negations=negatives,
                    kind=kind,
                    nargs=raw["nargs"],
                    choices=choices or (LAYER_WORDS[layer_words] if layer_words else None),
                    repeatable=_known(REPEATABLE, strings) is not None,
                    reason=REFUSED[refused] if refused else (WRITES[writes] if writes else ""),
                )
            )
        release = data.get("release")
        return ArgSpec(
            engine="llama.cpp",
            version=f"{release} ({data['version']})" if release else str(data["version"]),
            source=source,
            options=tuple(options),
            prefixes=PREFIXES,
            underscores=False,
            abbreviations=False,
            inline_values=False,
            switch_values=SWITCH_VALUES,
            current_spellings=current_spellings_for(spellings, word_options),
        )
    except (KeyError, TypeError) as exc:
        raise ArgumentPolicyError(f"not a llama-server argument list: {exc!r}", source=source) from exc


def load_llamacpp_spec(path: Path) -> ArgSpec:
    """A spec from a list made by deploy/gen_llama_server_args.py on a host (its own llama-server)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArgumentPolicyError(f"cannot read the argument list: {exc}", source=path) from exc
    return spec_from_dump(data, str(path))


def with_supplement(spec: ArgSpec) -> ArgSpec:
    """The spec with the newer llama-server options of farm.engines.llamacpp.supplement: newer spellings become
    aliases of the dump's options, options the dump lacks are added, judged by this module's tables first."""
    aliases = llamacpp_supplement.ALIASES
    options: list[OptionSpec] = []
    for option in spec.options:
        added = tuple(a for spelling in (option.name, *option.aliases) for a in aliases.get(spelling, ()))
        if added:
            option = replace(option, aliases=(*option.aliases, *added))
        newer = llamacpp_supplement.NEWER_CHOICES.get(option.name, ())
        if newer and option.choices is not None:
            option = replace(option, choices=(*option.choices, *(c for c in newer if c not in option.choices)))
        options.append(option)
    for option in llamacpp_supplement.NEWER:
        if any(spec.lookup(spelling) is not None for spelling in (option.name, *option.aliases)):
            continue  # the dump has it: its own entry stands
        kind = KINDS.get(option.name, option.kind)
        options.append(
            replace(option, kind=kind, reason=REFUSED.get(option.name, WRITES.get(option.name, option.reason)))
        )
    source = f"{spec.source} + llamacpp_supplement.py ({llamacpp_supplement.SOURCE_SHORT})"
    return replace(spec, options=tuple(options), source=source)


@cache
def shipped_llamacpp_spec(release: str = DEFAULT_RELEASE) -> ArgSpec:
    """The shipped dump of a release's llama-server; 0.3.16's (llama.cpp 4227c9b) with the newer options recipes
    use (llamacpp_supplement), which 0.3.36's has of its own."""
    if release not in SPEC_FILES:
        raise ArgumentPolicyError(f"no shipped llama-server spec for {release!r} (shipped: {', '.join(SPEC_FILES)})")
    name = SPEC_FILES[release]
    spec = spec_from_dump(json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8")), name)
    return with_supplement(spec) if release == "0.3.16" else spec


_BUILD = re.compile(r"version: \S+ \((?:build \d+, )?(?:commit )?([0-9a-f]{7,40})\)")


def release_of_build(executable: Sequence[str], *, timeout_s: float = 30.0) -> str | None:
    """Which shipped release the host's llama-server is, by the commit its `--version` prints; None: another
    build (or it did not answer)."""
    import subprocess

    try:
        done = subprocess.run(
            [*executable, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _BUILD.search(done.stdout + done.stderr)
    if found is None:
        return None
    for release in SPEC_FILES:
        commit = shipped_llamacpp_spec(release).version.rpartition("(")[2].rstrip(")")
        if commit and (found.group(1).startswith(commit) or commit.startswith(found.group(1))):
            return release
    return None
