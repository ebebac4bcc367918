"""Decode and prefill at context depth: how a server falls off as the context grows (`[plan.context_depth]`).

At each depth d, every repeat takes a prompt of exactly d tokens (the workload's question, then context filler;
depth 0 is the question alone) with a prefix no request began with, and sends it three times:

    cold, 1 output token    its TTFT is prefill of d tokens (the prefix cache reset first where the engine can)
    warm, short output      the prefix is now cached, so both of these pay the same small TTFT...
    warm, long output       ...and their difference times decode with d tokens in context (two-point decode)

so decode is measured at depth, not prefill. Figures: `depth/<d>/decode_tok_s`, `depth/<d>/ttft_ms`,
`depth/<d>/prefill_tok_s` and the cold send's `depth/<d>/prefix_cache_hit_rate` where the engine counts it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from farm.bench import metrics
from farm.bench.methods import (
    CacheWatch,
    MeasureContext,
    Measurement,
    common_params,
    make_figure,
    point_of,
    watched_send,
)
from farm.bench.prompts import WORKLOAD_PROMPTS
from farm.bench.promptsize import FILLERS, unique_prefix
from farm.bench.records import KIND_DEPTH, RequestSample, figure_key
from farm.bench.stream import StreamRequest
from farm.errors import MeasurementError
from farm.recipes.sweep import ContextDepthPlan

CONTEXT_HEAD = "\n\nAnswer with the notes below in mind.\n\nNotes:\n"
"""Between the question and the context filler."""


def _failure(point: str, samples: list[RequestSample]) -> MeasurementError:
    errors = sorted({sample.error or "no content" for sample in samples if not sample.ok})
    return MeasurementError(f"{point}: every request failed ({'; '.join(errors)[:500]})")


async def measure_depth(ctx: MeasureContext, depth: int, plan: ContextDepthPlan) -> Measurement:
    """Cold TTFT and two-point decode with `depth` tokens in context, `ctx.plan.repeats` times."""
    sweep = ctx.plan
    point = point_of(KIND_DEPTH, depth)
    question = WORKLOAD_PROMPTS[plan.workload]
    api = sweep.api
    watch = CacheWatch()
    decode_values: list[float] = []
    ttft_values: list[float] = []
    prefill_values: list[float] = []
    prompt_tokens_seen: list[int | None] = []
    repeats: list[list[RequestSample]] = []
    prompts: dict[str, str] = {}
    absent: dict[str, str] = {}
    hint: int | None = None

    def request(text: str, tokens: int) -> StreamRequest:
        return StreamRequest(
            prompt=text, max_tokens=tokens, api=api, temperature=sweep.temperature, thinking=sweep.thinking
        )

    async with ctx.client() as client:
        for repeat in range(sweep.repeats):
            ctx.check()
            if depth == 0:
                text = unique_prefix() + question
            else:
                sized = await ctx.unique_sized(
                    depth, question + CONTEXT_HEAD, FILLERS[plan.workload], api, hint_chars=hint
                )
                hint, text = sized.filler_chars, sized.text
            prompts[f"{point}#{repeat}"] = hashlib.sha256(text.encode()).hexdigest()
            if repeat == 0:
                watch.reset = await ctx.reset_prefix_cache(per_request=True)
            # Only the first request is meant cold; the two decode requests reuse its prefix.
            cold_request = dataclasses.replace(request(text, 1), extra=ctx.cold_fields)
            cold = await watched_send(ctx, client, cold_request, watch)
            short = await ctx.send(client, request(text, plan.short_output_tokens))
            long = await ctx.send(client, request(text, plan.long_output_tokens))
            repeats.append([cold, short, long])
            prompt_tokens_seen.append(cold.prompt_tokens)
            ctx.on_step(f"depth {depth}: repeat {repeat + 1} of {sweep.repeats}")
            if cold.ok:
                ttft = metrics.ttft_s(cold)
                ttft_values.append(ttft * metrics.MS_PER_S)
                try:
                    prefill_values.append(metrics.prefill_tok_s(cold.prompt_tokens or max(depth, 1), ttft))
                except MeasurementError as undefined:
                    absent[f"prefill repeat {repeat + 1}"] = str(undefined)
            if short.ok and long.ok:
                try:
                    decode_values.append(
                        metrics.two_point_decode_tok_s(
                            short.completion_tokens or 0,
                            metrics.e2e_s(short),
                            long.completion_tokens or 0,
                            metrics.e2e_s(long),
                        )
                    )
                except MeasurementError as undefined:
                    absent[f"decode repeat {repeat + 1}"] = str(undefined)
    samples = [sample for group in repeats for sample in group]
    if not ttft_values and not decode_values:
        raise _failure(point, samples)
    params: dict[str, Any] = {
        **common_params(sweep, api),
        "depth_tokens": depth,
        "workload": plan.workload,
        "prompt_tokens_from_usage": prompt_tokens_seen,
        "short_output_tokens": plan.short_output_tokens,
        "long_output_tokens": plan.long_output_tokens,
        "prompt_sized_by": ctx.prompt_sized_by if depth else "the question alone (not sized)",
        "prefix_warmed": "the decode requests follow a send of the same prompt: decode at depth, not prefill",
        **watch.params(meant_cold=True),
        **({"absent_in": absent} if absent else {}),
    }
    figures = []
    missing: dict[str, str] = {}
    for metric, unit, values in (
        ("decode_tok_s", "tok/s", decode_values),
        ("ttft_ms", "ms", ttft_values),
        ("prefill_tok_s", "tok/s", prefill_values),
    ):
        if values:
            figures.append(
                make_figure(
                    KIND_DEPTH,
                    depth,
                    metric,
                    unit,
                    values,
                    params=params,
                    repeats=sweep.repeats,
                    workload=plan.workload,
                )
            )
        else:
            missing[figure_key(KIND_DEPTH, depth, metric)] = "; ".join(sorted(set(absent.values()))) or "no value"
    hit_rate = watch.figure(KIND_DEPTH, depth, params, sweep.repeats)
    if hit_rate is not None:
        figures.append(hit_rate)
    return Measurement(figures=tuple(figures), samples={point: repeats}, prompt_sha256=prompts, absent=missing)
