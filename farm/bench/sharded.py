"""The concurrency sweep with its streams sharded over several client processes (`farm.bench.multiproc`).

The same figures as `farm.bench.methods.measure_concurrency` (same prompts, same math), measured by N
processes on one clock; each figure's parameters say how many processes measured it, what each shard saw of
its own loop lag and CPU, and whether the client was the bottleneck (`client_bound`, with the reasons).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from farm.bench import metrics
from farm.bench.methods import MeasureContext, Measurement, concurrency_prompts, make_figure, point_of
from farm.bench.multiproc import default_processes, run_sharded
from farm.bench.records import CONCURRENCY_METRICS, KIND_CONCURRENCY, RequestSample
from farm.bench.stream import StreamRequest
from farm.errors import MeasurementError
from farm.recipes.sweep import ConcurrencyPlan


class ClientPlan(BaseModel):
    """The `[client]` section of a `farm bench` spec: how many load-generator processes, on which CPUs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    processes: int = Field(1, ge=1, le=256, description="load-generator processes (1: the sweep's own loop)")
    engine_cpus: tuple[int, ...] = Field((), description="CPUs the engine uses here: the client keeps off them")


async def measure_concurrency_sharded(
    ctx: MeasureContext, level: int, concurrency: ConcurrencyPlan, client: ClientPlan
) -> Measurement:
    """`level` streams started at once from `client.processes` processes, `ctx.plan.repeats` times."""
    plan = ctx.plan
    point = point_of(KIND_CONCURRENCY, level)
    cpus = default_processes(set(client.engine_cpus))
    values: dict[str, list[float]] = {metric: [] for metric in CONCURRENCY_METRICS}
    repeats: list[list[RequestSample]] = []
    shards: list[list[dict[str, Any]]] = []
    reasons: list[str] = []
    for repeat in range(plan.repeats):
        sized = await concurrency_prompts(ctx, level, concurrency)
        requests = [
            StreamRequest(
                prompt=prompt.text,
                max_tokens=concurrency.output_tokens,
                api=plan.api,
                temperature=plan.temperature,
                thinking=plan.thinking,
            )
            for prompt in sized
        ]
        ctx.check()
        result = await asyncio.to_thread(
            run_sharded,
            ctx.base_url,
            ctx.model,
            requests,
            cpus=cpus,
            processes=min(client.processes, level),
            timeout_s=ctx.timeout_s(),
        )
        ctx.record(result.samples)
        repeats.append(result.samples)
        shards.append([asdict(report) | {"cpu_fraction": report.cpu_fraction} for report in result.shards])
        reasons += [f"repeat {repeat}: {reason}" for reason in result.reasons]
        ctx.on_step(f"concurrency {level} ({client.processes} client processes): repeat {repeat + 1}")
        if any(sample.ok for sample in result.samples):
            for metric, value in metrics.concurrency_figures(result.samples).items():
                if not math.isnan(value):
                    values[metric].append(value)
    if not values["aggregate_tok_s"]:
        errors = sorted({sample.error or "no content" for group in repeats for sample in group if not sample.ok})
        raise MeasurementError(f"{point}: every request failed ({'; '.join(errors)[:500]})")
    params = {
        "api": plan.api,
        "temperature": plan.temperature,
        "thinking": plan.thinking,
        "repeats": plan.repeats,
        "concurrency": level,
        "workload": concurrency.workload,
        "prompt_tokens": concurrency.prompt_tokens,
        "output_tokens": concurrency.output_tokens,
        "unique_prefix": True,
        "client_processes": min(client.processes, level),
        "client_cpus": cpus,
        "client_clock": "CLOCK_MONOTONIC shared by every process",
        "client_shards": shards,
        "client_bound": bool(reasons),
        "client_bound_reasons": reasons,
    }
    figures = tuple(
        make_figure(
            KIND_CONCURRENCY,
            level,
            metric,
            "tok/s" if metric.endswith("tok_s") else "ms",
            values[metric],
            params=params,
            repeats=plan.repeats,
            workload=concurrency.workload,
        )
        for metric in CONCURRENCY_METRICS
        if values[metric]
    )
    return Measurement(figures=figures, samples={point: repeats})
