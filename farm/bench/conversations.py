"""Measuring real workloads (`[plan.dataset]`): a ShareGPT sample, multi-turn conversations, trace replay.

ShareGPT, single turn: each sampled conversation's first prompt, asking for as many tokens as its reference
answer has (counted by the server's tokenizer, at most `max_output_tokens`, EOS ignored so the length holds),
sent `concurrency` at a time or arriving at `rate_rps` (Poisson, the plan's seed). Figures under
`dataset/sharegpt/...`: those of a concurrency level (throughput, per-stream rate, TTFT/ITL/TPOT/E2E
percentiles), and with a rate those of an open-loop round, timed from the schedule too (farm.bench.load).

Multi-turn: the turns go in waves, turn k of every conversation together (`concurrency` at a time), so the
engine's counters read around a wave give that turn's prefix-cache hit rate. On the chat API (the plan's `api`,
chat by default) turn k's request carries the conversation so far as messages: each earlier prompt as a `user`
message and its reference answer as an `assistant` one, then the new prompt; the engine's chat template renders
them, so turn k's prompt begins with turn k-1's up to the generation cue (a template that adds more after the
cue, as thinking-off `<think></think>`, does not repeat it in the history). On the completions API it is the
transcript so far (`User: ...`, the reference answers as `Assistant: ...`), which begins with turn k-1's prompt
exactly. Either way an engine with a prefix cache serves the shared part from it. Figures per turn under
`dataset/sharegpt-turn<k>/...`, with `prefix_cache_hit_rate`.

Trace: every request sized to its prompt length (requests of one `prefix_id` share their first `prefix_tokens`
tokens), sent at its own arrival time. Figures under `dataset/trace/...`, timed from the schedule as well.

Every repeat gives each conversation (and each shared prefix) a fresh unique prefix, and the engine's prefix
cache is reset before it where the engine can, so no repeat is served from an earlier one's cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from farm.bench import metrics
from farm.bench.datasets import (
    SHAREGPT_FILE,
    Conversation,
    TraceRequest,
    load_sharegpt,
    read_trace,
    sample_conversations,
    sample_sha256,
)
from farm.bench.load import SLO, arrival_offsets_s, load_figures
from farm.bench.methods import SIZING_PARALLELISM, MeasureContext, Measurement, common_params, make_figure
from farm.bench.promptsize import FILLERS, SIZED_BY_USAGE, sized_prompt, unique_prefix
from farm.bench.records import CONCURRENCY_METRICS, KIND_DATASET, Figure, RequestSample
from farm.bench.stream import Api, StreamClient, StreamRequest
from farm.errors import MeasurementError
from farm.recipes.sweep import DatasetPlan

USER, ASSISTANT = "User: ", "Assistant:"
"""How a transcript names its speakers (the completions API has no roles)."""
START_LEAD_NS = 20_000_000
"""A timed schedule starts 20 ms after set-up (farm.bench.openloop does the same)."""


def transcript(turns: Sequence[tuple[str, str]], prompt: str) -> str:
    """The prompt of the next turn: every earlier turn with its answer, then the new prompt, then the cue."""
    parts = [f"{USER}{said}\n{ASSISTANT} {answer}\n" for said, answer in turns]
    return "".join(parts) + f"{USER}{prompt}\n{ASSISTANT}"


async def _count_outputs(ctx: MeasureContext, texts: Sequence[str], cap: int) -> list[int]:
    """Each reference answer's length in the server's tokens (less the special tokens it adds to a prompt), at
    least 1 and at most `cap`."""
    counter = ctx.counter("completions")
    specials = max(await counter.count_tokens("a") - 1, 0)
    gate = asyncio.Semaphore(SIZING_PARALLELISM)

    async def one(text: str) -> int:
        async with gate:
            ctx.check()
            return min(max((await counter.count_tokens(text)) - specials, 1), cap)

    return list(await asyncio.gather(*(one(text) for text in texts)))


async def _at_concurrency(
    ctx: MeasureContext, client: StreamClient, requests: Sequence[StreamRequest], concurrency: int
) -> list[RequestSample]:
    """Send every request, at most `concurrency` in flight, each started as soon as a slot frees."""
    gate = asyncio.Semaphore(concurrency)
    timeout = ctx.timeout_s()

    async def one(request: StreamRequest) -> RequestSample:
        async with gate:
            return await client.stream(request, timeout_s=timeout)

    ctx.check()
    samples = list(await asyncio.gather(*(one(request) for request in requests)))
    ctx.record(samples)
    return samples


async def _on_schedule(
    ctx: MeasureContext, client: StreamClient, requests: Sequence[StreamRequest], offsets_s: Sequence[float]
) -> tuple[list[RequestSample], list[int]]:
    """Send each request at its offset from now (not waiting for earlier ones); the samples and the schedule."""
    ctx.check()
    timeout = ctx.timeout_s()
    clock = time.perf_counter_ns
    start = clock() + START_LEAD_NS
    tasks: list[asyncio.Task[RequestSample]] = []
    scheduled: list[int] = []
    for offset, request in zip(offsets_s, requests, strict=True):
        due = start + round(offset * metrics.NS_PER_S)
        scheduled.append(due)
        wait = due - clock()
        if wait > 0:
            await asyncio.sleep(wait / metrics.NS_PER_S)
        tasks.append(asyncio.create_task(client.stream(request, timeout_s=timeout)))
    samples = list(await asyncio.gather(*tasks))
    ctx.record(samples)
    return samples, scheduled


class _Points:
    """Per point, the values of each metric over the repeats, and the samples."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = {}
        self.samples: dict[str, list[list[RequestSample]]] = {}

    def add(self, point: str, figures: dict[str, float], samples: list[RequestSample]) -> None:
        for metric, value in figures.items():
            self.values.setdefault(point, {}).setdefault(metric, []).append(value)
        self.samples.setdefault(f"{KIND_DATASET}/{point}", []).append(samples)

    def figures(self, params: dict[str, dict[str, Any]], repeats: int) -> list[Figure]:
        out = []
        for point, by_metric in self.values.items():
            for metric, values in by_metric.items():
                unit = "tok/s" if metric.endswith("tok_s") else "fraction" if metric.endswith("rate") else "ms"
                if metric.endswith("rps"):
                    unit = "req/s"
                if metric == "failed_requests":
                    unit = "requests"
                if metric == "good_fraction":
                    unit = "fraction"
                figure = make_figure(KIND_DATASET, point, metric, unit, values, params=params[point], repeats=repeats)
                out.append(figure)
        return out


def _round_figures(samples: Sequence[RequestSample]) -> dict[str, float]:
    figured = metrics.concurrency_figures(samples)
    return {metric: figured.values[metric] for metric in CONCURRENCY_METRICS if metric in figured.values}


async def _hit_rate(
    ctx: MeasureContext, before: dict[str, float] | None, samples: Sequence[RequestSample]
) -> float | None:
    """The hit rate over a wave: from the engine's counters, else from the cached tokens its answers report."""
    after = await ctx.counters()
    rate = metrics.prefix_cache_hit_rate(before, after) if before is not None and after is not None else None
    if rate is not None:
        return rate
    told = [s for s in samples if s.ok and s.cached_tokens is not None and s.prompt_tokens]
    if not told:
        return None
    return sum(s.cached_tokens or 0 for s in told) / sum(s.prompt_tokens or 0 for s in told)


async def measure_dataset(ctx: MeasureContext, plan: DatasetPlan) -> Measurement:
    """Every repeat of the plan's dataset section; its figures, samples and the sample's identity."""
    if plan.source == "trace":
        return await _measure_trace(ctx, plan)
    return await _measure_sharegpt(ctx, plan)


async def _measure_sharegpt(ctx: MeasureContext, plan: DatasetPlan) -> Measurement:
    sweep = ctx.plan
    dataset = load_sharegpt()
    sample = sample_conversations(
        dataset.conversations, plan.requests, seed=plan.seed, turns=plan.turns, max_prompt_chars=plan.max_prompt_chars
    )
    outputs = await _count_outputs(ctx, [turn.reply for c in sample for turn in c.turns], plan.max_output_tokens)
    output_tokens = [outputs[i * plan.turns : (i + 1) * plan.turns] for i in range(len(sample))]
    points = _Points()
    resets: list[str] = []
    concurrency = plan.concurrency or plan.requests
    async with ctx.client(concurrency=min(concurrency, plan.requests)) as client:
        for repeat in range(sweep.repeats):
            prefixes = [unique_prefix() for _ in sample]
            resets.append(await ctx.reset_prefix_cache())
            if plan.turns == 1 and plan.rate_rps is not None:
                requests = [
                    _request(ctx, prefix + c.turns[0].prompt, n[0], api=sweep.api)
                    for prefix, c, n in zip(prefixes, sample, output_tokens, strict=True)
                ]
                offsets = arrival_offsets_s("poisson", plan.rate_rps, len(requests), seed=plan.seed + repeat)
                before = await ctx.counters()
                samples, scheduled = await _on_schedule(ctx, client, requests, offsets)
                figures = load_figures(samples, plan.rate_rps, SLO(), scheduled).as_dict()
                rate = await _hit_rate(ctx, before, samples)
                points.add("sharegpt", figures | ({"prefix_cache_hit_rate": rate} if rate is not None else {}), samples)
            for turn in range(plan.turns if plan.rate_rps is None else 0):
                requests = [
                    _turn_request(ctx, prefix, c, turn, n[turn])
                    for prefix, c, n in zip(prefixes, sample, output_tokens, strict=True)
                ]
                before = await ctx.counters()
                samples = await _at_concurrency(ctx, client, requests, concurrency)
                if not any(s.ok for s in samples):
                    raise MeasurementError(f"dataset sharegpt, turn {turn + 1}: every request failed")
                figures = _round_figures(samples)
                rate = await _hit_rate(ctx, before, samples)
                if rate is not None:
                    figures["prefix_cache_hit_rate"] = rate
                point = "sharegpt" if plan.turns == 1 else f"sharegpt-turn{turn + 1}"
                points.add(point, figures, samples)
            ctx.on_step(f"dataset sharegpt: repeat {repeat + 1} of {sweep.repeats}")
    common = {
        **common_params(sweep, sweep.api),
        "source": "sharegpt",
        "dataset_file": SHAREGPT_FILE,
        "dataset_sha256": dataset.sha256,
        "dataset_conversations": len(dataset.conversations),
        "dataset_truncated": dataset.truncated,
        "seed": plan.seed,
        "requests": plan.requests,
        "turns": plan.turns,
        "concurrency": plan.concurrency,
        "rate_rps": plan.rate_rps,
        "sample_sha256": sample_sha256(sample),
        "sample_ids": [c.id for c in sample[:20]],
        "output_tokens_total": sum(outputs),
        "output_tokens_counted_by": ctx.prompt_sized_by,
        "max_output_tokens": plan.max_output_tokens,
        "cache_reset": resets,
        "unique_prefix": "one per conversation per repeat",
        "multi_turn": MULTI_TURN_CHAT if sweep.api == "chat" else MULTI_TURN_TRANSCRIPT,
    }
    params = {
        point: {**common, **({"turn": int(point.rsplit("turn", 1)[1])} if "turn" in point else {})}
        for point in points.values
    }
    return Measurement(
        figures=tuple(points.figures(params, sweep.repeats)),
        samples=points.samples,
        prompt_sha256={"dataset/sharegpt": sample_sha256(sample)},
    )


MULTI_TURN_CHAT = (
    "each turn's request carries the conversation so far as user and assistant messages (reference answers)"
)
MULTI_TURN_TRANSCRIPT = "each turn's prompt is the transcript so far (reference answers), on the completions API"


def _request(
    ctx: MeasureContext,
    text: str,
    max_tokens: int,
    *,
    api: Api = "completions",
    history: Sequence[tuple[str, str]] = (),
) -> StreamRequest:
    return StreamRequest(
        prompt=text,
        max_tokens=max_tokens,
        api=api,
        temperature=ctx.plan.temperature,
        thinking=ctx.plan.thinking,
        history=tuple(history),
    )


def _turn_request(
    ctx: MeasureContext, prefix: str, conversation: Conversation, turn: int, max_tokens: int
) -> StreamRequest:
    """Turn `turn` (from 0) of a conversation whose first prompt begins with `prefix`: on the chat API the
    earlier turns as messages, on the completions API the transcript so far."""
    said = [(t.prompt, t.reply) for t in conversation.turns[:turn]]
    prompt = conversation.turns[turn].prompt
    if ctx.plan.api == "chat":
        if said:
            said[0] = (prefix + said[0][0], said[0][1])
        else:
            prompt = prefix + prompt
        return _request(ctx, prompt, max_tokens, api="chat", history=said)
    return _request(ctx, prefix + transcript(said, prompt), max_tokens)


async def _trace_prompts(ctx: MeasureContext, trace: Sequence[TraceRequest]) -> list[str]:
    """One prompt per traced request, exactly its length; requests of one prefix id share their prefix."""
    counter = ctx.counter("completions")
    filler = FILLERS["prose"]
    shared: dict[str, str] = {}
    for request in trace:
        if request.prefix_id is not None and request.prefix_id not in shared:
            head = unique_prefix() + f"Shared context {request.prefix_id}:\n"
            sized = await sized_prompt(counter, request.prefix_tokens, head=head, filler=filler)
            shared[request.prefix_id] = sized.text
    gate = asyncio.Semaphore(SIZING_PARALLELISM)
    hints: dict[int, int] = {}

    async def one(request: TraceRequest) -> str:
        base = shared.get(request.prefix_id or "", "")
        own = unique_prefix()
        async with gate:
            ctx.check()
            sized = await sized_prompt(
                counter,
                request.prompt_tokens,
                head=base + own + "Question:\n",
                filler=filler,
                hint_chars=hints.get(request.prompt_tokens - request.prefix_tokens),
            )
        hints.setdefault(request.prompt_tokens - request.prefix_tokens, sized.filler_chars)
        if ctx.prompt_sized_by == SIZED_BY_USAGE:
            # Counted by sending it: the sent prompt gets a fresh prefix of the same shape after the shared part.
            return base + unique_prefix() + sized.text[len(base) + len(own) :]
        return sized.text

    return list(await asyncio.gather(*(one(request) for request in trace)))


async def _measure_trace(ctx: MeasureContext, plan: DatasetPlan) -> Measurement:
    sweep = ctx.plan
    assert plan.trace is not None  # the plan's validator requires it for source = trace
    trace, trace_sha256 = read_trace(plan.trace)
    points = _Points()
    resets: list[str] = []
    offered = len(trace) / max(trace[-1].arrival_s, 1e-9) if len(trace) > 1 else 1.0
    in_flight = min(len(trace), 4096)
    async with ctx.client(concurrency=in_flight) as client:
        for repeat in range(sweep.repeats):
            prompts = await _trace_prompts(ctx, trace)
            resets.append(await ctx.reset_prefix_cache())
            requests = [_request(ctx, text, r.output_tokens) for text, r in zip(prompts, trace, strict=True)]
            before = await ctx.counters()
            samples, scheduled = await _on_schedule(ctx, client, requests, [r.arrival_s for r in trace])
            figures = load_figures(samples, offered, SLO(), scheduled).as_dict()
            rate = await _hit_rate(ctx, before, samples)
            if rate is not None:
                figures["prefix_cache_hit_rate"] = rate
            points.add("trace", figures, samples)
            ctx.on_step(f"dataset trace: repeat {repeat + 1} of {sweep.repeats}")
    params = {
        "trace": {
            **common_params(sweep, "completions"),
            "source": "trace",
            "trace_path": plan.trace,
            "trace_sha256": trace_sha256,
            "requests": len(trace),
            "duration_s": trace[-1].arrival_s,
            "prefix_ids": len({r.prefix_id for r in trace if r.prefix_id is not None}),
            "prompt_sized_by": ctx.prompt_sized_by,
            "cache_reset": resets,
            "timing": "each request sent at its own arrival_s; latency from the actual and the scheduled send",
        }
    }
    return Measurement(
        figures=tuple(points.figures(params, sweep.repeats)),
        samples=points.samples,
        prompt_sha256={"dataset/trace": trace_sha256},
    )
