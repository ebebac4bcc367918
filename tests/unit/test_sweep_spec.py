"""Sweep specs: the shipped jobs load with their plans, left-out sections are not measured, bad specs fail."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from farm.errors import RecipeError, SweepSpecError
from farm.recipes.spec import load_sweep, plan_hash
from farm.recipes.sweep import DecodePlan, PrefillPlan, PrefixCachePlan, SweepPlan

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "jobs"
SEED_SWEEP = JOBS / "deepseek-v4-flash-0731-tp2.toml"
DEMO_SWEEP = JOBS / "demo.toml"
REGISTRY = ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"
PAGE = ROOT / "examples" / "deepseek-v4-flash-0731-localmaxxing.txt"
TINY_RECIPE = """{"schema_version": "local-ai-registry/v1", "id": "tiny", "hardware_id": "cpu",
 "hardware_count": 1, "engine": {"name": "vllm"},
 "argv": ["vllm", "serve", "/models/tiny", "--max-model-len", "1024"]}"""


def _spec(tmp_path: Path, body: str, *, recipe: str = "recipe.json") -> Path:
    """A spec file in tmp_path whose recipe is the tiny CPU recipe beside it."""
    (tmp_path / "recipe.json").write_text(TINY_RECIPE, encoding="utf-8")
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "t"\nrecipe = "{recipe}"\n{body}', encoding="utf-8")
    return path


def test_seed_sweep_loads_the_seed_method() -> None:
    """The seed's sweep: 64 vs 896 on code/prose/math, 107,016-token prefill, short TTFT, prefix cache."""
    loaded = load_sweep(SEED_SWEEP)
    plan = loaded.spec.plan
    assert loaded.spec.name == "deepseek-v4-flash-0731-tp2"
    assert loaded.recipe.id == "deepseek-v4-flash-0731-fp8-e4m3-rtx-pro-6000-blackwell-96gb-vllm-tp2"
    assert loaded.recipe_path.resolve() == REGISTRY.resolve()
    assert (plan.repeats, plan.temperature, plan.thinking, plan.api) == (3, 0.0, False, "chat")
    assert plan.time_budget_s >= 3600
    assert plan.decode == DecodePlan(
        workloads=("code", "prose", "math"), short_output_tokens=64, long_output_tokens=896
    )
    assert plan.prefill == PrefillPlan(prompt_tokens=(107_016,), output_tokens=1)
    assert plan.short_ttft is not None
    assert plan.short_ttft.prompt_tokens == 32
    assert plan.prefix_cache == PrefixCachePlan(enabled=True)
    assert plan.concurrency is None


def test_demo_sweep_loads_the_small_plan() -> None:
    """The demo: the seed's recipe with a plan sized for the simulator on a small machine."""
    loaded = load_sweep(DEMO_SWEEP)
    plan = loaded.spec.plan
    assert loaded.recipe == load_sweep(SEED_SWEEP).recipe
    assert (plan.repeats, plan.time_budget_s, plan.request_timeout_s) == (3, 300.0, 60.0)
    assert plan.decode is not None
    assert (plan.decode.short_output_tokens, plan.decode.long_output_tokens) == (64, 512)
    assert plan.decode.workloads == ("code", "prose", "math")
    assert plan.prefill is not None
    assert plan.prefill.prompt_tokens == (8192, 32768)
    assert plan.short_ttft is not None
    assert plan.short_ttft.prompt_tokens == 32
    assert plan.prefix_cache == PrefixCachePlan(enabled=True)
    assert plan.concurrency is not None
    assert plan.concurrency.levels == (1, 4, 16)
    assert (plan.concurrency.prompt_tokens, plan.concurrency.output_tokens) == (256, 128)


def test_spec_hash_is_of_the_file_bytes() -> None:
    """spec_sha256 is the sha256 of the spec file as stored."""
    assert load_sweep(DEMO_SWEEP).spec_sha256 == hashlib.sha256(DEMO_SWEEP.read_bytes()).hexdigest()


def test_missing_sections_are_not_measured(tmp_path: Path) -> None:
    """Only the sections a spec writes are measured; an empty table measures with its defaults."""
    loaded = load_sweep(_spec(tmp_path, "[plan]\nrepeats = 2\n[plan.short_ttft]\n"))
    plan = loaded.spec.plan
    assert plan.short_ttft is not None
    assert plan.short_ttft.prompt_tokens == 32
    assert (plan.decode, plan.prefill, plan.prefix_cache, plan.concurrency) == (None, None, None, None)
    assert loaded.recipe.hardware_class == "cpu x 1"


def test_plan_model_defaults_measure_nothing() -> None:
    """SweepPlan() names no measurement; SweepPlan.seed() is the seed's whole method."""
    assert not SweepPlan().measures_anything
    assert not SweepPlan(prefill=None, prefix_cache=PrefixCachePlan(enabled=False)).measures_anything
    seed = SweepPlan.seed()
    assert seed.measures_anything
    assert seed.decode == DecodePlan()
    assert seed.prefill == PrefillPlan()
    assert seed.concurrency is None
    assert seed == load_sweep(SEED_SWEEP).spec.plan.model_copy(update={"time_budget_s": 3600.0})


def test_recipe_override(tmp_path: Path) -> None:
    """A recipe given on the command line replaces the spec's own."""
    loaded = load_sweep(SEED_SWEEP, recipe_override=PAGE)
    assert loaded.recipe_path == PAGE
    assert loaded.recipe.provenance.source_format == "localmaxxing-page"


def test_plan_hash() -> None:
    """Equal plans hash equal; a changed value changes the hash."""
    plan = load_sweep(DEMO_SWEEP).spec.plan
    same = SweepPlan.model_validate(plan.model_dump())
    assert plan_hash(plan) == plan_hash(same)
    assert len(plan_hash(plan)) == 64
    assert plan_hash(plan) != plan_hash(plan.model_copy(update={"repeats": 4}))


BAD_SPECS = [
    ("unknown top-level key", 'colour = "red"\n[plan.short_ttft]\n', "colour", "unknown key"),
    (
        "unknown key in a section",
        "[plan.decode]\nshort_output_tokens = 64\nlong_tokens = 512\n",
        "plan.decode.long_tokens",
        "allowed here: long_output_tokens, short_output_tokens, workloads",
    ),
    ("bad type", '[plan]\nrepeats = "three"\n[plan.short_ttft]\n', "plan.repeats", "valid integer"),
    (
        "long not after short",
        "[plan.decode]\nshort_output_tokens = 512\nlong_output_tokens = 512\n",
        "plan.decode.long_output_tokens",
        "must be greater than short_output_tokens (512)",
    ),
    (
        "unknown workload",
        '[plan.decode]\nworkloads = ["code", "poetry"]\n',
        "plan.decode.workloads[1]",
        "'code', 'prose' or 'math'",
    ),
    ("repeated workload", '[plan.decode]\nworkloads = ["code", "code"]\n', "plan.decode.workloads", "once"),
    ("zero concurrency", "[plan.concurrency]\nlevels = [0, 4]\n", "plan.concurrency.levels", "at least 1"),
    ("negative time budget", "[plan]\ntime_budget_s = -1\n[plan.short_ttft]\n", "plan.time_budget_s", "0"),
    (
        "prefix cache without prefill",
        "[plan.prefix_cache]\n",
        "plan.prefix_cache",
        "needs a [plan.prefill] section",
    ),
    ("disabled prefix cache alone", "[plan.prefix_cache]\nenabled = false\n", "plan", "measures nothing"),
    ("nothing measured", "[plan]\nrepeats = 3\n", "plan", "measures nothing"),
    (
        "prefill over context",
        "[plan.prefill]\nprompt_tokens = [512, 4096]\n",
        "plan.prefill.prompt_tokens[1]",
        "1024",
    ),
]


@pytest.mark.parametrize(("body", "field", "phrase"), [c[1:] for c in BAD_SPECS], ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_is_refused(tmp_path: Path, body: str, field: str, phrase: str) -> None:
    """A spec that does not validate raises SweepSpecError naming the spec file and the dotted field."""
    path = _spec(tmp_path, body)
    with pytest.raises(SweepSpecError) as caught:
        load_sweep(path)
    message = str(caught.value)
    assert caught.value.field == field
    assert message.startswith(f"{path}: field {field!r}: ")
    assert phrase in message


def test_missing_recipe_file(tmp_path: Path) -> None:
    """A spec whose recipe does not exist is refused, naming the spec, the field and the path looked at."""
    path = _spec(tmp_path, "[plan.short_ttft]\n", recipe="missing.json")
    with pytest.raises(SweepSpecError) as caught:
        load_sweep(path)
    assert caught.value.field == "recipe"
    assert str(caught.value).startswith(f"{path}: field 'recipe': ")
    assert str(tmp_path / "missing.json") in str(caught.value)


def test_missing_name(tmp_path: Path) -> None:
    """A spec without a name is refused at the field 'name'."""
    path = tmp_path / "sweep.toml"
    path.write_text('recipe = "r.json"\n[plan.short_ttft]\n', encoding="utf-8")
    with pytest.raises(SweepSpecError, match="missing") as caught:
        load_sweep(path)
    assert caught.value.field == "name"


def test_bad_toml_names_the_line(tmp_path: Path) -> None:
    """TOML that does not parse is refused with the file and the line."""
    path = _spec(tmp_path, "[plan\nrepeats = 3\n")
    with pytest.raises(SweepSpecError, match=r"not valid TOML: .*line 3") as caught:
        load_sweep(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_unreadable_spec(tmp_path: Path) -> None:
    """A spec path that does not exist is a SweepSpecError naming it."""
    path = tmp_path / "nowhere.toml"
    with pytest.raises(SweepSpecError, match="cannot read") as caught:
        load_sweep(path)
    assert caught.value.source == str(path)


def test_bad_recipe_behind_a_good_spec(tmp_path: Path) -> None:
    """A spec whose recipe is bad raises the recipe's error, which names the recipe file."""
    path = _spec(tmp_path, "[plan.short_ttft]\n")
    (tmp_path / "recipe.json").write_text('{"schema_version": "v2"}', encoding="utf-8")
    with pytest.raises(RecipeError) as caught:
        load_sweep(path)
    assert caught.value.field == "schema_version"
    assert str(caught.value).startswith(f"{tmp_path / 'recipe.json'}: ")
