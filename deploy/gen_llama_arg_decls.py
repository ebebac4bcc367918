"""Read llama-server's option declarations from llama.cpp's own source (common/arg.cpp), as JSON for
farm.engines.reparse: which spellings exist, which turn an option off, and how many argv tokens each consumes.

llama.cpp declares each option as `add_opt(common_arg({spellings}, [{negative spellings},] [hints,] help,
handler))`; the handler's parameters decide how `common_params_parse_ex` reads it: none (a switch), `bool` (a
switch with `--no-` spellings), `int` or one string (the next token, whatever it is: llama.cpp has no `--opt=value`
form), or two strings (the next two tokens). An option's `.set_examples({...})` says which programs have it;
llama-server has the server's and the common ones, less its `.set_excludes`. Run it on the source the host builds
(the llama-cpp-python sdist vendors it):

    python3 deploy/gen_llama_arg_decls.py vendor/llama.cpp/common/arg.cpp \
        farm/engines/llamacpp/llama_server_decls_<release>.json VERSION

It imports only the standard library.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

_START = "add_opt(common_arg("
_STRINGS = re.compile(r'"((?:[^"\\]|\\.)*)"')
_LAMBDA = re.compile(r"\[[^\]]*\]\s*\(\s*common_params\s*&\s*\w*\s*((?:,[^)]*)?)\)")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one opened just before `start` (strings and chars skipped)."""
    depth = 1
    i = start
    while i < len(text):
        char = text[i]
        if char in "\"'":
            i += 1
            while text[i] != char:
                i += 2 if text[i] == "\\" else 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced parentheses from offset {start}")


def _braced(text: str) -> tuple[list[str], str] | None:
    """A leading `{"a", "b"}` list of strings, and the text after it."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    end = stripped.index("}")
    return _STRINGS.findall(stripped[1:end]), stripped[end + 1 :].lstrip().removeprefix(",")


def _handler(body: str) -> str:
    lambdas = _LAMBDA.findall(body)
    if not lambdas:
        raise ValueError(f"no handler in {body[:120]!r}")
    params = [p.strip() for p in lambdas[-1].split(",") if p.strip()]
    if not params:
        return "void"
    if len(params) == 2:
        return "str_str"
    if params[0].startswith("bool"):
        return "bool"
    if params[0].startswith("int"):
        return "int"
    return "string"


def _examples(chain: str, method: str) -> list[str] | None:
    match = re.search(rf"\.{method}\(\s*\{{([^}}]*)\}}", chain)
    return None if match is None else re.findall(r"LLAMA_EXAMPLE_\w+", match.group(1))


def declarations(source: str) -> list[dict[str, Any]]:
    source = re.sub(r"^\s*//.*$", "", source, flags=re.M)  # whole-line comments (none hold a declaration)
    source = re.sub(r"/\*[^*]*\*/", "", source)  # `/*params*/` in handler signatures
    out: list[dict[str, Any]] = []
    position = 0
    while (found := source.find(_START, position)) >= 0:
        body_start = found + len(_START)
        body_end = _closing(source, body_start)
        chain_end = _closing(source, body_end + 1) if source[body_end + 1 : body_end + 2] != ")" else body_end + 1
        body, chain = source[body_start:body_end], source[body_end + 1 : chain_end]
        position = body_end
        first = _braced(body)
        if first is None:
            raise ValueError(f"no spellings at offset {found}")
        spellings, rest = first
        second = _braced(rest)
        negatives = second[0] if second is not None else []
        examples = _examples(chain, "set_examples") or ["LLAMA_EXAMPLE_COMMON"]
        excludes = _examples(chain, "set_excludes") or []
        if "LLAMA_EXAMPLE_SERVER" in excludes:
            continue
        if "LLAMA_EXAMPLE_SERVER" not in examples and "LLAMA_EXAMPLE_COMMON" not in examples:
            continue
        handler = _handler(body)
        out.append(
            {
                "spellings": spellings,
                "negatives": negatives,
                "handler": handler,
                "values": {"void": 0, "bool": 0, "int": 1, "string": 1, "str_str": 2}[handler],
            }
        )
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(f"usage: {argv[0]} ARG_CPP OUT_JSON VERSION", file=sys.stderr)
        return 2
    decls = declarations(Path(argv[1]).read_text(encoding="utf-8"))
    document = {
        "engine": "llama.cpp",
        "version": argv[3],
        "generated_by": "deploy/gen_llama_arg_decls.py (common/arg.cpp)",
        "options": decls,
    }
    Path(argv[2]).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
