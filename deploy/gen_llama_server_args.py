"""Dump every option `llama-server` accepts, from its own `--help`, as JSON for farm.engines.llamacpp.

llama.cpp's options are declared in C++ (common/arg.cpp) and printed by `--help` in one fixed layout: the option
strings and value placeholders, then the description, then `(env: LLAMA_ARG_...)` where an environment variable
sets the same option. Run it against the binary a host runs:

    python3 deploy/gen_llama_server_args.py "$(deploy/install-llama-server.sh | head -1)" \
        farm/engines/llamacpp/llama_server_args_0.3.36.json 0.3.36

RELEASE (optional) is the llama-cpp-python release whose vendored llama.cpp was built: the version key a worker
profile names (`[engine.llamacpp] version`); the dump's `version` is the build's commit.

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
_WORDS = re.compile(r"^\[([a-z]+(?:\|[a-z]+)+)\]$")
"""`[on|off|auto]`: a value that is one of these words (llama.cpp reads on/off/auto and their synonyms)."""


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
    owner = -1  # the option a continuation line's `(env: ...)` belongs to: a line's first
    for line in text.splitlines():
        if options and not _OPTION_LINE.match(line):
            if env := _ENV.search(line):
                options[owner]["env"] = env.group(1)
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
        elif len(values) == 1 and (match := _WORDS.match(values[0])):
            choices = sorted(match.group(1).split("|"))
        positive, negative = split_negative(strings)
        owner = len(options)
        entry: dict[str, Any] = {
            "option_strings": positive,
            "nargs": len(values) if len(values) != 1 else None,
            "placeholders": values,
            "choices": choices,
        }
        if negative:
            entry["negatives"] = negative
        options.append(entry)
        if env := _ENV.search(line):
            options[owner]["env"] = env.group(1)
    return options


def split_negative(strings: list[str]) -> tuple[list[str], list[str]]:
    """A switch and its negation on one line (`-kvo, --kv-offload, -nkvo, --no-kv-offload`): its spellings and
    the ones that turn it off (`negatives` in the dump, llama.cpp's args_neg). The negation starts at the first
    `--no-...` spelling, or at a short `-n...` spelling that a `--no-...` one follows; a line of negations alone
    (`--no-host`) is a switch of its own."""
    for i, spelling in enumerate(strings):
        later_long_negation = any(s.startswith("--no-") for s in strings[i:])
        if spelling.startswith("--no-") or (
            spelling.startswith("-n") and not spelling.startswith("--") and later_long_negation
        ):
            if i == 0:
                return strings, []
            return strings[:i], strings[i:]
    return strings, []


def server_version(text: str) -> str:
    """The build `--version` prints: `version: 4227 (4227c9b)` from a git checkout, `version: 0.5.0-dev (build 1,
    commit 0c1e570)` from an sdist's vendored sources; the commit is what names the build in both."""
    if found := re.search(r"version: \S+ \((?:build \d+, )?(?:commit )?([0-9a-f]{7,40})\)", text):
        return found.group(1)
    if found := re.search(r"version: (\S+ \([^)]*\))", text):
        return found.group(1)
    return "unknown"


def dump(binary: str, release: str | None = None) -> dict[str, Any]:
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=False, timeout=60)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False, timeout=60)
    data: dict[str, Any] = {
        "engine": "llama.cpp",
        "version": server_version(version.stdout + version.stderr),
        "generated_by": "deploy/gen_llama_server_args.py",
        "options": parse_help(help_text.stdout + help_text.stderr),
    }
    if release:
        data["release"] = release
    return data


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(f"usage: {argv[0]} LLAMA_SERVER OUT_JSON [RELEASE]", file=sys.stderr)
        return 2
    data = dump(argv[1], argv[3] if len(argv) == 4 else None)
    Path(argv[2]).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
