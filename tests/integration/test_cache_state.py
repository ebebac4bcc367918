"""Cache state as data on the simulator: SGLang's /flush_cache and `sglang:cached_tokens_total`; vLLM's
/reset_prefix_cache with its dev mode and the 404 without it.

The engine facts live with each engine (farm/engines/sglang/adapter.py): the reset path, and the counters the
hit rate is read from. The simulator in SGLang's dialect serves exactly those, so the farm must find them there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import pytest

from farm.bench.methods import CacheWatch, MeasureContext, watched_send
from farm.bench.runner import ENGINE_CACHE_RESETS, ENGINE_CACHE_RESETTERS, ENGINE_COUNTER_NAMES, run_sweep
from farm.bench.stream import StreamRequest
from farm.engines.process import EngineProcess
from farm.engines.vllm import cache as vllm_cache
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


@pytest.fixture(scope="module")
def vllm_without_dev_mode() -> Iterator[EngineProcess]:
    """vLLM as a worker launches it unless its profile says dev_mode_reset: no /reset_prefix_cache (HTTP 404)."""
    with running_sim(overrides=("dev_mode=false",), faults=("--fault-startup-delay", "0")) as process:
        yield process


def test_vllm_without_dev_mode_says_so_and_stays_cold_by_unique_prefixes(vllm_without_dev_mode: EngineProcess) -> None:
    """The reset answers 404 and the params say why (dev mode off); the prefill is still cold (hit rate 0 from
    vLLM's counters, not flagged) and the repeat still warm: unique prefixes carry the cold measurements."""
    plan = SweepPlan(
        repeats=2, warmup_requests=0, prefill=PrefillPlan(prompt_tokens=(2000,)), prefix_cache=PrefixCachePlan()
    )
    outcome = asyncio.run(run_sweep(vllm_without_dev_mode.base_url, "sim-test", plan))
    cold = outcome.figure("prefill/2000/prefix_cache_hit_rate")
    assert cold.values == (0.0, 0.0)
    assert cold.params["cache_reset"] == vllm_cache.NOT_SERVED + "; cold by unique prefixes"
    assert cold.params["cold_but_warm"] is False
    warm = outcome.figure("prefix_cache/2000/prefix_cache_hit_rate")
    assert warm.values == pytest.approx((1984 / 2000, 1984 / 2000))


def test_vllm_in_dev_mode_is_reset_and_its_answer_read(vllm_in_dev_mode: EngineProcess) -> None:
    """With dev mode the reset is `POST /reset_prefix_cache` answered `{"success": true}`: a prompt cached just
    before is served cold after it (the simulator's counters), then warm again."""

    async def run() -> tuple[str, list[float]]:
        async with aiohttp.ClientSession() as control:
            ctx = MeasureContext(
                vllm_in_dev_mode.base_url,
                "sim-test",
                SweepPlan(repeats=1, warmup_requests=0),
                control,
                deadline_ns=time.monotonic_ns() + 60 * 10**9,
                counter_families=ENGINE_COUNTER_NAMES,
                cache_resets=ENGINE_CACHE_RESETS,
                cache_resetters=ENGINE_CACHE_RESETTERS,
            )
            request = StreamRequest(prompt="a cached prompt " * 200, max_tokens=1, api="completions")
            watch = CacheWatch()
            async with ctx.client() as client:
                await ctx.send(client, request)
                done = await ctx.reset_prefix_cache()
                for _ in range(2):
                    await watched_send(ctx, client, request, watch)
            return done, watch.hit_rates

    done, rates = asyncio.run(run())
    assert done == "POST /reset_prefix_cache"
    assert rates[0] == 0.0
    assert rates[1] > 0.9


@pytest.fixture(scope="module")
def vllm_in_dev_mode() -> Iterator[EngineProcess]:
    with running_sim(faults=("--fault-startup-delay", "0")) as process:
        yield process
