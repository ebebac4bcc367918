"""What the registry refresh scripts (refresh-hardware.py, refresh-instances.py, refresh-assets.py) share: the
commit a local-ai-registry checkout is at, where its documents of one kind lie, and the write-or-check command line
of a snapshot keyed by id. A script run as `python deploy/NAME.py` has deploy/ on its path.

The source may be a git checkout of the registry, or a folder of documents copied from it one at a time (read
through a stored copy of the repository, where no checkout can be made): the documents themselves, as the registry
stores them, plus an optional `COMMITS` file naming the registry commit(s) they were read at, one a line. With
`--merge` the documents update the shipped snapshot (an entry the source has replaces the shipped one, the rest are
kept), so a partial copy adds to the snapshot without dropping what it did not read."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

COMMITS_FILE = "COMMITS"


def checkout_commit(checkout: Path) -> str | None:
    """The checkout's HEAD commit, or None when it is not a git checkout (a copied folder)."""
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def source_commits(source: Path) -> list[str | None]:
    """The registry commits a source was taken at: a checkout's HEAD, or the lines of a copied folder's COMMITS
    file ([None] when neither says)."""
    listed = source / COMMITS_FILE
    if listed.is_file():
        commits = [line.strip() for line in listed.read_text(encoding="utf-8").splitlines() if line.strip()]
        if commits:
            return list(dict.fromkeys(commits))
    return [checkout_commit(source)]


def documents_folder(source: Path, kind: str) -> Path:
    """Where a source's documents of one kind lie: `data/registry/KIND/` of a checkout, or the folder itself when
    it holds the copied documents."""
    nested = source / "data" / "registry" / kind
    return nested if nested.is_dir() else source


def merged(have: Mapping[str, object], built: Mapping[str, object], key: str) -> dict[str, object]:
    """The shipped snapshot `have` updated with `built`: its `key` entries replaced or added, the rest kept, the
    source commits of both listed."""
    old = have.get(key)
    new = built.get(key)
    if not isinstance(old, dict) or not isinstance(new, dict):
        raise SystemExit(f"cannot merge: the {key} of a snapshot is not a mapping")
    entries = {**old, **new}
    old_source, new_source = have.get("source"), built.get("source")
    commits: list[object] = []
    for source in (old_source, new_source):
        if isinstance(source, dict):
            commits.extend(commit for commit in source.get("commits", []) if commit is not None)
    snapshot = dict(built)
    if isinstance(new_source, dict):
        snapshot["source"] = {**new_source, "commits": list(dict.fromkeys(commits))}
    note = built.get("note")
    merge_note = "Merged over the shipped snapshot (--merge): the entries the source did not hold were kept."
    if isinstance(note, str) and merge_note not in note:
        snapshot["note"] = f"{note} {merge_note}"
    snapshot[key] = dict(sorted(entries.items()))
    return snapshot


def refresh_main(description: str, build: Callable[[Path], Mapping[str, object]], output: Path, key: str) -> int:
    """`SCRIPT SOURCE [--merge] [--check]`: write the snapshot `build` makes from a registry checkout (or a folder of
    copied documents) to `output`, or with --check say how its `key` mapping (id -> entry) differs from the shipped
    file (exit 1 when it does). --merge keeps the shipped entries the source lacks."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("checkout", type=Path, help="a local-ai-registry checkout, or a folder of its documents")
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing")
    parser.add_argument(
        "--merge", action="store_true", help="update the shipped snapshot: keep the entries the source lacks"
    )
    parser.add_argument("--output", type=Path, default=output, help=argparse.SUPPRESS)
    args = parser.parse_args()
    snapshot: Mapping[str, object] = build(args.checkout)
    if args.merge:
        snapshot = merged(json.loads(args.output.read_text(encoding="utf-8")), snapshot, key)
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
    before: dict[str, object] = {}
    if args.output.is_file():
        shipped = json.loads(args.output.read_text(encoding="utf-8")).get(key)
        before = shipped if isinstance(shipped, dict) else {}
    args.output.write_text(json.dumps(snapshot, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    added = len(want.keys() - before.keys())
    changed = sum(1 for name in want.keys() & before.keys() if want[name] != before[name])
    print(f"wrote {len(want)} {key} to {args.output} ({added} new, {changed} changed)")
    return 0
