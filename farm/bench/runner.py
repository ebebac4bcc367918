"""The sweep runner: warm-up, then every measurement of a `SweepPlan`, within its time budget.

`run_sweep` reports its phase ("warming", then "measuring") and its progress (a fraction and a line), checks
`should_stop()` and the budget before every request, and returns a `SweepOutcome`, or raises
`MeasurementError` (every request of a measurement failed, the run was stopped, the budget is spent).
Partial failures are counted in the outcome, and the failed samples are kept with the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from farm.bench import methods
from farm.bench.conversations import measure_dataset
from farm.bench.depth import measure_depth
from farm.bench.load import OpenLoopPlan
from farm.bench.methods import MeasureContext, Measurement
from farm.bench.openloop import measure_open_loop
from farm.bench.records import Figure
from farm.bench.sharded import ClientPlan, measure_concurrency_sharded
from farm.engines.base import OwnTiming
from farm.engines.registry import cache_resets, cache_resetters, counter_families
from farm.errors import MeasurementError
from farm.recipes.sweep import SweepPlan

ENGINE_COUNTER_NAMES: Mapping[str, Mapping[str, str]] = counter_families()
"""Each engine's metric-name prefix and its counters under the farm's names (the table's; vLLM's own need no
mapping): a sweep that is not told its engine's names (an endpoint's) learns which family the server speaks from
its /metrics page, so the token-count cross-checks hold for llama.cpp and SGLang too. A worker passes its
adapter's own names instead."""

ENGINE_CACHE_RESETS: Mapping[str, str | None] = cache_resets()
"""Where each engine (by its metric-name prefix, the table's) empties its prefix cache; None: it has no such
call (the cold measurements then rely on unique prefixes, and say so)."""

ENGINE_CACHE_RESETTERS: Mapping[str, str] = cache_resetters()
"""The engines (by metric-name prefix) whose cold start is their own procedure, and its module: llama.cpp's slot
erase and `cache_prompt: false` (farm.engines.llamacpp.cache)."""

PHASE_WARMING = "warming"
PHASE_MEASURING = "measuring"


@dataclass(frozen=True)
class SweepOutcome:
    """Everything a sweep measured.

    `samples` maps a measurement point (`<kind>/<point>`, the start of its figures' keys, e.g. `decode/code`
    for `decode/code/decode_tok_s`) to one list per repeat of `RequestSample.to_json()` records; the figures
    of one point share its samples. `metrics_before` and `metrics_after` are the engine's /metrics counters
    around the sweep (None when it serves none).
    """

    figures: tuple[Figure, ...]
    samples: dict[str, list[list[dict[str, Any]]]]
    prompt_sha256: dict[str, str]
    output_sha256: dict[str, str]
    failed_requests: int
    total_requests: int
    engine_version: str | None
    metrics_before: dict[str, float] | None = None
    metrics_after: dict[str, float] | None = None
    absent: dict[str, str] = field(default_factory=dict)
    """The key of each figure the sweep could not measure, with the reason (it has no figure)."""
    prompt_sized_by: str | None = None
    """How the sized prompts were counted (farm.bench.promptsize: "/tokenize" or "usage.prompt_tokens")."""

    def samples_for(self, figure_key: str) -> list[list[dict[str, Any]]]:
        """The raw samples behind one figure."""
        point = figure_key.rsplit("/", 1)[0]
        return self.samples.get(point, [])

    def figure(self, key: str) -> Figure:
        for figure in self.figures:
            if figure.key == key:
                return figure
        raise KeyError(key)


def _ignore_phase(phase: str) -> None:
    """Default `on_phase`: nobody listens."""


def _ignore_progress(fraction: float, message: str) -> None:
    """Default `on_progress`: nobody listens."""


def _never_stop() -> bool:
    """Default `should_stop`: run to the end."""
    return False


def planned_steps(plan: SweepPlan, open_loop: OpenLoopPlan | None = None) -> int:
    """How many repeats the plan holds in all: the unit of progress (a rate sweep counts its most points)."""
    open_loop = open_loop if open_loop is not None else plan.open_loop
    points = 0
    if open_loop is not None:
        points += len(open_loop.rates_rps)
        if open_loop.find_max_rate is not None:
            points += max(1, open_loop.find_max_rate.max_points // plan.repeats)
    if plan.decode is not None:
        points += len(plan.decode.workloads)
    if plan.prefill is not None:
        points += len(plan.prefill.prompt_tokens)
    if plan.short_ttft is not None:
        points += 1
    if plan.prefix_cache is not None and plan.prefix_cache.enabled:
        points += 1
    if plan.concurrency is not None:
        points += len(plan.concurrency.levels)
    if plan.context_depth is not None:
        points += len(plan.context_depth.depths)
    if plan.dataset is not None:
        points += 1
    return points * plan.repeats


async def run_sweep(
    base_url: str,
    model: str,
    plan: SweepPlan,
    *,
    on_phase: Callable[[str], None] = _ignore_phase,
    on_progress: Callable[[float, str], None] = _ignore_progress,
    should_stop: Callable[[], bool] = _never_stop,
    open_loop: OpenLoopPlan | None = None,
    client: ClientPlan | None = None,
    counter_names: Mapping[str, str] | None = None,
    on_window_edge: Callable[[], None] | None = None,
    own_timing: OwnTiming | None = None,
) -> SweepOutcome:
    """Run every measurement of `plan` against the OpenAI-compatible server at `base_url` serving `model`.

    `open_loop` adds open-loop load at rates (and the rate sweep), after the concurrency levels; a `client`
    plan measures the concurrency levels from its load-generator processes (one or more, each watching its own
    loop lag and CPU, so a client-bound level is flagged). Both default to the plan's own sections
    (`plan.open_loop`, `plan.client`), so a worker running a job's plan measures them with no more arguments.
    `counter_names` maps the farm's counter names to the engine's (an adapter's `metric_names`); None learns
    them from the server's /metrics page (ENGINE_COUNTER_NAMES). `on_window_edge` is called, without blocking,
    as timed requests start and end (the worker's energy sampler reads the cards then). `own_timing`: how the
    engine reports its own timing of a request (its table line's), asked beside each two-point decode.
    """
    open_loop = open_loop if open_loop is not None else plan.open_loop
    client = client if client is not None else plan.client
    deadline_ns = time.monotonic_ns() + int(plan.time_budget_s * 1e9)
    total_steps = max(planned_steps(plan, open_loop), 1)
    done_steps = 0

    def on_step(message: str) -> None:
        nonlocal done_steps
        done_steps += 1
        on_progress(min(done_steps / total_steps, 1.0), message)

    results: list[Measurement] = []
    # Every control call sets its own limit (MeasureContext.control_timeout_s).
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as control:
        ctx = MeasureContext(
            base_url,
            model,
            plan,
            control,
            deadline_ns=deadline_ns,
            should_stop=should_stop,
            on_step=on_step,
            counter_names=counter_names,
            counter_families=ENGINE_COUNTER_NAMES,
            on_window_edge=on_window_edge or (lambda: None),
            cache_resets=ENGINE_CACHE_RESETS,
            cache_resetters=ENGINE_CACHE_RESETTERS,
            own_timing=own_timing,
        )
        ctx.check()
        served = await methods.served_models(base_url, ctx.control_timeout_s())
        if model not in served:
            raise MeasurementError(f"the server does not serve {model!r} (it serves {', '.join(served) or 'none'})")
        version = await methods.engine_version(ctx)
        metrics_before = await ctx.counters()
        await ctx.detect_sizing()

        on_phase(PHASE_WARMING)
        await methods.warm_up(ctx)

        on_phase(PHASE_MEASURING)
        on_progress(0.0, "measuring")
        if plan.decode is not None:
            for workload in plan.decode.workloads:
                results.append(await methods.measure_decode(ctx, workload, plan.decode))
        cache_prompt: str | None = None
        cache_tokens: int | None = None
        if plan.prefill is not None:
            for prompt_tokens in plan.prefill.prompt_tokens:
                measurement, prompt = await methods.measure_prefill(ctx, prompt_tokens, plan.prefill.output_tokens)
                results.append(measurement)
                if cache_prompt is None:
                    cache_prompt, cache_tokens = prompt, prompt_tokens
        if plan.short_ttft is not None:
            results.append(await methods.measure_short_ttft(ctx, plan.short_ttft.prompt_tokens))
        if plan.prefix_cache is not None and plan.prefix_cache.enabled:
            results.append(await methods.measure_prefix_cache(ctx, cache_prompt, cache_tokens))
        if plan.concurrency is not None:
            for level in plan.concurrency.levels:
                if client is not None:
                    results.append(await measure_concurrency_sharded(ctx, level, plan.concurrency, client))
                else:
                    results.append(await methods.measure_concurrency(ctx, level, plan.concurrency))
        if plan.context_depth is not None:
            for depth in plan.context_depth.depths:
                results.append(await measure_depth(ctx, depth, plan.context_depth))
        if plan.dataset is not None:
            results.append(await measure_dataset(ctx, plan.dataset))
        if open_loop is not None:
            results.append(await measure_open_loop(ctx, open_loop, plan.repeats))
        metrics_after = await ctx.counters()

    samples: dict[str, list[list[dict[str, Any]]]] = {}
    prompt_sha256: dict[str, str] = {}
    output_sha256: dict[str, str] = {}
    figures: list[Figure] = []
    absent: dict[str, str] = {}
    for measurement in results:
        figures.extend(measurement.figures)
        absent.update(measurement.absent)
        for point, repeats in measurement.samples.items():
            samples[point] = [[sample.to_json() for sample in group] for group in repeats]
        prompt_sha256.update(measurement.prompt_sha256)
        output_sha256.update(measurement.output_sha256)
    return SweepOutcome(
        figures=tuple(figures),
        samples=samples,
        prompt_sha256=prompt_sha256,
        output_sha256=output_sha256,
        failed_requests=ctx.failed_requests,
        total_requests=ctx.total_requests,
        engine_version=version,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        absent=absent,
        prompt_sized_by=ctx.prompt_sized_by,
    )
