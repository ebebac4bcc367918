"""Cache state as data on an SGLang-speaking simulator: its /flush_cache and its `sglang:cached_tokens_total`.

The engine facts live with each engine (farm/engines/sglang/adapter.py): the reset path, and the counters the
hit rate is read from. The simulator in SGLang's dialect serves exactly those, so the farm must find them there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from farm.bench.runner import run_sweep
from farm.engines.process import EngineProcess
from farm.recipes.sweep import PrefillPlan, PrefixCachePlan, SweepPlan
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sglang_sim() -> Iterator[EngineProcess]:
    with running_sim(overrides=("dialect=sglang",), faults=("--fault-startup-delay", "0")) as process:
        yield process


def test_sglang_cache_is_flushed_and_its_hit_rate_read(sglang_sim: EngineProcess) -> None:
    """Prefill after POST /flush_cache: hit rate 0 from SGLang's counters; the repeat: all full 16-token blocks
    of the 2,000-token prompt (1,984 tokens) from the cache."""
    plan = SweepPlan(
        repeats=2, warmup_requests=0, prefill=PrefillPlan(prompt_tokens=(2000,)), prefix_cache=PrefixCachePlan()
    )
    outcome = asyncio.run(run_sweep(sglang_sim.base_url, "sim-test", plan))
    cold = outcome.figure("prefill/2000/prefix_cache_hit_rate")
    assert cold.values == (0.0, 0.0)
    assert cold.params["cache_reset"] == "POST /flush_cache"
    assert cold.params["cold_but_warm"] is False
    warm = outcome.figure("prefix_cache/2000/prefix_cache_hit_rate")
    assert warm.values == pytest.approx((1984 / 2000, 1984 / 2000))
    assert "counters" in warm.params["source"]
