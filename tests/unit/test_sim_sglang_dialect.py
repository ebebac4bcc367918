"""The simulator in SGLang's dialect: SGLang's endpoints and metric names over the same engine."""

from __future__ import annotations

import json
from typing import Any

from farm.bench import metrics
from farm.bench.runner import ENGINE_COUNTER_NAMES
from farm.sim.metrics import SGLANG_NAMES, sglang_exposition
from farm.sim.profile import load_profile
from farm.sim.routes import build_app


def answer(app: Any, path: str) -> tuple[int, Any]:
    """Call the GET handler of `path` directly (no socket): its status and decoded body."""
    response = app.routes[path]["GET"](app.state, None, None)
    body = response.body.decode()
    return response.status, (json.loads(body) if response.content_type == "application/json" else body)


def test_sglang_dialect_answers_sglangs_endpoints_and_not_vllms() -> None:
    """With dialect sglang: /get_server_info carries the version, /get_model_info the model, /version is gone;
    the vLLM dialect keeps /version and has none of SGLang's."""
    profile = load_profile("test", overrides={"dialect": "sglang", "served_model_name": "org/m"})
    app = build_app(profile)
    assert "/version" not in app.routes
    status, info = answer(app, "/get_server_info")
    assert (status, info["version"], info["served_model_name"]) == (200, profile.version, "org/m")
    status, model = answer(app, "/get_model_info")
    assert (status, model["model_path"], model["is_generation"]) == (200, "org/m", True)
    assert answer(app, "/v1/models")[1]["data"][0]["owned_by"] == "sglang"

    vllm = build_app(load_profile("test"))
    assert "/version" in vllm.routes
    assert "/get_server_info" not in vllm.routes


def test_sglang_metrics_page_is_read_as_sglang_by_the_sweep() -> None:
    """The SGLang page carries sglang:* names only (no engine label, no vLLM-only metric); the sweep learns the
    SGLang family from it and reads its token counters under the farm's names."""
    app = build_app(load_profile("test", overrides={"dialect": "sglang"}))
    app.state.metrics.prompt_tokens = 11
    app.state.metrics.generation_tokens = 7
    _, page = answer(app, "/metrics")
    counters = metrics.parse_prometheus_counters(page)
    assert counters
    assert all(name.startswith("sglang:") for name in counters)
    assert 'engine="0"' not in page
    assert "sglang:time_to_first_token_seconds_bucket" in counters
    names = metrics.counter_names_for(counters, ENGINE_COUNTER_NAMES)
    assert names is ENGINE_COUNTER_NAMES["sglang:"]
    canonical = metrics.canonical_counters(counters, names)
    assert (canonical["vllm:prompt_tokens"], canonical["vllm:generation_tokens"]) == (11.0, 7.0)


def test_sglang_exposition_keeps_only_mapped_metrics() -> None:
    """Comments and samples of mapped metrics are renamed (histogram series included); the rest is dropped."""
    text = (
        "# HELP vllm:prompt_tokens_total Prompt tokens.\n# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{model_name="m",engine="0"} 3\n'
        'vllm:e2e_request_latency_seconds_sum{model_name="m",engine="0"} 1.5\n'
        'vllm:num_preemptions_total{model_name="m",engine="0"} 9\n'
    )
    assert sglang_exposition(text) == (
        "# HELP sglang:prompt_tokens_total Prompt tokens.\n# TYPE sglang:prompt_tokens_total counter\n"
        'sglang:prompt_tokens_total{model_name="m"} 3\n'
        'sglang:e2e_request_latency_seconds_sum{model_name="m"} 1.5\n'
    )
    assert set(SGLANG_NAMES.values()) >= set(ENGINE_COUNTER_NAMES["sglang:"].values())
