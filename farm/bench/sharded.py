"""The concurrency sweep with its streams sharded over several client processes (`farm.bench.multiproc`).

The same figures as `farm.bench.methods.measure_concurrency` (same prompts, same math), measured by N
processes on one clock; each figure's parameters say how many processes measured it, what each shard saw of
its own loop lag and CPU, whether the stamps were the kernel's (`client_timestamps`: per repeat, with the client's
lag in reading) and whether the client was the bottleneck (`client_bound`, with the reasons).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict
from typing import Any

from farm.bench.methods import (
    ConcurrencyRounds,
    MeasureContext,
    Measurement,
    concurrency_params,
    concurrency_prompts,
    concurrency_requests,
)
from farm.bench.multiproc import default_processes, run_sharded
from farm.recipes.sweep import ClientPlan, ConcurrencyPlan

__all__ = ["ClientPlan", "measure_concurrency_sharded"]


async def measure_concurrency_sharded(
    ctx: MeasureContext, level: int, concurrency: ConcurrencyPlan, client: ClientPlan
) -> Measurement:
    """`level` streams started at once from `client.processes` processes, `ctx.plan.repeats` times."""
    plan = ctx.plan
    cpus = default_processes(set(client.engine_cpus))
    rounds = ConcurrencyRounds(level)
    shards: list[list[dict[str, Any]]] = []
    reasons: list[str] = []
    stamps: list[dict[str, Any]] = []
    for repeat in range(plan.repeats):
        sized = await concurrency_prompts(ctx, level, concurrency)
        rounds.prompts[f"{rounds.point}#{repeat}"] = hashlib.sha256(
            "\n".join(prompt.sha256 for prompt in sized).encode()
        ).hexdigest()
        requests = concurrency_requests(plan, concurrency, sized)
        ctx.check()
        ctx.on_window_edge()
        result = await asyncio.to_thread(
            run_sharded,
            ctx.base_url,
            ctx.model,
            requests,
            cpus=cpus,
            processes=min(client.processes, level),
            timeout_s=ctx.timeout_s(),
        )
        ctx.on_window_edge()
        ctx.record(result.samples)
        rounds.add(list(result.samples))
        shards.append([asdict(report) | {"cpu_fraction": report.cpu_fraction} for report in result.shards])
        reasons += [f"repeat {repeat}: {reason}" for reason in result.reasons]
        stamps.append(
            {
                "timestamps": result.timestamps,
                "reason": result.timestamps_reason,
                "client_lag": result.client_lag,
                "notes": result.notes,
            }
        )
        ctx.on_step(f"concurrency {level} ({client.processes} client processes): repeat {repeat + 1}")
    params = {
        **concurrency_params(plan, concurrency, level, prompt_sized_by=ctx.prompt_sized_by),
        "client_processes": min(client.processes, level),
        "client_cpus": cpus,
        "client_clock": "CLOCK_MONOTONIC shared by every process",
        "client_shards": shards,
        "client_bound": bool(reasons),
        "client_bound_reasons": reasons,
        "client_timestamps": stamps,
        "client_bound_rule": "kernel stamps: the client's receive window closed; user stamps: a shard's loop lag "
        "or CPU over its limits",
    }
    return rounds.measurement(plan, concurrency, params)
