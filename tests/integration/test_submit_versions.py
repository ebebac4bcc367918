"""Submit judges a recipe's command against each engine version the farm's workers of its engine and hardware
run (their rows carry what they read at start), says which, and refuses only when no running version accepts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines.admission import judge_for_submit
from farm.errors import ArgumentPolicyError
from farm.recipes.parse import load_recipe
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import running_versions, submit

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "jobs" / "tiny-llama-cpu.toml"

NEW_IN_0_33 = "--monokernel"
"""A vLLM option of 0.33.0's parser that 0.32.0's lacks."""


def test_no_worker_reported_judges_against_the_newest_spec() -> None:
    """With no version reported, the newest shipped spec judges, and says so."""
    recipe = load_sweep(SPEC).recipe
    judged = judge_for_submit(recipe)
    assert judged.judged_against == ("vllm 0.33.0",)
    assert judged.reported == ()


def test_each_running_version_judges_and_only_none_accepting_refuses() -> None:
    """An option new in 0.33.0: accepted where a worker runs 0.33.x (0.32.0's refusal is kept, named), refused
    naming 0.32.0 where only 0.32.0 runs; a plain command is judged by both."""
    recipe = load_sweep(SPEC).recipe
    newer = recipe.model_copy(update={"argv": (*recipe.argv, NEW_IN_0_33)})
    both = judge_for_submit(newer, versions=("0.32.0", "0.33.1"))
    assert both.judged_against == ("vllm 0.33.0",)
    assert both.reported == ("0.32.0", "0.33.1")
    assert set(both.refused) == {"0.32.0"}
    assert NEW_IN_0_33 in both.refused["0.32.0"]
    with pytest.raises(ArgumentPolicyError, match=r"no vllm version the farm's workers run accepts.*0\.32\.0"):
        judge_for_submit(newer, versions=("0.32.0",))
    plain = judge_for_submit(recipe, versions=("0.33.1", "0.32.0"))
    assert plain.judged_against == ("vllm 0.32.0", "vllm 0.33.0")


def test_submit_reads_the_versions_of_the_matching_workers(store: Store) -> None:
    """The workers' rows carry their engine versions: only those of the recipe's engine and hardware class count,
    and the submission says what judged it."""
    loaded = load_sweep(SPEC)
    klass = loaded.recipe.hardware_class
    store.register_worker("w-old", "h1", [klass], engine_versions={"vllm": "0.32.0"})
    store.register_worker("w-other-class", "h2", ["rtx-4090 x 1"], engine_versions={"vllm": "0.33.0"})
    store.register_worker("w-other-engine", "h3", [klass], engine_versions={"llama.cpp": "0.3.36"})
    assert running_versions(store, "vLLM", klass) == ("0.32.0",)
    submission = submit(store, loaded, broker_url=None)
    assert submission.judged_against == ("vllm 0.32.0",)
    assert submission.reported_versions == ("0.32.0",)
    (worker,) = [w for w in store.list_workers() if w.worker_id == "w-old"]
    assert worker.engine_versions == {"vllm": "0.32.0"}


def test_a_registry_recipe_judged_against_a_running_mlx() -> None:
    """A registry MLX recipe against a worker that runs mlx-lm 0.29: judged with 0.28's spec (nearest older)."""
    recipe = load_recipe(
        ROOT
        / "tests"
        / "fixtures"
        / "registry"
        / "pg-mlx-community-qwen3-5-122b-a10b-4bit-4bit-apple-m5-max-128gb-mlx-899213eefa.json"
    )
    judged = judge_for_submit(recipe, versions=("0.29.1",))
    assert judged.judged_against == ("mlx 0.28",)
    assert judged.refused == {}
