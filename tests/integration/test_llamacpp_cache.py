"""Cache state on a llama.cpp-speaking simulator: slots erased where the server allows it, `cache_prompt: false` on
the requests meant cold, the hit rate from each answer's `timings.cache_n`.

The engine facts live with the engine (farm/engines/llamacpp/cache.py, from llama-server 0.3.36's source and the
built server); the simulator's `llamacpp` dialect answers as that server does, with its prefix cache as the truth.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import aiohttp
import pytest

from farm.bench import methods
from farm.bench.methods import CacheWatch, MeasureContext, watched_send
from farm.bench.promptsize import FILLERS
from farm.bench.runner import ENGINE_CACHE_RESETS, ENGINE_CACHE_RESETTERS, ENGINE_COUNTER_NAMES, run_sweep
from farm.bench.stream import StreamRequest
from farm.engines.process import EngineProcess
from farm.recipes.sweep import ContextDepthPlan, PrefillPlan, PrefixCachePlan, ShortTTFTPlan, SweepPlan
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

SLOTS = 4
"""llama-server's slots (`--parallel`), as the farm's llama.cpp demo recipe runs it."""


@pytest.fixture(scope="module")
def llama_sim() -> Iterator[EngineProcess]:
    """llama-server as the farm launches it: no --slot-save-path, so no slot can be erased."""
    overrides = ("dialect=llamacpp", f"max_num_seqs={SLOTS}")
    with running_sim(overrides=overrides, faults=("--fault-startup-delay", "0")) as process:
        yield process


@pytest.fixture(scope="module")
def erasable_sim() -> Iterator[EngineProcess]:
    """llama-server started with --slot-save-path: its slots can be erased."""
    overrides = ("dialect=llamacpp", f"max_num_seqs={SLOTS}", "slot_save_path=true")
    with running_sim(overrides=overrides, faults=("--fault-startup-delay", "0")) as process:
        yield process


def _context(base_url: str, control: aiohttp.ClientSession) -> MeasureContext:
    return MeasureContext(
        base_url,
        "sim-test",
        SweepPlan(repeats=1, warmup_requests=0),
        control,
        deadline_ns=time.monotonic_ns() + 60 * 10**9,
        counter_families=ENGINE_COUNTER_NAMES,
        cache_resets=ENGINE_CACHE_RESETS,
        cache_resetters=ENGINE_CACHE_RESETTERS,
    )


async def _same_prompt_twice(base_url: str, *, cold: bool) -> tuple[str, CacheWatch, dict[str, object]]:
    """One 1,000-token prompt sent twice after a reset, with the cold fields or without: what the reset said,
    the hit rates, and the simulator's counters."""
    async with aiohttp.ClientSession() as control:
        ctx = _context(base_url, control)
        sized = await ctx.unique_sized(1000, methods.PREFILL_HEAD, FILLERS["prose"])
        async with ctx.client() as client:
            await ctx.send(client, StreamRequest(prompt=sized.text, max_tokens=1, api="completions"))
            done = await ctx.reset_prefix_cache(per_request=cold)
            watch = CacheWatch()
            request = StreamRequest(
                prompt=sized.text, max_tokens=1, api="completions", extra=ctx.cold_fields if cold else {}
            )
            for _ in range(2):
                assert (await watched_send(ctx, client, request, watch)).ok
        async with control.get(base_url + "/sim/stats") as response:
            stats = await response.json()
    return done, watch, stats


def test_unerasable_server_is_made_cold_per_request(llama_sim: EngineProcess) -> None:
    """Without --slot-save-path the erase is refused (HTTP 501, said in the params); the same prompt sent again
    with `cache_prompt: false` reuses nothing (cache_n 0), and without it is served from the cache: 62 full
    16-token blocks of 1,000 tokens."""
    done, watch, _ = asyncio.run(_same_prompt_twice(llama_sim.base_url, cold=True))
    assert done.startswith("no slot erased: POST /slots/0?action=erase answered HTTP 501 (This server does not")
    assert done.endswith("each request sent with cache_prompt: false")
    assert watch.hit_rates == [0.0, 0.0]
    assert watch.sources == {methods.HIT_RATE_FROM_USAGE}
    done, watch, _ = asyncio.run(_same_prompt_twice(llama_sim.base_url, cold=False))
    assert done.endswith("; cold by unique prefixes")
    assert watch.hit_rates == pytest.approx([992 / 1000, 992 / 1000])


def test_erasable_server_has_every_slot_erased(erasable_sim: EngineProcess) -> None:
    """With --slot-save-path every slot `GET /slots` lists is erased: the prompt cached just before is gone
    (hit rate 0 on its first send, without any cold field), and cached again for the second."""
    done, watch, stats = asyncio.run(_same_prompt_twice(erasable_sim.base_url, cold=False))
    assert done == (
        "erased slots 0, 1, 2, 3 (POST /slots/{id}?action=erase; the host-memory prompt cache is not erased)"
    )
    assert watch.hit_rates == pytest.approx([0.0, 992 / 1000])
    assert stats["prefix_cache_resets"] == SLOTS


def test_cold_measurements_read_zero_after_the_reset(llama_sim: EngineProcess) -> None:
    """A sweep's cold measurements on llama.cpp (prefill, short TTFT, the TTFT at depth) read a hit rate of 0
    from `timings.cache_n`, not flagged; the prefix-cache repeat reads the cache; every figure says the reset."""
    plan = SweepPlan(
        repeats=2,
        warmup_requests=0,
        prefill=PrefillPlan(prompt_tokens=(2000,)),
        short_ttft=ShortTTFTPlan(prompt_tokens=64),
        prefix_cache=PrefixCachePlan(),
        context_depth=ContextDepthPlan(depths=(1024,), short_output_tokens=4, long_output_tokens=20),
    )
    outcome = asyncio.run(run_sweep(llama_sim.base_url, "sim-test", plan))
    for key in ("prefill/2000", "short_ttft/64", "depth/1024"):
        cold = outcome.figure(f"{key}/prefix_cache_hit_rate")
        assert cold.values == (0.0, 0.0), key
        assert cold.params["cold_but_warm"] is False
        assert "cache_prompt: false" in cold.params["cache_reset"]
        assert cold.params["source"] == methods.HIT_RATE_FROM_USAGE
    warm = outcome.figure("prefix_cache/2000/prefix_cache_hit_rate")
    assert warm.values == pytest.approx((1984 / 2000, 1984 / 2000))
