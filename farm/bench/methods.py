"""One async function per measurement of the method (the README's "What it measures"): requests in, figures out.

Each function sends its requests through a fresh `StreamClient` (one session per measurement, its
connector limited to the measurement's concurrency), turns samples into figures with `farm.bench.metrics`,
and returns a `Measurement`: the figures (one value per repeat that succeeded), the raw samples per repeat,
and the hashes of prompts and outputs. The untimed calls (/tokenize, /metrics, /version, the model list)
go through the `MeasureContext`'s control session, never inside a timed window.

Prefill, short TTFT and prefix-cache requests use the completions API, so the prompt the server counts is the
exact prompt that was sized; decode and concurrency use the plan's API (chat by default, thinking off).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import openai

from farm.bench import metrics
from farm.bench.capture import KernelStamps
from farm.bench.multiproc import monotonic_offset_ns
from farm.bench.prompts import WORKLOAD_PROMPTS
from farm.bench.promptsize import (
    FILLERS,
    SIZED_BY_TOKENIZE,
    SIZED_BY_USAGE,
    SizedPrompt,
    TokenCounter,
    TokenizeEndpoint,
    UsageCounter,
    detect_counter,
    sized_prompt,
    unique_prefix,
)
from farm.bench.records import (
    CONCURRENCY_METRICS,
    KIND_CONCURRENCY,
    KIND_DECODE,
    KIND_PREFILL,
    KIND_PREFIX_CACHE,
    KIND_SHORT_TTFT,
    KIND_SPEC_DECODE,
    Figure,
    RequestSample,
    figure_key,
)
from farm.bench.stream import Api, StreamClient, StreamRequest
from farm.engines.base import OwnTiming, PrefixCacheReset, ServerTiming
from farm.errors import MeasurementError
from farm.recipes.sweep import ConcurrencyPlan, DecodePlan, SweepPlan

PREFILL_HEAD = "Read the following notes, then answer with a single word.\n\n"
SHORT_TTFT_HEAD = "Say hello.\n"
PREFIX_CACHE_ALONE_TOKENS = 1024
"""Prompt length for a prefix-cache measurement when the plan has no prefill to reuse a prompt from."""
WARMUP_OUTPUT_TOKENS = 16
"""Enough tokens to take every path of the engine (prefill, decode, the stream's end) once."""
PREFIX_WARM_TOKENS = 16
"""The decode prompt is sent once with this many output tokens before its repeats, to warm its prefix."""
CONTROL_TIMEOUT_S = 60.0
"""Untimed calls (/tokenize of a long prompt, /metrics, /version, the model list) get at least this long."""
SIZING_PARALLELISM = 8
"""/tokenize calls in flight at once while sizing the prompts of a concurrency level."""


class MeasureContext:
    """What every measurement shares: the server, the plan, the deadline, the stop flag, the counts."""

    def __init__(
        self,
        base_url: str,
        model: str,
        plan: SweepPlan,
        control: aiohttp.ClientSession,
        *,
        deadline_ns: int,
        should_stop: Callable[[], bool] = lambda: False,
        on_step: Callable[[str], None] = lambda message: None,
        counter_names: Mapping[str, str] | None = None,
        counter_families: Mapping[str, Mapping[str, str]] | None = None,
        on_window_edge: Callable[[], None] = lambda: None,
        cache_resets: Mapping[str, str | None] | None = None,
        cache_resetters: Mapping[str, str] | None = None,
        own_timing: OwnTiming | None = None,
    ) -> None:
        """`own_timing`: how to ask the engine for its own timing of a request (its table line's), asked beside
        the client's two-point decode as the server's truth; None: it reports none apart.
        `counter_names` maps the farm's counter names (vLLM's, metrics.TOKEN_COUNTERS) to the engine's; None
        learns them from the first /metrics page whose names carry a prefix of `counter_families`.
        `on_window_edge` is called just before timed requests go out and just after they end (it must not block:
        the worker's energy sampler takes a reading then, farm.worker.energy).
        `cache_resets` maps a metric-name prefix to the path its engine empties its prefix cache at (None: it
        has none); `cache_resetters` maps one to the module of its engine's own reset procedure, used instead
        (farm.engines.registry.cache_resetters); the engine is known from its /metrics page."""
        self.on_window_edge = on_window_edge
        self.own_timing = own_timing
        self.counter_names = counter_names
        self.counter_families = counter_families or {}
        self.cache_resets = cache_resets or {}
        self.cache_resetters = cache_resetters or {}
        self.cold_fields: dict[str, Any] = {}
        """Body fields that make one request reuse no cache (an engine's own reset procedure says them, e.g.
        llama.cpp's `cache_prompt: false`): the requests of a measurement meant cold carry them."""
        self.engine_family: str | None = None
        """The metric-name prefix of the engine's /metrics page (e.g. `vllm:`), once one was read."""
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.plan = plan
        self.control = control
        self.deadline_ns = deadline_ns
        self.should_stop = should_stop
        self.on_step = on_step
        self.total_requests = 0
        self.failed_requests = 0
        self.prompt_sized_by = SIZED_BY_TOKENIZE
        """How prompts are counted (farm.bench.promptsize): set by `detect_sizing`."""
        self._usage_counts: dict[tuple[str, str], int] = {}
        self._usage_sized: dict[tuple[int, str, str, str], SizedPrompt] = {}

    async def detect_sizing(self) -> str:
        """Count prompts with the engine's /tokenize where it answers, else from usage; returns which."""
        self.check()
        has_endpoint = await detect_counter(
            TokenizeEndpoint(self.control, self.base_url, self.model, timeout_s=self.control_timeout_s())
        )
        self.prompt_sized_by = SIZED_BY_TOKENIZE if has_endpoint else SIZED_BY_USAGE
        return self.prompt_sized_by

    async def unique_sized(
        self, tokens: int, head: str, filler: str, api: Api = "completions", hint_chars: int | None = None
    ) -> SizedPrompt:
        """A prompt of exactly `tokens` tokens: a prefix no request began with, `head`, the filler cut to size.

        Sized by usage, the cut is found once per (length, head, filler, API) under a probe prefix of the same
        shape (cached), and the prompt sent carries a fresh one: the probes' prompts are in the engine's prefix
        cache, the sent prompt shares none of their blocks. Its count is then the usage of the measured request.
        """
        self.check()
        if self.prompt_sized_by != SIZED_BY_USAGE:
            return await sized_prompt(
                self.counter(api), tokens, head=unique_prefix() + head, filler=filler, hint_chars=hint_chars
            )
        key = (tokens, head, filler, api)
        probe = self._usage_sized.get(key)
        if probe is None:
            probe_prefix = unique_prefix()
            probe = await sized_prompt(
                self.counter(api), tokens, head=probe_prefix + head, filler=filler, hint_chars=hint_chars
            )
            self._usage_sized[key] = probe
        probe_prefix_length = len(unique_prefix())
        text = unique_prefix() + probe.text[probe_prefix_length:]
        return SizedPrompt(text=text, tokens=tokens, round_trips=0, filler_chars=probe.filler_chars)

    def check(self) -> None:
        """Raise MeasurementError when the run was asked to stop or its time budget is spent."""
        if self.should_stop():
            raise MeasurementError("stopped")
        if time.monotonic_ns() >= self.deadline_ns:
            raise MeasurementError(f"the sweep's time budget of {self.plan.time_budget_s:g} s is spent")

    def timeout_s(self) -> float:
        """The request timeout, cut to what is left of the time budget."""
        left = (self.deadline_ns - time.monotonic_ns()) / metrics.NS_PER_S
        return max(0.001, min(self.plan.request_timeout_s, left))

    def control_timeout_s(self) -> float:
        """The limit of an untimed call: not below CONTROL_TIMEOUT_S, cut to what is left of the budget."""
        left = (self.deadline_ns - time.monotonic_ns()) / metrics.NS_PER_S
        return max(0.001, min(max(self.plan.request_timeout_s, CONTROL_TIMEOUT_S), left))

    def client(self, concurrency: int = 1) -> StreamClient:
        return StreamClient(
            self.base_url, self.model, concurrency=concurrency, request_timeout_s=self.plan.request_timeout_s
        )

    def counter(self, api: Api = "completions") -> TokenCounter:
        """The server's token counter as `detect_sizing` found it: its /tokenize, or usage of one-token requests."""
        if self.prompt_sized_by == SIZED_BY_USAGE:
            return UsageCounter(
                self.control,
                self.base_url,
                self.model,
                api=api,
                thinking=self.plan.thinking,
                timeout_s=self.control_timeout_s(),
                cache=self._usage_counts,
            )
        return TokenizeEndpoint(
            self.control,
            self.base_url,
            self.model,
            api=api,
            thinking=self.plan.thinking,
            timeout_s=self.control_timeout_s(),
        )

    def record(self, samples: Sequence[RequestSample]) -> None:
        self.total_requests += len(samples)
        self.failed_requests += sum(1 for sample in samples if not sample.ok)

    async def send(self, client: StreamClient, request: StreamRequest) -> RequestSample:
        """One timed request, checked against the stop flag and the budget first, and counted."""
        self.check()
        self.on_window_edge()
        sample = await client.stream(request, timeout_s=self.timeout_s())
        self.on_window_edge()
        self.record([sample])
        return sample

    async def get_json(self, path: str) -> Any:
        """An untimed GET of a JSON document (e.g. /version)."""
        async with asyncio.timeout(self.control_timeout_s()):
            async with self.control.get(self.base_url + path) as response:
                response.raise_for_status()
                return await response.json(content_type=None)

    async def counters(self) -> dict[str, float] | None:
        """The engine's Prometheus counters (GET /metrics, summed over label sets), with the engine's counters also
        under the farm's names (`counter_names`); None without /metrics."""
        try:
            async with asyncio.timeout(self.control_timeout_s()):
                async with self.control.get(self.base_url + "/metrics") as response:
                    if response.status != 200:
                        return None
                    text = await response.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        counters = metrics.parse_prometheus_counters(text)
        if self.engine_family is None:
            self.engine_family = next(
                (prefix for prefix in self.counter_families if any(name.startswith(prefix) for name in counters)),
                None,
            )
        if self.counter_names is None:
            self.counter_names = metrics.counter_names_for(counters, self.counter_families)
        return metrics.canonical_counters(counters, self.counter_names or {})

    async def reset_prefix_cache(self, *, per_request: bool = False) -> str:
        """Empty the engine's prefix cache before a measurement that must start cold, where its engine offers a
        way (`cache_resetters`, `cache_resets`); returns what was done, for the figures' params (never raises).

        `per_request`: the measurement's requests are each meant cold and carry `cold_fields` (set here from
        the engine's procedure); the text then says so. A conversation, whose later turns are meant to reuse
        the earlier ones, sends none."""
        if self.engine_family is None:
            await self.counters()
        module = self.cache_resetters.get(self.engine_family or "")
        if module is not None:
            procedure = importlib.import_module(module).reset_prefix_cache
            reset: PrefixCacheReset = await procedure(self.control, self.base_url, self.control_timeout_s())
            self.cold_fields = dict(reset.cold_request_fields)
            if per_request and self.cold_fields:
                fields = ", ".join(f"{name}: {json.dumps(value)}" for name, value in self.cold_fields.items())
                return f"{reset.done}; each request sent with {fields}"
            return reset.done if reset.emptied else f"{reset.done}; cold by unique prefixes"
        path = self.cache_resets.get(self.engine_family or "")
        if path is None:
            engine = f"the {self.engine_family}* engine" if self.engine_family else "an engine without /metrics"
            return f"none: {engine} offers no reset the farm knows; cold by unique prefixes"
        try:
            async with asyncio.timeout(self.control_timeout_s()):
                async with self.control.post(self.base_url + path) as response:
                    if response.status >= 300:
                        return f"POST {path} answered HTTP {response.status}; cold by unique prefixes"
        except (aiohttp.ClientError, TimeoutError) as error:
            return f"POST {path} failed ({type(error).__name__}); cold by unique prefixes"
        return f"POST {path}"


@dataclass(frozen=True)
class Measurement:
    """The outcome of one measurement.

    `samples` is keyed by the measurement point `<kind>/<point>`, the start of each of its figures' keys: one
    list of samples per repeat (the 14 figures of a concurrency point share them). `absent` maps the key of
    each figure that no repeat could measure to the reason; it has no figure.
    """

    figures: tuple[Figure, ...] = ()
    samples: dict[str, list[list[RequestSample]]] = field(default_factory=dict)
    prompt_sha256: dict[str, str] = field(default_factory=dict)
    output_sha256: dict[str, str] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)


def point_of(kind: str, point: str | int) -> str:
    return f"{kind}/{point}"


def make_figure(
    kind: str,
    point: str | int,
    metric: str,
    unit: str,
    values: Sequence[float],
    *,
    params: dict[str, Any],
    repeats: int,
    workload: str | None = None,
) -> Figure:
    """A figure from its per-repeat values; MeasurementError when no repeat produced a value."""
    key = figure_key(kind, point, metric)
    if not values:
        raise MeasurementError(f"{key}: every repeat failed")
    return Figure(
        kind=kind,
        key=key,
        metric=metric,
        unit=unit,
        values=tuple(values),
        summary=metrics.summarize(values),
        workload=workload,
        params=dict(params),
        requested_repeats=repeats,
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _outputs_sha256(samples: Sequence[RequestSample]) -> str:
    """One hash over the outputs of several requests, in order (a failed request contributes its error)."""
    digest = hashlib.sha256()
    for sample in samples:
        digest.update((sample.text_sha256 or f"error: {sample.error}").encode())
    return digest.hexdigest()


def _first_failure(point: str, samples: Sequence[RequestSample]) -> MeasurementError:
    errors = sorted({sample.error or "no content" for sample in samples if not sample.ok})
    return MeasurementError(f"{point}: every request failed ({'; '.join(errors)[:500]})")


def _unmeasured(
    point: str, key: str, repeats: list[list[RequestSample]], reasons: dict[str, str], prompt: str
) -> Measurement:
    """A measurement whose requests answered but whose figure is undefined in every repeat: no figure, the
    reason in `absent`, the samples kept."""
    return Measurement(
        samples={point: repeats},
        prompt_sha256={point: _sha256(prompt)},
        absent={key: "; ".join(sorted(set(reasons.values())))},
    )


def _request_time_s(sample: RequestSample) -> float:
    return metrics.e2e_s(sample)


def common_params(plan: SweepPlan, api: Api) -> dict[str, Any]:
    return {
        "api": api,
        "temperature": plan.temperature,
        "thinking": plan.thinking,
        "repeats": plan.repeats,
        "ignore_eos": True,
        "request_timeout_s": plan.request_timeout_s,
    }


async def warm_up(ctx: MeasureContext) -> None:
    """`plan.warmup_requests` short requests, sent and discarded (they still count as requests)."""
    async with ctx.client() as client:
        for _ in range(ctx.plan.warmup_requests):
            request = StreamRequest(
                prompt=WORKLOAD_PROMPTS["code"],
                max_tokens=WARMUP_OUTPUT_TOKENS,
                api=ctx.plan.api,
                temperature=ctx.plan.temperature,
                thinking=ctx.plan.thinking,
            )
            await ctx.send(client, request)


async def measure_decode(ctx: MeasureContext, workload: str, decode: DecodePlan) -> Measurement:
    """Two-point decode on one workload, and its speculative-decoding figures when the engine counts drafts.

    The prompt is sent once first (its prefix is then cached); each repeat sends the short and then the long
    request on it, one after the other. t is request start to last content chunk, n is usage's count.
    """
    plan = ctx.plan
    prompt = WORKLOAD_PROMPTS[workload]
    point = point_of(KIND_DECODE, workload)

    def request(tokens: int) -> StreamRequest:
        return StreamRequest(
            prompt=prompt,
            max_tokens=tokens,
            api=plan.api,
            temperature=plan.temperature,
            thinking=plan.thinking,
        )

    decode_values: list[float] = []
    decode_absent: dict[str, str] = {}
    spec_values: dict[str, list[float]] = {"acceptance_rate": [], "mean_acceptance_length": []}
    server_counts: list[dict[str, float]] = []
    repeats: list[list[RequestSample]] = []
    async with ctx.client() as client:
        await ctx.send(client, request(PREFIX_WARM_TOKENS))
        for repeat in range(plan.repeats):
            before = await ctx.counters()
            short = await ctx.send(client, request(decode.short_output_tokens))
            long = await ctx.send(client, request(decode.long_output_tokens))
            after = await ctx.counters()
            repeats.append([short, long])
            ctx.on_step(f"decode {workload}: repeat {repeat + 1} of {plan.repeats}")
            if not (short.ok and long.ok):
                continue
            try:
                decode_values.append(
                    metrics.two_point_decode_tok_s(
                        short.completion_tokens or 0,
                        _request_time_s(short),
                        long.completion_tokens or 0,
                        _request_time_s(long),
                    )
                )
            except MeasurementError as undefined:  # both answered, but gave no difference to time
                decode_absent[f"repeat {repeat + 1}"] = str(undefined)
                continue
            if before is not None and after is not None:
                server_counts.append(metrics.counter_deltas(before, after, metrics.TOKEN_COUNTERS) or {})
            deltas = (
                metrics.counter_deltas(before, after, metrics.SPEC_DECODE_COUNTERS)
                if before is not None and after is not None
                else None
            )
            spec = metrics.spec_decode_figures(deltas) if deltas is not None else None
            if spec is not None:
                for name, value in spec.items():
                    spec_values[name].append(value)
    if not decode_values:
        if decode_absent:
            key = figure_key(KIND_DECODE, workload, "decode_tok_s")
            return _unmeasured(point, key, repeats, decode_absent, prompt)
        raise _first_failure(point, [sample for pair in repeats for sample in pair])
    own = await own_decode_report(ctx, prompt, decode) if ctx.own_timing is not None else None
    params = {
        **common_params(plan, plan.api),
        **({"server_report": own.params(sum(decode_values) / len(decode_values))} if own is not None else {}),
        "workload": workload,
        "short_output_tokens": decode.short_output_tokens,
        "long_output_tokens": decode.long_output_tokens,
        "prefix_warmed": True,
        "timing": "request start to last content chunk",
        "server_counter_deltas": server_counts,
        "usage_completion_tokens": [
            (pair[0].completion_tokens or 0) + (pair[1].completion_tokens or 0) for pair in repeats
        ],
    }
    figures = [
        make_figure(
            KIND_DECODE,
            workload,
            "decode_tok_s",
            "tok/s",
            decode_values,
            params={**params, "absent_in": decode_absent} if decode_absent else params,
            repeats=plan.repeats,
            workload=workload,
        )
    ]
    samples = {point: repeats}
    if spec_values["acceptance_rate"]:
        spec_point = point_of(KIND_SPEC_DECODE, workload)
        for metric, unit in (("acceptance_rate", "fraction"), ("mean_acceptance_length", "tokens")):
            figures.append(
                make_figure(
                    KIND_SPEC_DECODE,
                    workload,
                    metric,
                    unit,
                    spec_values[metric],
                    params={**params, "source": "deltas of /metrics counters over each repeat"},
                    repeats=plan.repeats,
                    workload=workload,
                )
            )
        samples[spec_point] = repeats
    ok_long = [pair[1] for pair in repeats if pair[1].ok]
    outputs = {f"{point}/long": ok_long[0].text_sha256 or ""} if ok_long else {}
    return Measurement(
        figures=tuple(figures), samples=samples, prompt_sha256={point: _sha256(prompt)}, output_sha256=outputs
    )


@dataclass(frozen=True)
class OwnDecodeReport:
    """The engine's own timing of the decode pair (short, long), asked through its native API."""

    source: str
    short: ServerTiming
    long: ServerTiming

    def decode_tok_s(self) -> float:
        """The two-point decode rate by the engine's own counts and durations (its prefill cancels as the
        client's does)."""
        return metrics.two_point_decode_tok_s(
            self.short.output_tokens, self.short.decode_s, self.long.output_tokens, self.long.decode_s
        )

    def params(self, client_tok_s: float) -> dict[str, Any]:
        """What the decode figure says of it: the engine's figures, and the client's rate over the engine's."""
        server = self.decode_tok_s()
        return {
            "source": self.source,
            "decode_tok_s": server,
            "long_eval_tok_s": self.long.output_tokens / self.long.decode_s,
            "output_tokens": [self.short.output_tokens, self.long.output_tokens],
            "decode_s": [self.short.decode_s, self.long.decode_s],
            "prompt_tokens": self.long.prompt_tokens,
            "client_over_server": client_tok_s / server,
        }


async def own_decode_report(ctx: MeasureContext, prompt: str, decode: DecodePlan) -> OwnDecodeReport | None:
    """Ask the engine for its own timing of the decode pair (after the client's repeats, on the same prompt);
    None where it does not answer or its answer carries none (the decode figure stands on the client's)."""
    own = ctx.own_timing
    if own is None:
        return None
    timings: list[ServerTiming] = []
    for tokens in (decode.short_output_tokens, decode.long_output_tokens):
        body = own.body(ctx.model, prompt, tokens, ctx.plan.temperature)
        try:
            async with asyncio.timeout(ctx.control_timeout_s()):
                async with ctx.control.post(ctx.base_url + own.path, json=body) as response:
                    if response.status != 200:
                        return None
                    document = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        timing = own.read(document) if isinstance(document, dict) else None
        if timing is None:
            return None
        timings.append(timing)
    report = OwnDecodeReport(own.source, timings[0], timings[1])
    try:
        report.decode_tok_s()
    except MeasurementError:
        return None  # no difference to time between the two
    return report


@dataclass
class CacheWatch:
    """The prefix cache over one measurement: how it was made cold, and the engine's hit rate per repeat."""

    reset: str | None = None
    """What was done to start cold (ctx.reset_prefix_cache), None for a measurement meant warm."""
    hit_rates: list[float] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)
    """Where the hit rates came from: the engine's /metrics counters, or the cached tokens its answers report."""

    def params(self, *, meant_cold: bool) -> dict[str, Any]:
        """The params that say the cache state: the reset, the hit rates seen, and a flag when a measurement
        meant cold was served from the cache."""
        out: dict[str, Any] = {"prefix_cache_hit_rates": list(self.hit_rates)}
        if meant_cold:
            out["cache_reset"] = self.reset
            warm = any(rate > COLD_HIT_RATE_LIMIT for rate in self.hit_rates)
            out["cold_but_warm"] = warm
        return out

    def figure(self, kind: str, point: str | int, params: dict[str, Any], repeats: int) -> Figure | None:
        """`<kind>/<point>/prefix_cache_hit_rate` from the engine's counters; None where it counts none."""
        if not self.hit_rates:
            return None
        return make_figure(
            kind,
            point,
            "prefix_cache_hit_rate",
            "fraction",
            self.hit_rates,
            params={**params, "source": "; ".join(sorted(self.sources))},
            repeats=repeats,
        )


HIT_RATE_FROM_COUNTERS = "the engine's prefix-cache counters around each repeat"
HIT_RATE_FROM_USAGE = "cached tokens the engine's answer reports (usage.prompt_tokens_details, timings.cache_n)"

COLD_HIT_RATE_LIMIT = 0.1
"""A measurement meant cold whose engine says more of its prompt than this came from the cache is flagged
(`cold_but_warm`): a unique prefix leaves at most a BOS token or two in common, far below it."""


async def watched_send(
    ctx: MeasureContext, client: StreamClient, request: StreamRequest, watch: CacheWatch
) -> RequestSample:
    """One timed request between two readings of the engine's counters (untimed), its hit rate noted."""
    before = await ctx.counters()
    sample = await ctx.send(client, request)
    after = await ctx.counters()
    rate = metrics.prefix_cache_hit_rate(before, after) if before is not None and after is not None else None
    if rate is not None:
        watch.hit_rates.append(rate)
        watch.sources.add(HIT_RATE_FROM_COUNTERS)
    elif sample.ok and sample.cached_tokens is not None and sample.prompt_tokens:
        watch.hit_rates.append(min(sample.cached_tokens / sample.prompt_tokens, 1.0))
        watch.sources.add(HIT_RATE_FROM_USAGE)
    return sample


async def _unique_prompt_requests(
    ctx: MeasureContext, point: str, prompt_tokens: int, head: str, output_tokens: int, label: str
) -> tuple[list[list[RequestSample]], dict[str, str], str, CacheWatch]:
    """One request per repeat on a prompt of exactly `prompt_tokens` tokens, each with its own unique prefix
    (no cache hit), the engine's prefix cache reset first where it can be. Returns the samples (one list per
    repeat), the prompts' hashes, the first prompt and what the cache did."""
    plan = ctx.plan
    repeats: list[list[RequestSample]] = []
    prompts: dict[str, str] = {}
    first_prompt = ""
    hint: int | None = None
    watch = CacheWatch()
    async with ctx.client() as client:
        for repeat in range(plan.repeats):
            sized = await ctx.unique_sized(prompt_tokens, head, FILLERS["prose"], hint_chars=hint)
            if repeat == 0:
                watch.reset = await ctx.reset_prefix_cache(per_request=True)
            hint = sized.filler_chars
            first_prompt = first_prompt or sized.text
            prompts[f"{point}#{repeat}"] = sized.sha256
            request = StreamRequest(
                prompt=sized.text,
                max_tokens=output_tokens,
                api="completions",
                temperature=plan.temperature,
                extra=ctx.cold_fields,
            )
            repeats.append([await watched_send(ctx, client, request, watch)])
            ctx.on_step(f"{label}: repeat {repeat + 1} of {plan.repeats}")
    return repeats, prompts, first_prompt, watch


async def measure_prefill(ctx: MeasureContext, prompt_tokens: int, output_tokens: int) -> tuple[Measurement, str]:
    """TTFT on a prompt of exactly `prompt_tokens` tokens with a unique prefix each repeat (no cache hit).

    Returns the measurement and the first repeat's prompt, which the prefix-cache measurement sends again.
    """
    plan = ctx.plan
    point = point_of(KIND_PREFILL, prompt_tokens)
    repeats, prompts, first_prompt, watch = await _unique_prompt_requests(
        ctx, point, prompt_tokens, PREFILL_HEAD, output_tokens, f"prefill {prompt_tokens}"
    )
    rates: list[float] = []
    ttfts_ms: list[float] = []
    rate_absent: dict[str, str] = {}
    for repeat, (sample,) in enumerate(repeats):
        if sample.ok:
            ttft = metrics.ttft_s(sample)
            ttfts_ms.append(ttft * metrics.MS_PER_S)
            try:
                rates.append(metrics.prefill_tok_s(sample.prompt_tokens or prompt_tokens, ttft))
            except MeasurementError as undefined:  # a first token stamped at the request's own start
                rate_absent[f"repeat {repeat + 1}"] = str(undefined)
    if not ttfts_ms:
        raise _first_failure(point, [sample for group in repeats for sample in group])
    params = {
        **common_params(plan, "completions"),
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "unique_prefix": True,
        "prompt_sized_by": ctx.prompt_sized_by,
        **watch.params(meant_cold=True),
    }
    figures = [make_figure(KIND_PREFILL, prompt_tokens, "ttft_ms", "ms", ttfts_ms, params=params, repeats=plan.repeats)]
    hit_rate = watch.figure(KIND_PREFILL, prompt_tokens, params, plan.repeats)
    if hit_rate is not None:
        figures.append(hit_rate)
    absent: dict[str, str] = {}
    if rates:
        rate_params = {**params, "absent_in": rate_absent} if rate_absent else params
        figures.insert(
            0,
            make_figure(
                KIND_PREFILL, prompt_tokens, "prefill_tok_s", "tok/s", rates, params=rate_params, repeats=plan.repeats
            ),
        )
    else:
        absent[figure_key(KIND_PREFILL, prompt_tokens, "prefill_tok_s")] = "; ".join(sorted(set(rate_absent.values())))
    measurement = Measurement(figures=tuple(figures), samples={point: repeats}, prompt_sha256=prompts, absent=absent)
    return measurement, first_prompt


async def measure_short_ttft(ctx: MeasureContext, prompt_tokens: int) -> Measurement:
    """TTFT on a short prompt of exactly `prompt_tokens` tokens, a unique prefix each repeat."""
    plan = ctx.plan
    point = point_of(KIND_SHORT_TTFT, prompt_tokens)
    repeats, prompts, _, watch = await _unique_prompt_requests(
        ctx, point, prompt_tokens, SHORT_TTFT_HEAD, 1, "short TTFT"
    )
    values = [metrics.ttft_s(sample) * metrics.MS_PER_S for (sample,) in repeats if sample.ok]
    if not values:
        raise _first_failure(point, [sample for group in repeats for sample in group])
    params = {
        **common_params(plan, "completions"),
        "prompt_tokens": prompt_tokens,
        "output_tokens": 1,
        "prompt_sized_by": ctx.prompt_sized_by,
        **watch.params(meant_cold=True),
    }
    figure = make_figure(KIND_SHORT_TTFT, prompt_tokens, "ttft_ms", "ms", values, params=params, repeats=plan.repeats)
    hit_rate = watch.figure(KIND_SHORT_TTFT, prompt_tokens, params, plan.repeats)
    figures = (figure,) if hit_rate is None else (figure, hit_rate)
    return Measurement(figures=figures, samples={point: repeats}, prompt_sha256=prompts)


async def measure_prefix_cache(ctx: MeasureContext, prompt: str | None, prompt_tokens: int | None) -> Measurement:
    """TTFT of a long prompt sent again, served from the prefix cache.

    `prompt` is the first prefill prompt, sent once more, untimed, right before the repeats (the prompts measured
    since may have evicted it). Without one, a prompt of `PREFIX_CACHE_ALONE_TOKENS` is sized and sent once,
    untimed, to fill the cache. The engine's hit rate over each repeat is its figure `prefix_cache_hit_rate`.
    """
    plan = ctx.plan
    async with ctx.client() as client:
        if prompt is None or prompt_tokens is None:
            prompt_tokens = PREFIX_CACHE_ALONE_TOKENS
            sized = await ctx.unique_sized(prompt_tokens, PREFILL_HEAD, FILLERS["prose"])
            prompt = sized.text
            await ctx.send(client, StreamRequest(prompt=prompt, max_tokens=1, api="completions"))
        else:
            # Sent again right before, untimed: what came between (longer prompts) may have evicted it.
            await ctx.send(client, StreamRequest(prompt=prompt, max_tokens=1, api="completions"))
        point = point_of(KIND_PREFIX_CACHE, prompt_tokens)
        values: list[float] = []
        repeats: list[list[RequestSample]] = []
        watch = CacheWatch()
        for repeat in range(plan.repeats):
            request = StreamRequest(prompt=prompt, max_tokens=1, api="completions", temperature=plan.temperature)
            sample = await watched_send(ctx, client, request, watch)
            repeats.append([sample])
            ctx.on_step(f"prefix cache: repeat {repeat + 1} of {plan.repeats}")
            if sample.ok:
                values.append(metrics.ttft_s(sample) * metrics.MS_PER_S)
    if not values:
        raise _first_failure(point, [sample for group in repeats for sample in group])
    params = {
        **common_params(plan, "completions"),
        "prompt_tokens": prompt_tokens,
        "output_tokens": 1,
        "cache_state": "warm: the same prompt was sent before",
        **watch.params(meant_cold=False),
    }
    figure = make_figure(KIND_PREFIX_CACHE, prompt_tokens, "ttft_ms", "ms", values, params=params, repeats=plan.repeats)
    hit_rate = watch.figure(KIND_PREFIX_CACHE, prompt_tokens, params, plan.repeats)
    figures = (figure,) if hit_rate is None else (figure, hit_rate)
    return Measurement(figures=figures, samples={point: repeats}, prompt_sha256={point: _sha256(prompt)})


async def concurrency_prompts(ctx: MeasureContext, level: int, concurrency: ConcurrencyPlan) -> list[SizedPrompt]:
    """`level` prompts of exactly `prompt_tokens` tokens, each with a unique prefix (no shared cache)."""
    head = WORKLOAD_PROMPTS[concurrency.workload] + "\n\nContext:\n"
    filler = FILLERS[concurrency.workload]
    first = await ctx.unique_sized(concurrency.prompt_tokens, head, filler, ctx.plan.api)
    gate = asyncio.Semaphore(SIZING_PARALLELISM)

    async def one() -> SizedPrompt:
        async with gate:
            return await ctx.unique_sized(
                concurrency.prompt_tokens, head, filler, ctx.plan.api, hint_chars=first.filler_chars
            )

    rest = await asyncio.gather(*(one() for _ in range(level - 1)))
    return [first, *rest]


class ConcurrencyRounds:
    """The repeats of one concurrency level as they come in, and the measurement they make: shared by the
    in-process path here and the multi-process one (`farm.bench.sharded`)."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.point = point_of(KIND_CONCURRENCY, level)
        self.values: dict[str, list[float]] = {metric: [] for metric in CONCURRENCY_METRICS}
        self.absent: dict[str, dict[str, str]] = {metric: {} for metric in CONCURRENCY_METRICS}
        self.repeats: list[list[RequestSample]] = []
        self.prompts: dict[str, str] = {}

    def add(self, samples: list[RequestSample]) -> None:
        """One repeat's samples: its figures join the others; what it could not measure is noted with why."""
        self.repeats.append(samples)
        if any(sample.ok for sample in samples):
            round_figures = metrics.concurrency_figures(samples)
            for metric, value in round_figures.values.items():
                self.values[metric].append(value)
            for metric, reason in round_figures.absent.items():
                self.absent[metric][f"repeat {len(self.repeats)}"] = reason

    def measurement(self, plan: SweepPlan, concurrency: ConcurrencyPlan, params: dict[str, Any]) -> Measurement:
        """The figures of every metric some repeat measured; a metric some repeats could not measure keeps the
        others' values and says why in its params; one that no repeat could measure has no figure, only its
        reason in `absent`. MeasurementError when every request failed."""
        values, absent, level = self.values, self.absent, self.level
        if not any(values.values()):
            raise _first_failure(self.point, [sample for group in self.repeats for sample in group])
        figures = tuple(
            make_figure(
                KIND_CONCURRENCY,
                level,
                metric,
                "tok/s" if metric.endswith("tok_s") else "ms",
                values[metric],
                params={**params, "absent_in": absent[metric]} if absent[metric] else params,
                repeats=plan.repeats,
                workload=concurrency.workload,
            )
            for metric in CONCURRENCY_METRICS
            if values[metric]
        )
        missing = {
            figure_key(KIND_CONCURRENCY, level, metric): "; ".join(sorted(set(absent[metric].values())))
            or "no repeat measured it"
            for metric in CONCURRENCY_METRICS
            if not values[metric]
        }
        outputs = {self.point: _outputs_sha256([sample for group in self.repeats for sample in group])}
        return Measurement(
            figures=figures,
            samples={self.point: self.repeats},
            prompt_sha256=self.prompts,
            output_sha256=outputs,
            absent=missing,
        )


def concurrency_params(
    plan: SweepPlan, concurrency: ConcurrencyPlan, level: int, *, prompt_sized_by: str = SIZED_BY_TOKENIZE
) -> dict[str, Any]:
    """Every method parameter of a concurrency level."""
    return {
        **common_params(plan, plan.api),
        "concurrency": level,
        "workload": concurrency.workload,
        "prompt_tokens": concurrency.prompt_tokens,
        "output_tokens": concurrency.output_tokens,
        "unique_prefix": True,
        "prompt_sized_by": prompt_sized_by,
        "percentiles": "linear interpolation (numpy's default)",
        "itl": "gaps between successive content chunks",
    }


def concurrency_requests(
    plan: SweepPlan, concurrency: ConcurrencyPlan, sized: list[SizedPrompt]
) -> list[StreamRequest]:
    """One streaming request per sized prompt, as the plan asks."""
    return [
        StreamRequest(
            prompt=prompt.text,
            max_tokens=concurrency.output_tokens,
            api=plan.api,
            temperature=plan.temperature,
            thinking=plan.thinking,
        )
        for prompt in sized
    ]


async def measure_concurrency(ctx: MeasureContext, level: int, concurrency: ConcurrencyPlan) -> Measurement:
    """`level` streams started at once, each repeat with fresh prompts; figures per `CONCURRENCY_METRICS`."""
    plan = ctx.plan
    rounds = ConcurrencyRounds(level)
    stamps: list[dict[str, Any]] = []
    async with ctx.client(concurrency=level) as client:
        for repeat in range(plan.repeats):
            sized = await concurrency_prompts(ctx, level, concurrency)
            rounds.prompts[f"{rounds.point}#{repeat}"] = _sha256("\n".join(prompt.sha256 for prompt in sized))
            requests = concurrency_requests(plan, concurrency, sized)
            ctx.check()
            timeout = ctx.timeout_s()
            ctx.on_window_edge()
            with KernelStamps(ctx.base_url) as capture:  # the kernel's receive stamps where a capture can run
                samples = list(
                    await asyncio.gather(*(client.stream(request, timeout_s=timeout) for request in requests))
                )
            ctx.on_window_edge()
            restamped = capture.restamp(samples, monotonic_to_sample_ns=monotonic_offset_ns())
            samples = restamped.samples
            stamps.append(
                {
                    "timestamps": restamped.timestamps,
                    "reason": restamped.reason,
                    "client_lag": restamped.lag_summary(),
                    "client_bound_reasons": restamped.throttled,
                }
            )
            ctx.record(samples)
            rounds.add(samples)
            ctx.on_step(f"concurrency {level}: repeat {repeat + 1} of {plan.repeats}")
    params = concurrency_params(plan, concurrency, level, prompt_sized_by=ctx.prompt_sized_by)
    params["client_timestamps"] = stamps
    return rounds.measurement(plan, concurrency, params)


async def engine_version(ctx: MeasureContext) -> str | None:
    """The version the server reports at GET /version (vLLM: {"version": "0.x.y"}); None when it has none."""
    try:
        answer = await ctx.get_json("/version")
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    version = answer.get("version") if isinstance(answer, dict) else None
    return str(version) if version is not None else None


async def served_models(base_url: str, timeout_s: float) -> list[str]:
    """The model ids the server lists at /v1/models (untimed; through the `openai` client)."""
    async with openai.AsyncOpenAI(
        base_url=base_url.rstrip("/") + "/v1", api_key="not-needed", timeout=timeout_s, max_retries=0
    ) as client:
        try:
            page = await client.models.list()
        except openai.OpenAIError as error:
            raise MeasurementError(f"cannot list the served models: {error}") from error
        return [model.id for model in page.data]
