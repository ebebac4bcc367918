"""Engine counters under the farm's names: the token cross-checks read llama.cpp's and SGLang's counters too."""

from __future__ import annotations

import pytest

from farm.bench import metrics
from farm.bench.runner import ENGINE_COUNTER_NAMES
from farm.engines.llamacpp.adapter import LlamaServerProcess
from farm.engines.sglang.adapter import SglangServerProcess

LLAMACPP_PAGE = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {generated}
llamacpp:requests_processing 0
"""

SGLANG_PAGE = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m"}} {prompt}
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="m"}} {generated}
sglang:num_running_reqs{{model_name="m"}} 1
"""

VLLM_PAGE = """vllm:prompt_tokens_total{{model_name="m"}} {prompt}
vllm:generation_tokens_total{{model_name="m"}} {generated}
"""


@pytest.mark.parametrize(
    ("page", "family"),
    [(LLAMACPP_PAGE, "llamacpp:"), (SGLANG_PAGE, "sglang:"), (VLLM_PAGE, "vllm:")],
    ids=["llama.cpp", "sglang", "vllm"],
)
def test_token_deltas_read_every_engine_family(page: str, family: str) -> None:
    """A page's family is learnt from its names; with that family's names, the farm's TOKEN_COUNTERS deltas are
    the engine's own counts (10 -> 25 prompt tokens, 3 -> 67 generated)."""
    before = metrics.parse_prometheus_counters(page.format(prompt=10, generated=3))
    after = metrics.parse_prometheus_counters(page.format(prompt=25, generated=67))
    names = metrics.counter_names_for(before, ENGINE_COUNTER_NAMES)
    assert names is ENGINE_COUNTER_NAMES[family]
    deltas = metrics.counter_deltas(
        metrics.canonical_counters(before, names), metrics.canonical_counters(after, names), metrics.TOKEN_COUNTERS
    )
    assert deltas == {"vllm:prompt_tokens": 15.0, "vllm:generation_tokens": 64.0}


def test_without_the_names_other_engines_have_no_token_deltas() -> None:
    """The reason for the mapping: read under vLLM's names alone, a llama.cpp page counts nothing."""
    page = metrics.parse_prometheus_counters(LLAMACPP_PAGE.format(prompt=1, generated=1))
    assert metrics.counter_deltas(page, page, metrics.TOKEN_COUNTERS) is None


@pytest.mark.parametrize(
    ("counters", "names", "canonical"),
    [
        ({"e:a_total": 2.0}, {"f:a": "e:a_total"}, {"e:a_total": 2.0, "f:a": 2.0}),
        ({"e:a": 2.0}, {"f:a": "e:a_total"}, {"e:a": 2.0}),  # the engine name missing: nothing added
        ({"f:a_total": 5.0, "e:a": 2.0}, {"f:a": "e:a"}, {"f:a_total": 5.0, "e:a": 2.0}),  # the farm's own wins
        ({"e:a_total": 1.0}, {"f:a": "e:a"}, {"e:a_total": 1.0, "f:a": 1.0}),  # the _total suffix is accepted
        ({}, {"f:a": "e:a"}, {}),
    ],
)
def test_canonical_counters(counters: dict[str, float], names: dict[str, str], canonical: dict[str, float]) -> None:
    """Each engine counter is copied under the farm's name when present; nothing else changes."""
    assert metrics.canonical_counters(counters, names) == canonical


def test_unknown_page_names_no_family() -> None:
    """A page of process metrics only (no engine prefix yet) leaves the family to be learnt later."""
    assert metrics.counter_names_for({"process_cpu_seconds_total": 1.0}, ENGINE_COUNTER_NAMES) is None


def test_the_adapters_expose_the_same_names_the_runner_learns() -> None:
    """The llama.cpp and SGLang adapters' metric_names are the runner's table for their prefixes."""
    assert LlamaServerProcess.metric_names == ENGINE_COUNTER_NAMES["llamacpp:"]
    assert SglangServerProcess.metric_names == ENGINE_COUNTER_NAMES["sglang:"]
    for names in (LlamaServerProcess.metric_names, SglangServerProcess.metric_names):
        # Every token counter; and the prefix-cache counters where the engine counts them (SGLang).
        assert set(metrics.TOKEN_COUNTERS) <= set(names) <= {*metrics.TOKEN_COUNTERS, *metrics.PREFIX_CACHE_COUNTERS}
    assert set(metrics.PREFIX_CACHE_COUNTERS) <= set(SglangServerProcess.metric_names)
