"""Acceptance of real local-ai-registry recipes: what `farm recipe check --summary` decides, over a directory.

Each `*.json` file under the directory is parsed (farm.recipes.parse.load_recipe) and put to the submit
policy (farm.engines.admission.check_recipe_for_submit), exactly as `farm recipe check` does. Printed: a table by
engine (accepted, refused by the policy, refused at parse), the totals, and the refusal reasons grouped with
ids and values taken out, so alike refusals count together. With --argv, each accepted recipe's canonical argv
(the command the worker would launch) is printed too, for reading by eye.

    uv run python bench/registry_acceptance.py /tmp/registry-sample
    uv run python bench/registry_acceptance.py tests/fixtures/registry --argv
    uv run python bench/registry_acceptance.py /tmp/registry-sample --json   # machine-readable

The sample itself is not part of the repository: fetch the registry's `data/registry/recipe/*.json` into a
directory first. Nothing is stored and nothing is launched.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from farm.engines.admission import check_recipe_for_submit, check_runnable
from farm.engines.argspec import CanonicalCommand
from farm.errors import FarmError, InputError
from farm.recipes.commands import ENGINE_ALIASES
from farm.recipes.limits import load_json, read_limited
from farm.recipes.parse import load_recipe


@dataclass(frozen=True)
class Outcome:
    """One file's verdict: status is 'ok', 'POLICY' (parses, the submit policy refuses) or 'FAIL' (does not parse)."""

    file: str
    status: str
    engine: str
    field: str | None
    detail: str
    argv: tuple[str, ...] = ()
    queues: str | None = None
    """For an accepted recipe: None when `farm submit` would queue it (a worker of this farm runs its engine and can
    declare its hardware id), else why submit refuses it (farm.engines.policy.check_runnable)."""


def check_file(path: Path) -> Outcome:
    """The verdict on one recipe file; never raises."""
    try:
        recipe = load_recipe(path)
    except InputError as exc:
        return Outcome(path.name, "FAIL", declared_engine(path), exc.field, exc.detail)
    except Exception as exc:  # a parser bug is itself a finding: report it, go on
        return Outcome(path.name, "FAIL", declared_engine(path), None, f"internal error ({type(exc).__name__}): {exc}")
    try:
        command = check_recipe_for_submit(recipe)
    except InputError as exc:
        return Outcome(path.name, "POLICY", recipe.engine.name, exc.field, exc.detail)
    except Exception as exc:
        detail = f"internal error ({type(exc).__name__}): {exc}"
        return Outcome(path.name, "POLICY", recipe.engine.name, None, detail)
    try:
        check_runnable(recipe)
        queues = None
    except InputError as exc:
        queues = f"{exc.field}: {exc.detail}"
    return Outcome(path.name, "ok", recipe.engine.name, None, "", canonical_argv(command), queues)


def canonical_argv(command: CanonicalCommand) -> tuple[str, ...]:
    """The judged command as the farm re-renders it: the engine's launcher, the model, every option in its
    canonical spelling; without `--host`/`--port`, which the worker always sets itself."""
    launcher = command.spec.prefixes[0] if command.spec.prefixes else ()
    model: tuple[str, ...] = ()
    if command.model is not None:
        spec = command.spec
        model = (
            (command.model,) if spec.positional_model or not spec.model_option else (spec.model_option, command.model)
        )
    return (*launcher, *model, *command.without("--host", "--port").render_options())


def declared_engine(path: Path) -> str:
    """The engine a refused recipe names, canonical where the farm knows the alias, or '-'."""
    try:
        document = load_json(read_limited(path, InputError).decode("utf-8"), InputError, str(path))
        data = document.get("data", document) if isinstance(document, dict) else {}
        engine = data.get("engine") if isinstance(data, dict) else None
        name = engine.get("name") if isinstance(engine, dict) else None
        return ENGINE_ALIASES.get(str(name).strip().lower(), str(name)) if name else "-"
    except (FarmError, ValueError, AttributeError):
        return "-"


def reason(outcome: Outcome) -> str:
    """A refusal without its particulars (ids, values, numbers), so alike refusals count together."""
    text = re.sub(r"'[^'\s]*'|\([^)]*\)", "…", outcome.detail)
    text = re.sub(r"\d+", "N", text)
    return f"{outcome.status} {outcome.field or '-'}: {text[:120]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory", type=Path, help="a directory of registry recipe JSON files")
    parser.add_argument("--argv", action="store_true", help="print each accepted recipe's canonical argv")
    parser.add_argument("--json", action="store_true", help="print every outcome as JSON instead of tables")
    args = parser.parse_args(argv)
    files = sorted(p for p in args.directory.glob("*.json") if p.name not in ("expected.json", "canonical.json"))
    if not files:
        print(f"no recipe files (*.json) under {args.directory}", file=sys.stderr)
        return 2
    outcomes = [check_file(path) for path in files]
    if args.json:
        json.dump([outcome.__dict__ for outcome in outcomes], sys.stdout, indent=1, default=list)
        print()
        return 0

    by_engine: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        by_engine.setdefault(outcome.engine, Counter())[outcome.status] += 1
        if outcome.status == "ok" and outcome.queues is None:
            by_engine[outcome.engine]["queued"] += 1
    print(f"{'engine':<14}{'ok':>5}{'queued':>8}{'policy':>8}{'fail':>6}{'total':>7}")
    for engine, counts in sorted(by_engine.items(), key=lambda item: -sum(item[1].values())):
        total = counts["ok"] + counts["POLICY"] + counts["FAIL"]
        print(f"{engine:<14}{counts['ok']:>5}{counts['queued']:>8}{counts['POLICY']:>8}{counts['FAIL']:>6}{total:>7}")
    accepted = sum(1 for outcome in outcomes if outcome.status == "ok")
    parsed = sum(1 for outcome in outcomes if outcome.status != "FAIL")
    queued = sum(1 for outcome in outcomes if outcome.status == "ok" and outcome.queues is None)
    print(f"{accepted} of {len(outcomes)} accepted; {parsed} of {len(outcomes)} parse; {queued} of {accepted} accepted")
    print("would queue at `farm submit` (with this farm's workers)")
    unqueued: Counter[str] = Counter()
    for outcome in outcomes:
        if outcome.queues is not None:
            field, _, detail = outcome.queues.partition(": ")
            unqueued[reason(Outcome("", "SUBMIT", "", field, detail))] += 1
    if unqueued:
        print("\naccepted, but `farm submit` would refuse them:")
        for text, count in unqueued.most_common():
            print(f"{count:>4}  {text}")
    reasons = Counter(reason(outcome) for outcome in outcomes if outcome.status != "ok")
    if reasons:
        print("\nrefusals, grouped:")
        for text, count in reasons.most_common():
            print(f"{count:>4}  {text}")
    if args.argv:
        print("\naccepted, with the canonical argv each would launch:")
        for outcome in outcomes:
            if outcome.status == "ok":
                print(f"{outcome.file}\n    {shlex.join(outcome.argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
