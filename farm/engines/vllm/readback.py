"""vLLM's own parser, to read a rendered command back (farm.engines.readback): argparse with the declarations
dumped from each release (vllm_serve_args_<version>.json), after FlexibleArgumentParser's rewriting."""

from __future__ import annotations

import re

from farm.engines.argspec import ArgSpec
from farm.engines.reparse import (
    ArgparseParser,
    Mirror,
    argparse_declarations,
    cached_parser,
    load_declarations,
    refuse,
    spec_declarations,
)

_DOTTED = re.compile(r"^-[^=]*\.")


def vllm_rewrite(args: list[str]) -> list[str]:
    """vLLM's FlexibleArgumentParser.parse_args (vllm/utils/argparse_utils.py, 0.32.0) before argparse sees the
    tokens: `--model` moved to the front, underscores in option names read as dashes, `-O<n>` as
    `--optimization-level`. A token it would read as a dotted JSON key, or `--help=`, is refused: the farm never
    renders one, so one in the argv is a value that escaped."""
    if any(re.match(r"^--model(=.+|$)", a) for a in args):
        index = next(i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a))
        if args[index] == "--model":
            tag, rest = (args[index + 1] if index + 1 < len(args) else ""), index + 2
        else:
            tag, rest = args[index].removeprefix("--model="), index + 1
        args = [tag, *args[:index], *args[rest:]]
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            raise refuse(arg, "vLLM would read it as --help")
        if _DOTTED.match(arg):
            raise refuse(arg, "vLLM would read it as a dotted JSON key")
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            head, dot, tail = key[2:].partition(".")
            out.append("--" + head.replace("_", "-") + dot + tail + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)
    return out


def read_back(spec: ArgSpec) -> Mirror:
    """vLLM's own parser for `spec` (its table line's `read_back`): the model is the positional argument."""
    return Mirror(vllm_parser(spec))


def vllm_parser(spec: ArgSpec) -> ArgparseParser:
    return cached_parser(spec, _vllm_parser)


def _vllm_parser(spec: ArgSpec) -> ArgparseParser:
    from farm.engines.vllm.spec import SERVE_ARGS_FILE, SERVE_ARGS_FILES

    if spec.source not in SERVE_ARGS_FILES.values():
        # A host's own list (profile serve_args_file), dumped from its vLLM's parser: its declarations are that
        # vLLM's, nargs and switches included.
        return ArgparseParser(
            spec_declarations(spec),
            source=f"{spec.source} (this host's vLLM {spec.version})",
            positional="model_tag",
            rewrite=vllm_rewrite,
            config_option="--config",
        )
    name = SERVE_ARGS_FILES.get(spec.version, SERVE_ARGS_FILE)  # the release's own parser
    data = load_declarations(__package__ or "", name)
    real = argparse_declarations(data)
    known = {s for d in real for s in (*d.strings, *d.negatives)}
    return ArgparseParser(
        [*real, *spec_declarations(spec, skip=known)],
        source=f"{name} (vLLM {data['vllm_version']}'s parser)",
        positional="model_tag",
        rewrite=vllm_rewrite,
        config_option="--config",
    )
