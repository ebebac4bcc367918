"""Dump every option `llama-server` accepts, from its own `--help`, as JSON for farm.engines.llamacpp.

llama.cpp's options are declared in C++ (common/arg.cpp) and printed by `--help` in one fixed layout: the option
strings and value placeholders, then the description, then `(env: LLAMA_ARG_...)` where an environment variable
sets the same option. Run it against the binary a host runs:

    python3 deploy/gen_llama_server_args.py "$(deploy/install-llama-server.sh | head -1)" \
        farm/engines/llamacpp/llama_server_args.json

For each option: its option strings, the number of values it takes (from the placeholders), its choices (a
`{a,b,c}` placeholder) and the environment variable that also sets it. It imports only the standard library.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

_OPTION_LINE = re.compile(r"^--?[A-Za-z]")
_ENV = re.compile(r"\(env: (LLAMA_ARG_\w+)\)")
_CHOICES = re.compile(r"^\{([^{}]+)\}$")


def _placeholders(text: str) -> list[str]:
    """Value placeholders, split on spaces outside <...> (`<tensor name pattern>=<buffer type>` is one)."""
    words: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        if char == " " and depth == 0:
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if current:
        words.append(current)
    return words


def parse_help(text: str) -> list[dict[str, Any]]:
    options: list[dict[str, Any]] = []
    for line in text.splitlines():
        if options and not _OPTION_LINE.match(line):
            if env := _ENV.search(line):
                options[-1]["env"] = env.group(1)
            continue
        if not _OPTION_LINE.match(line):
            continue
        head = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.strip()), maxsplit=1)[0]
        strings: list[str] = []
        values: list[str] = []
        for item in head.split(", "):
            item = item.strip()
            flag, _, rest = item.partition(" ")
            strings.append(flag.rstrip(","))
            if rest:
                values = _placeholders(rest.strip())
        choices = None
        if len(values) == 1 and (match := _CHOICES.match(values[0])):
            choices = sorted(match.group(1).split(","))
        options.append(
            {
                "option_strings": strings,
                "nargs": len(values) if len(values) != 1 else None,
                "placeholders": values,
                "choices": choices,
            }
        )
        if env := _ENV.search(line):
            options[-1]["env"] = env.group(1)
    return options


def dump(binary: str) -> dict[str, Any]:
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=False, timeout=60)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False, timeout=60)
    found = re.search(r"version: (\S+ \(\w+\))", version.stdout + version.stderr)
    return {
        "engine": "llama.cpp",
        "version": found.group(1) if found else "unknown",
        "generated_by": "deploy/gen_llama_server_args.py",
        "options": parse_help(help_text.stdout + help_text.stderr),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} LLAMA_SERVER OUT_JSON", file=sys.stderr)
        return 2
    Path(argv[2]).write_text(json.dumps(dump(argv[1]), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
