"""The `[plan.open_loop]` and `[plan.client]` sections of a sweep spec: bounded, validated, and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.bench.runner import planned_steps
from farm.errors import SweepSpecError
from farm.recipes import sweep
from farm.recipes.spec import load_sweep
from farm.recipes.sweep import ClientPlan, SweepPlan

TINY_RECIPE = """{"schema_version": "local-ai-registry/v1", "id": "tiny", "hardware_id": "cpu",
 "hardware_count": 1, "engine": {"name": "vllm"},
 "argv": ["vllm", "serve", "/models/tiny", "--max-model-len", "1024"]}"""


def _spec(tmp_path: Path, body: str) -> Path:
    """A spec file beside the tiny CPU recipe (context 1024)."""
    (tmp_path / "recipe.json").write_text(TINY_RECIPE, encoding="utf-8")
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "t"\nrecipe = "recipe.json"\n{body}', encoding="utf-8")
    return path


def test_open_loop_and_client_sections_load_into_the_plan(tmp_path: Path) -> None:
    """A spec with only [plan.open_loop] measures something; [plan.client] is read with it."""
    body = (
        "[plan]\nrepeats = 2\n"
        "[plan.open_loop]\nprocess = 'constant'\nrates_rps = [2.0, 4.0]\nrequests = 5\n"
        "prompt_tokens = 64\noutput_tokens = 16\n"
        "[plan.client]\nprocesses = 2\nengine_cpus = [0]\n"
    )
    plan = load_sweep(_spec(tmp_path, body)).spec.plan
    assert plan.open_loop is not None
    assert plan.open_loop.rates_rps == (2.0, 4.0)
    assert plan.client == ClientPlan(processes=2, engine_cpus=(0,))
    assert plan.measures_anything
    # Two rates, two repeats each: the runner's progress counts them from the plan alone.
    assert planned_steps(plan) == 4


def test_plan_round_trips_through_json_as_the_worker_reads_it() -> None:
    """A job row holds the plan as JSON; the worker's SweepPlan.model_validate gets the same sections back."""
    plan = SweepPlan.model_validate(
        {"open_loop": {"rates_rps": [3.0], "requests": 4}, "client": {"processes": 3}},
    )
    again = SweepPlan.model_validate(plan.model_dump(mode="json"))
    assert again == plan
    assert again.open_loop is not None
    assert again.open_loop.requests == 4
    assert again.client is not None
    assert again.client.processes == 3


@pytest.mark.parametrize(
    ("open_loop", "phrase"),
    [
        ({"rates_rps": [float("inf")]}, "rates_rps: every rate must be finite"),
        ({"rates_rps": [1.0], "slo": {"e2e_ms": float("inf")}}, "slo.e2e_ms: must be finite"),
        ({"rates_rps": [1.0], "seed": 2**70}, "seed: must fit a signed 64-bit integer"),
    ],
)
def test_plan_model_refuses_what_no_toml_parser_filtered(open_loop: dict[str, object], phrase: str) -> None:
    """A plan validated straight from JSON (a job row, the API) is bounded by the model itself, not only by the
    spec file's parser."""
    with pytest.raises(ValueError, match=phrase):
        SweepPlan.model_validate({"open_loop": open_loop})


BAD_OPEN_LOOP = [
    ("rate infinite", "rates_rps = [inf]\n", "plan.open_loop.rates_rps", "finite"),
    ("rate too high", "rates_rps = [1e9]\n", "plan.open_loop", f"at most {sweep.MAX_RATE_RPS:g}"),
    ("too many rates", f"rates_rps = {list(range(1, sweep.MAX_RATES + 2))}\n", "plan.open_loop", "rates_rps: at most"),
    ("output too long", "rates_rps = [1.0]\noutput_tokens = 1000000000\n", "plan.open_loop", "output_tokens: at most"),
    ("burst too big", "rates_rps = [1.0]\nburst_size = 100000000\n", "plan.open_loop", "burst_size: at most"),
    (
        "slo not finite",
        "rates_rps = [1.0]\n[plan.open_loop.slo]\nttft_ms = inf\n",
        "plan.open_loop.slo.ttft_ms",
        "finite",
    ),
    (
        "search bound infinite",
        "[plan.open_loop.slo]\nttft_ms = 100\n[plan.open_loop.find_max_rate]\nlow_rps = 1\nhigh_rps = inf\n",
        "plan.open_loop.find_max_rate.high_rps",
        "finite",
    ),
    ("nothing to measure", "requests = 3\n", "plan.open_loop", "give rates_rps or find_max_rate"),
    ("over the context", "rates_rps = [1.0]\nprompt_tokens = 1000\n", "plan.open_loop.prompt_tokens", "1024"),
]


@pytest.mark.parametrize(("body", "field", "phrase"), [c[1:] for c in BAD_OPEN_LOOP], ids=[c[0] for c in BAD_OPEN_LOOP])
def test_bad_open_loop_is_refused_naming_the_field(tmp_path: Path, body: str, field: str, phrase: str) -> None:
    """Every open-loop value past the limits (or not finite) is refused, naming the section and the value."""
    path = _spec(tmp_path, "[plan.open_loop]\n" + body)
    with pytest.raises(SweepSpecError) as caught:
        load_sweep(path)
    assert (caught.value.field or "").startswith(field)
    assert phrase in str(caught.value)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("processes = 0\n", "plan.client.processes"),
        (f"processes = {sweep.MAX_CLIENT_PROCESSES + 1}\n", "plan.client.processes"),
        ("engine_cpus = [-1]\n", "plan.client.engine_cpus"),
        ("threads = 2\n", "plan.client.threads"),
    ],
)
def test_bad_client_is_refused_naming_the_field(tmp_path: Path, body: str, field: str) -> None:
    """The client section is bounded like the others: processes, CPU indices, no unknown keys."""
    path = _spec(tmp_path, "[plan.short_ttft]\nprompt_tokens = 8\n[plan.client]\n" + body)
    with pytest.raises(SweepSpecError) as caught:
        load_sweep(path)
    assert caught.value.field == field
