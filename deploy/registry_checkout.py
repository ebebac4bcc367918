"""What the registry refresh scripts (refresh-hardware.py, refresh-instances.py, refresh-assets.py) share: the
commit a local-ai-registry checkout is at, and the write-or-check command line of a snapshot keyed by id. A script
run as `python deploy/NAME.py` has deploy/ on its path."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path


def checkout_commit(checkout: Path) -> str | None:
    """The checkout's HEAD commit, or None when it is not a git checkout (a copied folder)."""
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def refresh_main(description: str, build: Callable[[Path], Mapping[str, object]], output: Path, key: str) -> int:
    """`SCRIPT CHECKOUT [--check]`: write the snapshot `build` makes from a registry checkout to `output`, or with
    --check say how its `key` mapping (id -> entry) differs from the shipped file (exit 1 when it does)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("checkout", type=Path, help="a local-ai-registry checkout")
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing")
    parser.add_argument("--output", type=Path, default=output, help=argparse.SUPPRESS)
    args = parser.parse_args()
    snapshot = build(args.checkout)
    want = snapshot[key]
    assert isinstance(want, dict)
    if args.check:
        have = json.loads(args.output.read_text(encoding="utf-8"))[key]
        if have != want:
            new, gone = len(want.keys() - have.keys()), len(have.keys() - want.keys())
            changed = sum(1 for name in have.keys() & want.keys() if have[name] != want[name])
            print(f"out of date: {new} new, {gone} gone, {changed} changed")
            return 1
        print(f"up to date: {len(have)} {key}")
        return 0
    args.output.write_text(json.dumps(snapshot, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(want)} {key} to {args.output}")
    return 0
