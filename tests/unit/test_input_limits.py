"""Bad input never crashes the parsers (issue 11): size, depth, numbers and Unicode limits, whole pages only,
and bounded sweep specs whose requests fit the recipe's context. Property tests (Hypothesis) check that any
mutation of a real recipe or spec is either read or refused with the farm's own error."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.errors import InputError, RecipeError, SweepSpecError
from farm.recipes.parse import load_recipe, parse_localmaxxing_page, parse_registry
from farm.recipes.spec import check_fits_context, load_sweep, parse_spec_text, validate_spec
from farm.recipes.sweep import MAX_CONCURRENCY, MAX_OUTPUT_TOKENS, SweepPlan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEED_PAGE = (FIXTURES / "000_fb943dab8cb08842.txt").read_text(encoding="utf-8")
SEED_REGISTRY = (FIXTURES / "001_5d0dc33ac7ff8823.txt").read_text(encoding="utf-8")
TINY = {
    "schema_version": "local-ai-registry/v1",
    "id": "tiny",
    "hardware_id": "cpu",
    "hardware_count": 1,
    "engine": {"name": "vllm"},
    "argv": ["vllm", "serve", "/models/tiny", "--max_model_len=1k"],
}


def _spec(tmp_path: Path, body: str, recipe: dict[str, Any] | None = None) -> Path:
    (tmp_path / "recipe.json").write_text(json.dumps(recipe or TINY), encoding="utf-8")
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "t"\nrecipe = "recipe.json"\n{body}', encoding="utf-8")
    return path


# --- recipes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("[" * 50_000, "nested 50000 levels deep, more than the limit of 64"),
        ('{"a": ' + "9" * 5000 + "}", "an integer of 5000 digits, more than 30"),
        ('{"a": 1e999}', "out of range"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"id": "\\ud800"}', "lone surrogate"),
        ('{"id": "a\\u0000b"}', "NUL character"),
    ],
)
def test_hostile_json_is_a_recipe_error(text: str, phrase: str) -> None:
    """Deep nesting, huge integers, infinities, lone surrogates and NUL: the farm's error, not a crash."""
    with pytest.raises(RecipeError, match=phrase) as caught:
        parse_registry(text, "hostile.json")
    assert caught.value.source == "hostile.json"


def test_surrogate_error_names_the_field() -> None:
    """A lone surrogate deep in the document is refused naming its dotted field."""
    text = json.dumps({**TINY, "engine": {"name": "vllm", "version": "\ud800"}})
    with pytest.raises(RecipeError) as caught:
        parse_registry(text, "r.json")
    assert caught.value.field == "engine.version"


def test_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file over the limit (1 MB by default, FARM_MAX_INPUT_BYTES to change it) is refused unread."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps({**TINY, "notes": "x" * 2000}), encoding="utf-8")
    assert load_recipe(path).notes == "x" * 2000
    monkeypatch.setenv("FARM_MAX_INPUT_BYTES", "1000")
    with pytest.raises(RecipeError, match="larger than the 1,000-byte limit"):
        load_recipe(path)
    with pytest.raises(RecipeError, match="larger than the 10-byte limit"):
        load_recipe(path, max_bytes=10)


def _cuts(text: str) -> range:
    """Every cut point that loses content: each prefix shorter than the text without its trailing space."""
    return range(len(text.rstrip()))


def test_page_cut_anywhere_is_refused() -> None:
    """The seed page cut at any point is refused, never read as a shorter recipe (issue 11: 137 were)."""
    whole = parse_localmaxxing_page(SEED_PAGE, "page.txt")
    assert whole.model_id == "deepseek-ai/DeepSeek-V4-Flash-0731"
    accepted = []
    for cut in _cuts(SEED_PAGE):
        try:
            parse_localmaxxing_page(SEED_PAGE[:cut], "page.txt")
        except RecipeError:
            continue
        accepted.append(cut)
    assert accepted == []


def test_registry_json_cut_anywhere_is_refused() -> None:
    """The seed registry JSON cut at any point is refused."""
    for cut in _cuts(SEED_REGISTRY):
        with pytest.raises(RecipeError):
            parse_registry(SEED_REGISTRY[:cut], "registry.json")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("cmsb828qn0061qd01l1fsm6pa", "cmsb828qn00"), "localmaxxing.run_id"),
        (("2026-08-30T09:10:02Z", "2026-08-30T09:10"), "provenance.captured_at"),
        (("\nlocalmaxxing · hardware label\n", "\nlocalmaxxing · hardware\n"), "localmaxxing.hardware_label"),
        (("vllm-tp2\n", "vllm-tp4\n"), "id"),
    ],
)
def test_page_sections_must_agree(change: tuple[str, str], field: str) -> None:
    """A page's sections are required and must agree with each other; each refusal names its section."""
    with pytest.raises(RecipeError) as caught:
        parse_localmaxxing_page(SEED_PAGE.replace(*change, 1), "page.txt")
    assert caught.value.field == field


# --- sweep specs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "phrase"),
    [
        (
            "[plan.concurrency]\nlevels = [1, 9223372036854775807]\n",
            "plan.concurrency.levels",
            f"at most {MAX_CONCURRENCY}",
        ),
        ("[plan.decode]\nlong_output_tokens = 1000000000\n", "plan.decode.long_output_tokens", f"{MAX_OUTPUT_TOKENS}"),
        (
            "[plan]\nwarmup_requests = 1000000000\n[plan.short_ttft]\n",
            "plan.warmup_requests",
            "less than or equal to 100",
        ),
        ("[plan]\ntime_budget_s = inf\n[plan.short_ttft]\n", "plan.time_budget_s", "finite"),
        ("[plan]\nrequest_timeout_s = nan\n[plan.short_ttft]\n", "plan.request_timeout_s", "finite"),
        ("[plan]\nrepeats = 101\n[plan.short_ttft]\n", "plan.repeats", "less than or equal to 100"),
    ],
)
def test_spec_bounds(tmp_path: Path, body: str, field: str, phrase: str) -> None:
    """Out-of-bound and non-finite values are refused, naming the field and the limit."""
    with pytest.raises(SweepSpecError, match=phrase) as caught:
        load_sweep(_spec(tmp_path, body))
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("[plan.prefill]\nprompt_tokens = [1000]\noutput_tokens = 100\n", "plan.prefill.prompt_tokens[0]"),
        ("[plan.short_ttft]\nprompt_tokens = 1000\n", "plan.short_ttft.prompt_tokens"),
        ("[plan.concurrency]\nprompt_tokens = 900\noutput_tokens = 200\n", "plan.concurrency.prompt_tokens"),
        ("[plan.decode]\nshort_output_tokens = 64\nlong_output_tokens = 1001\n", "plan.decode.long_output_tokens"),
    ],
)
def test_every_request_fits_the_context(tmp_path: Path, body: str, field: str) -> None:
    """`--max_model_len=1k` is 1000 tokens: a request that needs more is refused at load, naming the field."""
    with pytest.raises(SweepSpecError, match="exceed the recipe's context of 1000 tokens") as caught:
        load_sweep(_spec(tmp_path, body))
    assert caught.value.field == field


@pytest.mark.parametrize("spelling", ["--max-model-len", "--max_model_len"])
def test_context_in_every_spelling(tmp_path: Path, spelling: str) -> None:
    """Both spellings of vLLM's context flag (and `=value`) bound the plan."""
    recipe = {**TINY, "argv": ["vllm", "serve", "/m", f"{spelling}=512"]}
    with pytest.raises(SweepSpecError, match="context of 512 tokens"):
        load_sweep(_spec(tmp_path, "[plan.short_ttft]\nprompt_tokens = 600\n", recipe))


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("a = " + "[" * 10_000 + "]" * 10_000, "nested 10000 levels deep"),
        ("a = " + "9" * 5000, "not a spec the farm can read|not valid TOML"),
        ('a = "\\ud800"', "not valid TOML|lone surrogate"),
    ],
)
def test_hostile_toml_is_a_spec_error(text: str, phrase: str) -> None:
    """Deep arrays, huge integers and surrogate escapes in a spec are the farm's error."""
    with pytest.raises(SweepSpecError, match=phrase):
        parse_spec_text(text, "s.toml")


# --- properties -----------------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_SEED_DOCUMENT = json.loads(SEED_REGISTRY)["data"]
_PATHS = [
    ("id",), ("hardware_id",), ("hardware_count",), ("engine",), ("engine", "name"), ("serving",),
    ("serving", "max_context_tokens"), ("draft_launch",), ("draft_launch", "arguments"), ("launch",),
    ("metadata", "localmaxxing", "observed_command"), ("metadata", "localmaxxing", "tokenized", "arguments"),
    ("metadata", "localmaxxing", "tokenized"), ("provenance", "sources"), ("schema_version",),
]  # fmt: skip


def _set(document: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[path[-1]] = value
    return copy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(_PATHS), value=_VALUES)
def test_property_mutated_registry_recipe(path: tuple[str, ...], value: object) -> None:
    """Any field of the seed recipe replaced by any JSON value: read, or refused with a RecipeError."""
    text = json.dumps(_set(_SEED_DOCUMENT, path, value), allow_nan=True)
    try:
        recipe = parse_registry(text, "m.json")
    except InputError:
        return
    json.dumps(recipe.model_dump(mode="json"), allow_nan=False).encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(SEED_PAGE)), noise=st.text(max_size=30))
def test_property_mutated_page(cut: int, noise: str) -> None:
    """The seed page with text spliced in anywhere: read, or refused with a RecipeError."""
    try:
        parse_localmaxxing_page(SEED_PAGE[:cut] + noise + SEED_PAGE[cut:], "p.txt")
    except InputError:
        return


_SPEC_PATHS = [
    ("plan", "repeats"), ("plan", "warmup_requests"), ("plan", "time_budget_s"), ("plan", "temperature"),
    ("plan", "decode", "long_output_tokens"), ("plan", "concurrency", "levels"), ("plan", "prefill", "prompt_tokens"),
    ("plan", "short_ttft", "prompt_tokens"), ("name",), ("max_attempts",),
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(_SPEC_PATHS), value=_VALUES)
def test_property_mutated_spec(path: tuple[str, ...], value: object) -> None:
    """Any spec field set to any value: a bounded, finite, context-fitting plan, or a SweepSpecError."""
    document = _set({"name": "t", "recipe": "r.json", "plan": {"short_ttft": {}}}, path, value)
    try:
        spec = validate_spec(document, "s.toml")
    except InputError:
        return
    plan = spec.plan
    assert math.isfinite(plan.time_budget_s)
    assert plan.repeats <= 100
    if plan.concurrency is not None:
        assert max(plan.concurrency.levels) <= MAX_CONCURRENCY
    recipe = parse_registry(json.dumps(TINY), "tiny.json")
    refused: SweepSpecError | None = None
    try:
        check_fits_context(plan, recipe, "s.toml")
    except SweepSpecError as exc:
        refused = exc
    assert refused is None or refused.field is not None
    assert isinstance(plan, SweepPlan)
