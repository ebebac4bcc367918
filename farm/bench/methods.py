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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import openai

from farm.bench import metrics
from farm.bench.prompts import WORKLOAD_PROMPTS
from farm.bench.promptsize import FILLERS, SizedPrompt, TokenizeEndpoint, sized_prompt, unique_prefix
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
    ) -> None:
        """`counter_names` maps the farm's counter names (vLLM's, metrics.TOKEN_COUNTERS) to the engine's; None
        learns them from the first /metrics page whose names carry a prefix of `counter_families`.
        `on_window_edge` is called just before timed requests go out and just after they end (it must not block:
        the worker's energy sampler takes a reading then, farm.worker.energy)."""
        self.on_window_edge = on_window_edge
        self.counter_names = counter_names
        self.counter_families = counter_families or {}
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.plan = plan
        self.control = control
        self.deadline_ns = deadline_ns
        self.should_stop = should_stop
        self.on_step = on_step
        self.total_requests = 0
        self.failed_requests = 0

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

    def counter(self, api: Api = "completions") -> TokenizeEndpoint:
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
        if self.counter_names is None:
            self.counter_names = metrics.counter_names_for(counters, self.counter_families)
        return metrics.canonical_counters(counters, self.counter_names or {})


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


def _common_params(plan: SweepPlan, api: Api) -> dict[str, Any]:
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
    params = {
        **_common_params(plan, plan.api),
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


async def _sized(ctx: MeasureContext, tokens: int, head: str, filler: str, api: Api = "completions") -> SizedPrompt:
    ctx.check()
    return await sized_prompt(ctx.counter(api), tokens, head=head, filler=filler)


async def _unique_prompt_requests(
    ctx: MeasureContext, point: str, prompt_tokens: int, head: str, output_tokens: int, label: str
) -> tuple[list[list[RequestSample]], dict[str, str], str]:
    """One request per repeat on a prompt of exactly `prompt_tokens` tokens, each with its own unique prefix
    (no cache hit). Returns the samples (one list per repeat), the prompts' hashes and the first prompt."""
    plan = ctx.plan
    repeats: list[list[RequestSample]] = []
    prompts: dict[str, str] = {}
    first_prompt = ""
    hint: int | None = None
    async with ctx.client() as client:
        for repeat in range(plan.repeats):
            ctx.check()
            sized = await sized_prompt(
                ctx.counter(), prompt_tokens, head=unique_prefix() + head, filler=FILLERS["prose"], hint_chars=hint
            )
            hint = sized.filler_chars
            first_prompt = first_prompt or sized.text
            prompts[f"{point}#{repeat}"] = sized.sha256
            request = StreamRequest(
                prompt=sized.text, max_tokens=output_tokens, api="completions", temperature=plan.temperature
            )
            repeats.append([await ctx.send(client, request)])
            ctx.on_step(f"{label}: repeat {repeat + 1} of {plan.repeats}")
    return repeats, prompts, first_prompt


async def measure_prefill(ctx: MeasureContext, prompt_tokens: int, output_tokens: int) -> tuple[Measurement, str]:
    """TTFT on a prompt of exactly `prompt_tokens` tokens with a unique prefix each repeat (no cache hit).

    Returns the measurement and the first repeat's prompt, which the prefix-cache measurement sends again.
    """
    plan = ctx.plan
    point = point_of(KIND_PREFILL, prompt_tokens)
    repeats, prompts, first_prompt = await _unique_prompt_requests(
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
        **_common_params(plan, "completions"),
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "unique_prefix": True,
        "prompt_sized_by": "/tokenize",
    }
    figures = [make_figure(KIND_PREFILL, prompt_tokens, "ttft_ms", "ms", ttfts_ms, params=params, repeats=plan.repeats)]
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
    repeats, prompts, _ = await _unique_prompt_requests(ctx, point, prompt_tokens, SHORT_TTFT_HEAD, 1, "short TTFT")
    values = [metrics.ttft_s(sample) * metrics.MS_PER_S for (sample,) in repeats if sample.ok]
    if not values:
        raise _first_failure(point, [sample for group in repeats for sample in group])
    params = {**_common_params(plan, "completions"), "prompt_tokens": prompt_tokens, "output_tokens": 1}
    figure = make_figure(KIND_SHORT_TTFT, prompt_tokens, "ttft_ms", "ms", values, params=params, repeats=plan.repeats)
    return Measurement(figures=(figure,), samples={point: repeats}, prompt_sha256=prompts)


async def measure_prefix_cache(ctx: MeasureContext, prompt: str | None, prompt_tokens: int | None) -> Measurement:
    """TTFT of a long prompt sent again, served from the prefix cache.

    `prompt` is the first prefill prompt (already sent once). Without one, a prompt of
    `PREFIX_CACHE_ALONE_TOKENS` is sized and sent once, untimed, to fill the cache.
    """
    plan = ctx.plan
    async with ctx.client() as client:
        if prompt is None or prompt_tokens is None:
            prompt_tokens = PREFIX_CACHE_ALONE_TOKENS
            sized = await _sized(ctx, prompt_tokens, unique_prefix() + PREFILL_HEAD, FILLERS["prose"])
            prompt = sized.text
            await ctx.send(client, StreamRequest(prompt=prompt, max_tokens=1, api="completions"))
        point = point_of(KIND_PREFIX_CACHE, prompt_tokens)
        values: list[float] = []
        repeats: list[list[RequestSample]] = []
        for repeat in range(plan.repeats):
            request = StreamRequest(prompt=prompt, max_tokens=1, api="completions", temperature=plan.temperature)
            sample = await ctx.send(client, request)
            repeats.append([sample])
            ctx.on_step(f"prefix cache: repeat {repeat + 1} of {plan.repeats}")
            if sample.ok:
                values.append(metrics.ttft_s(sample) * metrics.MS_PER_S)
    if not values:
        raise _first_failure(point, [sample for group in repeats for sample in group])
    params = {
        **_common_params(plan, "completions"),
        "prompt_tokens": prompt_tokens,
        "output_tokens": 1,
        "cache_state": "warm: the same prompt was sent before",
    }
    figure = make_figure(KIND_PREFIX_CACHE, prompt_tokens, "ttft_ms", "ms", values, params=params, repeats=plan.repeats)
    return Measurement(figures=(figure,), samples={point: repeats}, prompt_sha256={point: _sha256(prompt)})


async def concurrency_prompts(ctx: MeasureContext, level: int, concurrency: ConcurrencyPlan) -> list[SizedPrompt]:
    """`level` prompts of exactly `prompt_tokens` tokens, each with a unique prefix (no shared cache)."""
    head = WORKLOAD_PROMPTS[concurrency.workload] + "\n\nContext:\n"
    filler = FILLERS[concurrency.workload]
    first = await _sized(ctx, concurrency.prompt_tokens, unique_prefix() + head, filler, ctx.plan.api)
    gate = asyncio.Semaphore(SIZING_PARALLELISM)

    async def one() -> SizedPrompt:
        async with gate:
            return await sized_prompt(
                ctx.counter(ctx.plan.api),
                concurrency.prompt_tokens,
                head=unique_prefix() + head,
                filler=filler,
                hint_chars=first.filler_chars,
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


def concurrency_params(plan: SweepPlan, concurrency: ConcurrencyPlan, level: int) -> dict[str, Any]:
    """Every method parameter of a concurrency level."""
    return {
        **_common_params(plan, plan.api),
        "concurrency": level,
        "workload": concurrency.workload,
        "prompt_tokens": concurrency.prompt_tokens,
        "output_tokens": concurrency.output_tokens,
        "unique_prefix": True,
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
    async with ctx.client(concurrency=level) as client:
        for repeat in range(plan.repeats):
            sized = await concurrency_prompts(ctx, level, concurrency)
            rounds.prompts[f"{rounds.point}#{repeat}"] = _sha256("\n".join(prompt.sha256 for prompt in sized))
            requests = concurrency_requests(plan, concurrency, sized)
            ctx.check()
            timeout = ctx.timeout_s()
            ctx.on_window_edge()
            samples = list(await asyncio.gather(*(client.stream(request, timeout_s=timeout) for request in requests)))
            ctx.on_window_edge()
            ctx.record(samples)
            rounds.add(samples)
            ctx.on_step(f"concurrency {level}: repeat {repeat + 1} of {plan.repeats}")
    return rounds.measurement(plan, concurrency, concurrency_params(plan, concurrency, level))


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
