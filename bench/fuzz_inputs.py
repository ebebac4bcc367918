"""Fuzz the farm's input parsers: mutated registry recipes and sweep specs through parse, check and store.

Each recipe is one of the real registry recipes in tests/fixtures/registry (and the seeds) with one random
mutation: a field replaced by a hostile value (deep nesting, a 5,000-digit integer, a lone surrogate, NUL,
infinity, a wrong type), a field dropped, the text cut short, bytes flipped, or the command's tokens shuffled,
duplicated or mixed with environment words and broken JSON. It then goes through what `farm submit` does:
parse (farm.recipes.parse), the submit policy (farm.engines.admission.check_recipe_for_submit) and the JSON the
store writes. Each spec is a shipped jobs/*.toml or a generated one, mutated alike, through parse, validation
and the context check against the seed's recipe.

Printed: how many were accepted, how many refused by each farm error, and every other exception by type (the
farm's promise is zero of those). Exit status 1 if any.

    uv run python bench/fuzz_inputs.py                    # 10,000 recipes and 10,000 specs, seed 0
    uv run python bench/fuzz_inputs.py --recipes 2000 --specs 0 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from farm.engines.admission import check_recipe_for_submit
from farm.errors import FarmError
from farm.recipes.parse import load_recipe, parse_recipe_bytes
from farm.recipes.spec import check_fits_context, parse_spec_text, validate_spec

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "tests" / "fixtures" / "registry").glob("*.json")) + sorted(
    (ROOT / "tests" / "fixtures").glob("00*.txt")
)
RECIPES = [path for path in RECIPES if path.name != "expected.json"]
SPECS = sorted((ROOT / "jobs").glob("*.toml"))


HUGE_INT = {digits: f"__huge_int_{digits}__" for digits in (40, 4301, 5000)}
"""Placeholders for integers Python will not even print (over 4,300 digits); `dumps` writes the digits."""


def hostile_value(rng: random.Random) -> Any:
    """One value a careless or hostile document might hold."""
    choice = rng.randrange(14)
    if choice == 0:
        nested: Any = 1
        for _ in range(rng.choice([10, 100, 2000, 20_000])):
            nested = [nested] if rng.random() < 0.5 else {"k": nested}
        return nested
    if choice == 1:
        return HUGE_INT[rng.choice([40, 4301, 5000])]
    if choice == 2:
        return "\ud800" + "x" * rng.randrange(5)
    if choice == 3:
        return "a\x00b"
    if choice == 4:
        return rng.choice([float("inf"), float("-inf"), float("nan"), 1e308, -0.0])
    if choice == 5:
        return rng.choice([None, True, False, 0, -1, 2**63 - 1, -(2**63), 1.5, "", " "])
    if choice == 6:
        return rng.choice([[], {}, [""], ["vllm"], ["vllm", "serve"], {"name": None}])
    if choice == 7:
        return "x" * rng.choice([10, 70_000, 300_000])
    if choice == 8:
        return ["A=1", "vllm", "serve", "m", "--max-model-len", rng.choice(["-1", "1e9", "9" * 50, "128k", "inf"])]
    if choice == 9:
        return rng.choice(["vLLM", "llama-cpp", "SGLANG", "tgi", "python", "ollama"])
    if choice == 10:
        return "# Remote endpoint: http://127.0.0.1:1"
    if choice == 11:
        return 'vllm serve m --speculative-config \'{"method": "x"\''
    if choice == 12:
        return ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "a/b", "--model", "c/d"]
    return rng.choice(["rtx-3090-24gb", "tpu", "../../etc", "cpu", "h200-141gb"])


def paths_of(value: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every key path in a document (not descending past depth 6)."""
    found = [prefix] if prefix else []
    if depth > 6:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value[:8]):
            found += paths_of(item, (*prefix, index), depth + 1)
    return found


def set_path(document: Any, path: tuple[Any, ...], value: Any, *, delete: bool = False) -> None:
    target = document
    for key in path[:-1]:
        target = target[key]
    if delete and isinstance(target, dict):
        del target[path[-1]]
    elif delete and isinstance(target, list):
        target.pop(path[-1])
    else:
        target[path[-1]] = value


def dumps(document: Any) -> str:
    """JSON with NaN/Infinity allowed (hostile documents hold them) and surrogates escaped."""
    try:
        text = json.dumps(document, allow_nan=True)
    except (RecursionError, ValueError):
        return "[" * 100_000  # json.dumps itself cannot write it: send the deep document as text
    for digits, placeholder in HUGE_INT.items():
        text = text.replace(f'"{placeholder}"', "9" * digits)
    return text


def text_mutation(text: str, rng: random.Random) -> str:
    choice = rng.randrange(5)
    if choice == 0:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        chars = list(text)
        for _ in range(rng.randrange(1, 20)):
            chars[rng.randrange(len(chars))] = chr(
                rng.choice([0, 0x7B, 0x5B, 0x22, 0xD800 - 1, 0x10FFFF, rng.randrange(32, 127)])
            )
        return "".join(chars)
    if choice == 2:
        at = rng.randrange(len(text) + 1)
        return text[:at] + "[" * rng.choice([100, 5000]) + text[at:]
    if choice == 3:
        at = rng.randrange(len(text) + 1)
        return text[:at] + "9" * rng.choice([50, 5000]) + text[at:]
    return text + text[: rng.randrange(len(text))]


IGNORED = frozenset({"facts", "capabilities", "speed_sweep_ids", "description", "status", "recipe_source"})
"""Top-level fields the parser does not read; most mutations go to the ones it does."""


def mutate_recipe(original: bytes, rng: random.Random) -> bytes:
    text = original.decode("utf-8")
    if rng.random() < 0.25 or not text.lstrip().startswith("{"):
        mutated = text_mutation(text, rng)
        return mutated.encode("utf-8", "surrogatepass")
    document = json.loads(text)
    for _ in range(rng.randrange(1, 4)):
        paths = paths_of(document)
        read = [path for path in paths if path[0] not in IGNORED] if rng.random() < 0.9 else paths
        path = rng.choice(read or paths)
        if rng.random() < 0.2:
            set_path(document, path, None, delete=True)
        else:
            set_path(document, path, hostile_value(rng))
    return dumps(document).encode("utf-8", "surrogatepass")


def run_recipe(data: bytes) -> str:
    """parse, check, store: 'accepted' or raises."""
    recipe = parse_recipe_bytes(data, "fuzz.json")
    check_recipe_for_submit(recipe)
    recipe.model_dump_json().encode("utf-8")
    json.dumps(recipe.model_dump(mode="json"), allow_nan=False).encode("utf-8")
    return "accepted"


GENERATED_SPEC = {
    "name": "fuzz",
    "recipe": "recipe.json",
    "plan": {
        "repeats": 3,
        "decode": {"short_output_tokens": 64, "long_output_tokens": 512},
        "prefill": {"prompt_tokens": [1024, 8192]},
        "short_ttft": {"prompt_tokens": 32},
        "concurrency": {"levels": [1, 2, 4], "prompt_tokens": 512, "output_tokens": 128},
    },
}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text)
    if isinstance(value, str):
        for digits, placeholder in HUGE_INT.items():
            if value == placeholder:
                return "9" * digits
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return '""'  # TOML has no null


def toml_text(document: dict[str, Any]) -> str:
    lines = [f"{json.dumps(str(key))} = {toml_value(value)}" for key, value in document.items()]
    return "\n".join(lines) + "\n"


def mutate_spec(texts: list[str], rng: random.Random) -> str:
    if rng.random() < 0.3:
        return text_mutation(rng.choice(texts), rng)
    document = json.loads(json.dumps(GENERATED_SPEC))
    for _ in range(rng.randrange(1, 4)):
        path = rng.choice(paths_of(document))
        value = hostile_value(rng)
        if rng.random() < 0.5:
            value = rng.choice(
                [0, -1, 1, 10**9, 2**63 - 1, float("inf"), float("nan"), 1e300, 7, 100, 1025, [1, 2**63 - 1]]
            )
        if rng.random() < 0.15:
            set_path(document, path, None, delete=True)
        else:
            set_path(document, path, value)
    try:
        return toml_text(document)
    except RecursionError:
        return "a = " + "[" * 50_000


def run_spec(text: str, recipe: Any) -> str:
    document = parse_spec_text(text, "fuzz.toml")
    spec = validate_spec(document, "fuzz.toml")
    check_fits_context(spec.plan, recipe, "fuzz.toml")
    json.dumps(spec.model_dump(mode="json"), allow_nan=False)
    return "accepted"


def tally(name: str, inputs: list[Any], run: Any) -> int:
    outcomes: collections.Counter[str] = collections.Counter()
    other: dict[str, str] = {}
    count = len(inputs)
    started = time.perf_counter()
    for item in inputs:
        try:
            outcomes[run(item)] += 1
        except FarmError as exc:
            outcomes[f"refused: {type(exc).__name__}"] += 1
        except Exception as exc:  # counting what escapes is the point of this script
            key = f"NOT A FARM ERROR: {type(exc).__name__}"
            outcomes[key] += 1
            other.setdefault(key, "".join(traceback.format_exception(exc)[-3:]))
    elapsed = time.perf_counter() - started
    print(f"{name}: {count} in {elapsed:.1f} s")
    for outcome, n in sorted(outcomes.items()):
        print(f"  {n:>6}  {outcome}")
    for key, where in other.items():
        print(f"  first {key}:\n{where}")
    escaped = sum(n for outcome, n in outcomes.items() if outcome.startswith("NOT A FARM ERROR"))
    print(f"  non-farm exceptions: {escaped}")
    return escaped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", type=int, default=10_000)
    parser.add_argument("--specs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.setrecursionlimit(1000)  # the default: the parsers must not need more
    rng = random.Random(args.seed)
    originals = [path.read_bytes() for path in RECIPES]
    accepted = []
    for data in originals:
        try:
            run_recipe(data)
        except FarmError:
            continue
        accepted.append(data)
    originals += accepted * 3  # mutate the recipes that pass more often: their checks run deepest
    spec_texts = [path.read_text(encoding="utf-8") for path in SPECS] + [toml_text(GENERATED_SPEC)]
    seed_recipe = load_recipe(ROOT / "tests" / "fixtures" / "001_5d0dc33ac7ff8823.txt")
    print(
        f"{len(RECIPES)} real recipes ({len(accepted)} accepted as they are) and {len(spec_texts)} specs to mutate, "
        f"seed {args.seed}"
    )
    recipes = [mutate_recipe(rng.choice(originals), rng) for _ in range(args.recipes)]
    specs = [mutate_spec(spec_texts, rng) for _ in range(args.specs)]
    escaped = tally("recipes", recipes, run_recipe)
    escaped += tally("specs", specs, lambda text: run_spec(text, seed_recipe))
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
