"""Dump every option SGLang's server accepts, from its own parser (`ServerArgs.add_cli_args`), as JSON for
farm.engines.sglang.spec (which judges only the options its allowlist names, and only those this dump has).

Run it with a python that can import the SGLang release (its wheel, `pip download --no-deps sglang==X`, unpacked on
PYTHONPATH beside torch is enough):

    PYTHONPATH=/tmp/sglang-wheel python deploy/gen_sglang_server_args.py \
        farm/engines/sglang/sglang_server_args_0.5.23.json

It imports only SGLang and the standard library, never the farm.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any


def dump() -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = [
        {
            "option_strings": action.option_strings,
            "nargs": action.nargs if isinstance(action.nargs, int | str) else None,
            "choices": [str(c) for c in action.choices] if action.choices else None,
            "action": type(action).__name__,
        }
        for action in parser._actions
        if action.option_strings
    ]
    return {"engine": "sglang", "version": metadata.version("sglang"), "options": options}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_JSON", file=sys.stderr)
        return 2
    Path(argv[1]).write_text(json.dumps(dump(), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
