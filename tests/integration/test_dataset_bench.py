"""Real workloads against the simulator: a ShareGPT sample, multi-turn conversations, and a trace replayed.

The simulator's prefix cache is the truth of the hit rates: a turn's prompt begins with the previous turn's (as
chat messages, up to the template's tail after the assistant cue), so the engine serves those full blocks from
its cache and nothing else (the answers it generated are not cached; the history carries the reference
answers). Its /sim/requests records say what it served.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.bench.runner import SweepOutcome, run_sweep
from farm.bench.stream import Api
from farm.engines.process import EngineProcess
from farm.recipes.sweep import DatasetPlan, SweepPlan
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

BLOCK = 16
"""The test profile's prefix-cache block, in tokens."""


@pytest.fixture(scope="module")
def sim() -> Iterator[EngineProcess]:
    """The simulator with a cache large enough that nothing is evicted, and a long context."""
    overrides = ("prefix_cache_blocks=200000", "max_model_len=262144")
    with running_sim(overrides=overrides, faults=("--fault-startup-delay", "0")) as process:
        yield process


def sim_requests(base_url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(base_url + "/sim/requests", timeout=10) as response:  # noqa: S310 - loopback
        records: list[dict[str, Any]] = json.loads(response.read())["requests"]
    return records


def clear_records(base_url: str) -> None:
    request = urllib.request.Request(base_url + "/sim/requests", method="DELETE")  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - loopback
        pass


def sweep(sim: EngineProcess, dataset: DatasetPlan, repeats: int = 1, api: Api = "chat") -> SweepOutcome:
    plan = SweepPlan(
        repeats=repeats, warmup_requests=0, time_budget_s=120.0, request_timeout_s=60.0, dataset=dataset, api=api
    )
    return asyncio.run(run_sweep(sim.base_url, "sim-test", plan))


def by_key(outcome: SweepOutcome) -> dict[str, Any]:
    return {figure.key: figure for figure in outcome.figures}


def test_a_sharegpt_sample_asks_the_reference_lengths(sim: EngineProcess) -> None:
    """Eight conversations' first prompts, two at a time: every request got exactly the tokens its reference
    answer has (counted by the server), the figures of a concurrency level are there, and the params say which
    sample of which file it was."""
    outcome = sweep(sim, DatasetPlan(requests=8, concurrency=2, seed=11, max_output_tokens=200))
    figures = by_key(outcome)
    params = figures["dataset/sharegpt/ttft_ms_p50"].params
    (samples,) = outcome.samples["dataset/sharegpt"]
    assert sum(sample["completion_tokens"] for sample in samples) == params["output_tokens_total"]
    assert len({sample["completion_tokens"] for sample in samples}) > 1  # real lengths differ
    assert params["dataset_sha256"] == "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772"
    assert len(params["sample_ids"]) == 8
    # Timing accuracy is test_any_server's (its streams are long enough for it); here, the figures are there.
    assert {"aggregate_tok_s", "per_stream_tok_s", "ttft_ms_p99", "e2e_ms_p50"} <= {
        key.rsplit("/", 1)[1] for key in figures
    }
    assert figures["dataset/sharegpt/prefix_cache_hit_rate"].values[0] < 0.01


CHAT_CUE_TAIL = 2
"""Tokens the simulator's chat template adds after the assistant cue with thinking off (`<think></think>`), which
the next turn's history does not repeat: they end turn k's prompt but are not in turn k+1's."""


@pytest.mark.parametrize(("api", "tail"), [("chat", CHAT_CUE_TAIL), ("completions", 0)])
def test_multi_turn_hit_rates_equal_the_simulators_cache(sim: EngineProcess, api: Api, tail: int) -> None:
    """Six conversations of three turns: turn 1 is cold; turn k's hit rate is the full blocks of the previous
    prompt's part that this one repeats (all of it as a transcript; as chat messages, all but the template's
    thinking-off tail after the cue) over this prompt's tokens, summed over the conversations, exactly what the
    simulator's records say it served from its cache."""
    clear_records(sim.base_url)
    dataset = DatasetPlan(requests=6, turns=3, concurrency=3, seed=3, max_prompt_chars=2000)
    outcome = sweep(sim, dataset, api=api)
    figures = by_key(outcome)
    records = [r for r in sim_requests(sim.base_url) if r["completion_tokens"] > 1]
    lengths = {}
    for turn in (1, 2, 3):
        (samples,) = outcome.samples[f"dataset/sharegpt-turn{turn}"]
        lengths[turn] = sorted(sample["prompt_tokens"] for sample in samples)
    for turn in (1, 2, 3):
        measured = figures[f"dataset/sharegpt-turn{turn}/prefix_cache_hit_rate"].values[0]
        served = [r for r in records if r["prompt_tokens"] in lengths[turn]]
        truth = sum(r["cached_tokens"] for r in served) / sum(r["prompt_tokens"] for r in served)
        assert measured == pytest.approx(truth, abs=1e-9), (turn, measured, truth)
        if turn == 1:
            assert measured == 0.0
        else:
            previous = sum(min(n - 1, n - tail) // BLOCK * BLOCK for n in lengths[turn - 1])
            assert measured == pytest.approx(previous / sum(lengths[turn])), turn
    assert figures["dataset/sharegpt-turn3/prefix_cache_hit_rate"].values[0] > 0.3  # most of turn 3 is history
    params = figures["dataset/sharegpt-turn2/ttft_ms_p50"].params
    assert params["turn"] == 2
    assert params["api"] == api
    assert params["multi_turn"].startswith("each turn's request carries" if api == "chat" else "each turn's prompt")


def test_a_trace_is_replayed_with_its_own_timing(sim: EngineProcess, tmp_path: Path) -> None:
    """Six requests 100 ms apart, four of them sharing a 200-token prefix: each sent at its arrival time (the
    client on schedule), sized exactly, the shared prefix served from the cache after its first use."""
    lines = []
    for i in range(6):
        line: dict[str, Any] = {"arrival_s": 0.1 * i, "prompt_tokens": 300, "output_tokens": 8}
        if i < 4:
            line |= {"prefix_id": "doc", "prefix_tokens": 200}
        lines.append(json.dumps(line))
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    clear_records(sim.base_url)
    outcome = sweep(sim, DatasetPlan(source="trace", trace=str(trace)))
    figures = by_key(outcome)
    (samples,) = outcome.samples["dataset/trace"]
    assert [sample["prompt_tokens"] for sample in samples] == [300] * 6
    starts = sorted(sample["started_ns"] for sample in samples)
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(starts)]
    assert all(80 < gap < 120 for gap in gaps_ms), gaps_ms
    assert figures["dataset/trace/send_lag_ms_p99"].values[0] < 20.0
    hit = figures["dataset/trace/prefix_cache_hit_rate"].values[0]
    shared = 3 * (200 // BLOCK * BLOCK)  # the three requests after the first of the group
    assert hit == pytest.approx(shared / (6 * 300), abs=BLOCK * 3 / (6 * 300))
    assert figures["dataset/trace/ttft_from_schedule_ms_p50"].params["trace_sha256"]
