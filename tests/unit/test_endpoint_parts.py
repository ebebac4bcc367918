"""Endpoint pieces without a server: URLs without credentials, the engine's metric-name guess, the recipe."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from farm.bench.endpoint import EndpointInfo, endpoint_engine_provenance, endpoint_recipe, engine_from_metrics
from farm.bench.endpoint_run import check_fits, default_spec_path, load_endpoint_spec
from farm.errors import MeasurementError, SweepSpecError
from farm.net import basic_auth_header, free_port, url_without_credentials
from farm.recipes.sweep import PrefillPlan, SweepPlan


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("http://user:secret@10.0.0.5:8000/", "http://10.0.0.5:8000"),
        ("https://api.example.com/v1?key=abc#x", "https://api.example.com/v1"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://127.0.0.1:9", "http://127.0.0.1:9"),
    ],
)
def test_url_without_credentials(url: str, clean: str) -> None:
    """User, password, query and fragment are dropped; scheme, host, port and path stay."""
    assert url_without_credentials(url) == clean


def test_basic_auth_header_from_the_url() -> None:
    """user:password@ becomes a Basic header (percent-escapes decoded); no userinfo, no header."""
    header = basic_auth_header("http://al%40ice:p%3Ass@host:1")["Authorization"]
    assert base64.b64decode(header.removeprefix("Basic ")).decode() == "al@ice:p:ss"
    assert basic_auth_header("http://host:1") == {}


def test_free_port_is_a_bindable_port() -> None:
    """free_port returns a port in the unprivileged range."""
    assert 1024 <= free_port() <= 65535


@pytest.mark.parametrize(
    ("text", "engine"),
    [
        ("# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n", "vllm"),
        ("sglang:num_running_reqs 1\n", "sglang"),
        ("llamacpp:prompt_tokens_total 3\n", "llama.cpp"),
        ("process_cpu_seconds_total 1\n", None),
    ],
)
def test_engine_from_metric_names(text: str, engine: str | None) -> None:
    """The first known metric-name prefix names the engine; none known, none named."""
    assert engine_from_metrics(text) == engine


def test_endpoint_recipe_and_provenance_carry_no_credentials() -> None:
    """The recipe of an endpoint run names the model, the declared hardware, engine kind endpoint, no argv."""
    info = EndpointInfo(url="http://10.0.0.5:8000", version="0.9.1", models=("m",), max_model_len={"m": 4096})
    recipe = endpoint_recipe(info, "m", hardware_id="unknown", hardware_count=1)
    assert recipe.engine.name == "endpoint"
    assert recipe.argv == ()
    assert recipe.hardware_class == "unknown x 1"
    assert recipe.serving.max_context_tokens == 4096
    engine = endpoint_engine_provenance(info, engine_version=None)
    assert engine["kind"] == "endpoint"
    assert engine["launched_by_farm"] is False
    assert engine["version"] == "0.9.1"
    assert engine["url"] == "http://10.0.0.5:8000"


def test_endpoint_spec_errors_name_the_file_and_field(tmp_path: Path) -> None:
    """A bad open-loop section, an unknown key and an empty spec are refused naming the file and the field;
    jobs/demo.toml (the default) loads with its recipe ignored."""
    cases = {
        "bad.toml": ('name = "x"\n[open_loop]\nrates_rps = [-1.0]\n', "open_loop"),
        "unknown.toml": ('name = "x"\n[plan]\nrepeat = 3\n', "plan.repeat"),
        "empty.toml": ('name = "x"\n', "plan"),
    }
    for name, (text, field) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(SweepSpecError) as raised:
            load_endpoint_spec(path)
        assert raised.value.field == field, (name, str(raised.value))
        assert name in str(raised.value)
    loaded = load_endpoint_spec(default_spec_path())
    assert loaded.spec.plan.decode is not None
    assert loaded.spec.open_loop is None


def test_check_fits_refuses_prompts_longer_than_the_servers_context() -> None:
    """A prefill prompt plus its output above the server's max_model_len is refused before anything is sent."""
    info = EndpointInfo(url="http://h:1", version=None, models=("m",), max_model_len={"m": 1000})
    plan = SweepPlan(prefill=PrefillPlan(prompt_tokens=(1000,)))
    with pytest.raises(MeasurementError, match=r"plan\.prefill\.prompt_tokens: 1001 tokens"):
        check_fits(plan, None, info, "m")
    check_fits(SweepPlan(prefill=PrefillPlan(prompt_tokens=(999,))), None, info, "m")
