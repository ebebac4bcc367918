"""The simulator's HTTP server: vLLM's endpoints over the timing model, plus the sim-only truth endpoints.

    GET  /health /version /v1/models /metrics          as vLLM answers them
    POST /tokenize /detokenize /v1/completions /v1/chat/completions
    GET  /sim/profile   the profile, its truth values, the fault plan and the schedule lateness
    GET  /sim/stats     schedule lateness (p50/p99 of write time minus due time) and scheduler counters;
         DELETE clears the lateness
    GET  /sim/requests  server-side truth per request (?chunks=1 adds every chunk's time); DELETE clears
    GET  /sim/gpu       simulated per-card memory, for a worker's simulated GPU probe

`build_app(profile, faults)` makes the application (its state under `app[STATE]`); `serve` runs it and arms
the faults: the socket listens only after the start-up delay, as vLLM's does after loading the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any, NoReturn

from aiohttp import HttpVersion11, web

from farm.logs import get_logger
from farm.sim import protocol, timing, tokenizer
from farm.sim.faults import CRASH_EXIT_CODE, ErrorDraw, FaultPlan
from farm.sim.metrics import EngineMetrics, LatenessRecorder
from farm.sim.prefix_cache import PrefixCache, block_hashes
from farm.sim.profile import SimProfile
from farm.sim.scheduler import DEFAULT_SPIN_US, RequestRecord, Scheduler, Stream

MAX_RECORDS = 100_000  # /sim/requests keeps the latest this many
SHUTDOWN_TIMEOUT_S = 1.0
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}

log = get_logger("farm.sim")


class SimState:
    """Everything one simulated engine holds: profile, faults, caches, counters, records, scheduler."""

    def __init__(self, profile: SimProfile, faults: FaultPlan, *, spin_us: int = DEFAULT_SPIN_US) -> None:
        self.profile = profile
        self.faults = faults
        self.metrics = EngineMetrics(
            profile.served_model_name, profile.max_model_len, profile.num_speculative_tokens
        )
        self.lateness = LatenessRecorder()
        self.scheduler = Scheduler(profile, self.metrics, self.lateness, spin_us=spin_us)
        self.prefix_cache = PrefixCache(profile.prefix_cache_blocks, profile.prefix_block_tokens)
        self.vocabulary = tokenizer.Vocabulary()
        self.records: deque[RequestRecord] = deque(maxlen=MAX_RECORDS)
        self.errors = ErrorDraw(faults.error_rate, faults.seed)
        self.rng = random.Random(profile.seed)
        self.request_counter = 0
        self.running = 0
        self.waiting = 0
        self.slots = asyncio.Semaphore(profile.max_num_seqs)
        self.engine_dead = False
        self.hung = False
        self.started_ns = perf_counter_ns()
        self._scheduler_task: asyncio.Task[None] | None = None

    def hang(self) -> None:
        """The hang fault: nothing answers from now on."""
        self.hung = True
        self.scheduler.freeze()

    def kill_engine(self) -> None:
        """The engine died: /health answers 503, completions 500."""
        self.engine_dead = True

    def truth(self) -> dict[str, Any]:
        """What the profile's model predicts for the seed's measurements, to set beside measured figures."""
        p = self.profile

        def ttft(n: int, cached: int = 0) -> float:
            return timing.ttft_s(
                n,
                cached,
                base_latency_s=p.base_latency_s,
                linear_s_per_token=p.prefill_linear_s_per_token,
                quadratic_s_per_token2=p.prefill_quadratic_s_per_token2,
                cached_s_per_token=p.cached_s_per_token,
            )

        return {
            "decode_tok_s": dict(p.decode_tok_s),
            "default_decode_tok_s": p.default_decode_tok_s,
            "ttft_s": {str(n): ttft(n) for n in (32, 1024, 107016, 211722)},
            "per_stream_tok_s": {
                workload: {
                    str(c): timing.per_stream_rate(rate, p.contention, c) for c in (1, 2, 4, 8, 16, 32, 64)
                }
                for workload, rate in p.decode_tok_s.items()
            },
            "spec_decode": {
                "num_speculative_tokens": p.num_speculative_tokens,
                "acceptance_rate": p.acceptance_rate,
                "mean_accepted_length": timing.mean_accepted_length(
                    p.num_speculative_tokens, p.acceptance_rate
                )
                if p.spec_decoding
                else 1.0,
            },
        }


STATE: web.AppKey[SimState] = web.AppKey("sim_state", SimState)


def _json_error(err: protocol.ApiError) -> web.Response:
    return web.json_response(err.body(), status=err.status)


async def _hang_forever() -> NoReturn:
    await asyncio.get_running_loop().create_future()
    raise AssertionError("unreachable")


def build_app(
    profile: SimProfile, faults: FaultPlan | None = None, *, spin_us: int = DEFAULT_SPIN_US
) -> web.Application:
    """The simulator's aiohttp application. Its scheduler task runs while the application does."""
    state = SimState(profile, faults or FaultPlan(), spin_us=spin_us)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE] = state

    async def scheduler_ctx(app: web.Application) -> Any:
        task = asyncio.create_task(state.scheduler.run(), name="sim-scheduler")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(scheduler_ctx)

    @web.middleware
    async def faults_middleware(
        request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if state.hung:
            await _hang_forever()
        response: web.StreamResponse = await handler(request)
        return response

    app.middlewares.append(faults_middleware)
    app.router.add_get("/health", lambda r: health(r, state))
    app.router.add_get("/version", lambda r: version(r, state))
    app.router.add_get("/v1/models", lambda r: models(r, state))
    app.router.add_get("/metrics", lambda r: metrics(r, state))
    app.router.add_post("/tokenize", lambda r: tokenize(r, state))
    app.router.add_post("/detokenize", lambda r: detokenize(r, state))
    app.router.add_post("/v1/completions", lambda r: generate(r, state, "completion"))
    app.router.add_post("/v1/chat/completions", lambda r: generate(r, state, "chat"))
    app.router.add_get("/sim/profile", lambda r: sim_profile(r, state))
    app.router.add_get("/sim/stats", lambda r: sim_stats(r, state))
    app.router.add_delete("/sim/stats", lambda r: sim_stats_clear(r, state))
    app.router.add_get("/sim/requests", lambda r: sim_requests(r, state))
    app.router.add_delete("/sim/requests", lambda r: sim_requests_clear(r, state))
    app.router.add_get("/sim/gpu", lambda r: sim_gpu(r, state))
    return app


async def health(request: web.Request, state: SimState) -> web.Response:
    if state.engine_dead:
        return web.Response(status=503)
    return web.Response(status=200)


async def version(request: web.Request, state: SimState) -> web.Response:
    return web.json_response({"version": state.profile.version})


async def models(request: web.Request, state: SimState) -> web.Response:
    p = state.profile
    created = protocol.now_s()
    card = {
        "id": p.served_model_name,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": p.root,
        "parent": None,
        "max_model_len": p.max_model_len,
        "permission": [
            {
                "id": f"modelperm-{protocol.new_request_id('chat')[9:]}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return web.json_response({"object": "list", "data": [card]})


async def metrics(request: web.Request, state: SimState) -> web.Response:
    m = state.metrics
    m.running = state.running
    m.waiting = state.waiting
    m.kv_cache_usage = min(1.0, max(0, state.scheduler.kv_tokens) / state.profile.kv_cache_tokens)
    return web.Response(text=m.render(), content_type="text/plain", charset="utf-8")


async def tokenize(request: web.Request, state: SimState) -> web.Response:
    try:
        body: protocol.TokenizeBody = protocol.parse_body(await request.read(), protocol.TokenizeBody)
        protocol.check_model(body.model, state.profile)
        if body.messages is not None:
            # vLLM: add_special_tokens defaults to false for messages (the template carries BOS).
            tokens = tokenizer.chat_prompt_tokens(
                body.messages,
                add_generation_prompt=body.add_generation_prompt,
                chat_template_kwargs=body.chat_template_kwargs,
            )
            if body.add_special_tokens:
                tokens.insert(0, tokenizer.BOS)
        elif body.prompt is not None:
            add = True if body.add_special_tokens is None else body.add_special_tokens
            tokens = tokenizer.completion_prompt_tokens(body.prompt, add_bos=state.profile.add_bos and add)
        else:
            raise protocol.ApiError(400, "Either prompt or messages must be given.")
    except protocol.ApiError as err:
        return _json_error(err)
    except ValueError as exc:
        return _json_error(protocol.ApiError(400, str(exc)))
    ids = state.vocabulary.encode(tokens)
    return web.json_response(
        {"count": len(ids), "max_model_len": state.profile.max_model_len, "tokens": ids, "token_strs": None}
    )


async def detokenize(request: web.Request, state: SimState) -> web.Response:
    try:
        body: protocol.DetokenizeBody = protocol.parse_body(await request.read(), protocol.DetokenizeBody)
        protocol.check_model(body.model, state.profile)
    except protocol.ApiError as err:
        return _json_error(err)
    return web.json_response({"prompt": state.vocabulary.decode(body.tokens)})


async def generate(request: web.Request, state: SimState, kind: str) -> web.StreamResponse:
    """A completion or chat request: parse, admit, plan, hand to the scheduler, wait for the last chunk."""
    arrival_ns = perf_counter_ns()
    profile = state.profile
    if state.engine_dead:
        return _json_error(protocol.ApiError(500, "The engine is dead.", "InternalServerError"))
    try:
        raw = await request.read()
        if kind == "completion":
            req = protocol.completion_request(protocol.parse_body(raw, protocol.CompletionBody), profile)
        else:
            req = protocol.chat_request(protocol.parse_body(raw, protocol.ChatBody), profile)
    except protocol.ApiError as err:
        return _json_error(err)
    if state.errors.next_fails():
        return _json_error(protocol.ApiError(500, "Injected engine error.", "InternalServerError"))

    state.request_counter += 1
    request_id = protocol.new_request_id(req.kind)
    created = protocol.now_s()
    prompt_len = len(req.prompt_tokens)
    workload = timing.detect_workload(req.prompt_text, profile.workload_markers)
    one_stream_rate = profile.decode_tok_s.get(workload or "", profile.default_decode_tok_s)
    completion_tokens = timing.completion_length(
        req.max_tokens,
        ignore_eos=req.ignore_eos,
        min_tokens=req.min_tokens,
        eos_after_tokens=profile.eos_after_tokens,
    )
    finish_reason = "length" if completion_tokens == req.max_tokens else "stop"
    step_rng = random.Random(profile.seed * 1_000_003 + state.request_counter)
    steps = timing.plan_steps(
        completion_tokens,
        num_speculative_tokens=profile.num_speculative_tokens,
        acceptance_rate=profile.acceptance_rate,
        tokens_per_chunk=profile.tokens_per_chunk,
        rng=step_rng,
    )

    waited = state.running >= profile.max_num_seqs
    if waited:
        state.waiting += 1
    await state.slots.acquire()
    if waited:
        state.waiting -= 1
    state.running += 1
    admitted_ns = perf_counter_ns() if waited else arrival_ns
    try:
        hashes = (
            block_hashes(req.prompt_tokens, profile.prefix_block_tokens)
            if profile.prefix_cache_blocks
            else []
        )
        cached = state.prefix_cache.lookup(hashes)
        state.metrics.prefix_cache_queries += prompt_len
        state.metrics.prefix_cache_hits += cached
        ttft = timing.ttft_s(
            prompt_len,
            cached,
            base_latency_s=profile.base_latency_s,
            linear_s_per_token=profile.prefill_linear_s_per_token,
            quadratic_s_per_token2=profile.prefill_quadratic_s_per_token2,
            cached_s_per_token=profile.cached_s_per_token,
        )
        record = RequestRecord(
            request_id=request_id,
            kind=req.kind,
            stream=req.stream,
            arrival_ns=arrival_ns,
            admitted_ns=admitted_ns,
            prompt_tokens=prompt_len,
            cached_tokens=cached,
            workload=workload,
            ttft_model_s=ttft,
            decode_rate_one_stream_tok_s=one_stream_rate,
        )
        state.records.append(record)

        response: web.StreamResponse | None = None
        templates: protocol.ChunkTemplates | None = None
        chunked = request.version >= HttpVersion11
        if req.stream:
            response = web.StreamResponse(status=200, headers=SSE_HEADERS)
            if chunked:
                response.enable_chunked_encoding()
            await response.prepare(request)
            templates = protocol.ChunkTemplates(req, request_id, created)
        offset = protocol.text_offset(req, state.rng)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream = Stream(
            record=record,
            req=req,
            steps=steps,
            finish_reason=finish_reason,
            one_stream_rate=one_stream_rate,
            text_offset=offset,
            transport=request.transport,
            templates=templates,
            done=done,
            chunked=chunked,
            on_first_token=lambda: state.prefix_cache.insert(hashes),
        )
        state.scheduler.admit(stream)
        state.scheduler.push(admitted_ns + round(ttft * timing.NS_PER_S), stream)
        await done
    finally:
        state.running -= 1
        state.slots.release()

    if response is not None:
        if record.status == "ok":
            await response.write_eof()
        return response
    text = protocol.output_text(offset, 0, completion_tokens).decode("ascii")
    body = protocol.full_response(
        req, request_id, created, text, finish_reason, prompt_len, completion_tokens
    )
    return web.json_response(body)


async def sim_profile(request: web.Request, state: SimState) -> web.Response:
    faults = state.faults
    return web.json_response(
        {
            "profile": state.profile.model_dump(mode="json"),
            "truth": state.truth(),
            "faults": {
                "startup_delay_s": faults.startup_delay_s,
                "crash_after_s": faults.crash_after_s,
                "crash_linger_s": faults.crash_linger_s,
                "hang_after_s": faults.hang_after_s,
                "error_rate": faults.error_rate,
                "seed": faults.seed,
            },
            "lateness": state.lateness.summary(),
        }
    )


async def sim_stats(request: web.Request, state: SimState) -> web.Response:
    return web.json_response(
        {
            "lateness": state.lateness.summary(),
            "requests": state.request_counter,
            "running": state.running,
            "waiting": state.waiting,
            "decoding": state.scheduler.decoding,
            "aborted": state.scheduler.aborted,
            "spin_us": state.scheduler.spin_ns // 1000,
        }
    )


async def sim_stats_clear(request: web.Request, state: SimState) -> web.Response:
    state.lateness.clear()
    return web.Response(status=204)


async def sim_requests(request: web.Request, state: SimState) -> web.Response:
    chunks = request.query.get("chunks", "0") not in ("0", "", "false")
    return web.json_response({"requests": [r.to_json(chunks=chunks) for r in state.records]})


async def sim_requests_clear(request: web.Request, state: SimState) -> web.Response:
    state.records.clear()
    return web.Response(status=204)


async def sim_gpu(request: web.Request, state: SimState) -> web.Response:
    p = state.profile
    cards = [
        {
            "index": i,
            "name": p.gpu_name,
            "uuid": f"GPU-sim-{i:08x}",
            "memory_used_mib": p.gpu_memory_used_mib,
            "memory_total_mib": p.gpu_memory_total_mib,
        }
        for i in range(p.gpu_count)
    ]
    return web.json_response(cards)


def _crash(state: SimState, linger_s: float, exit_process: bool) -> None:
    log.warning("injected crash: engine dead", linger_s=linger_s)
    state.kill_engine()
    if exit_process:
        asyncio.get_running_loop().call_later(linger_s, _exit_hard)


def _exit_hard() -> None:
    log.warning("injected crash: exiting", exit_code=CRASH_EXIT_CODE)
    os._exit(CRASH_EXIT_CODE)


def _hang(state: SimState) -> None:
    log.warning("injected hang: no more answers")
    state.hang()


def arm_faults(state: SimState, *, exit_process: bool = True) -> None:
    """Start the crash and hang timers (from now, i.e. from when the socket listens)."""
    loop = asyncio.get_running_loop()
    faults = state.faults
    if faults.crash_after_s is not None:
        loop.call_later(faults.crash_after_s, _crash, state, faults.crash_linger_s, exit_process)
    if faults.hang_after_s is not None:
        loop.call_later(faults.hang_after_s, _hang, state)


async def serve(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    spin_us: int = DEFAULT_SPIN_US,
    stop: asyncio.Event | None = None,
    exit_process_on_crash: bool = True,
) -> None:
    """Wait out the start-up delay, listen, arm the faults, serve until `stop` is set (or SIGTERM/SIGINT)."""
    faults = faults or FaultPlan()
    delay = profile.startup_s if faults.startup_delay_s is None else faults.startup_delay_s
    log.info("starting", profile=profile.name, model=profile.served_model_name, startup_delay_s=delay)
    app = build_app(profile, faults, spin_us=spin_us)
    await asyncio.sleep(delay)
    # Streams in flight (or hung by a fault) get a second to finish, not aiohttp's default minute.
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread there are no signal handlers: the caller stops us through `stop`.
        with contextlib.suppress(RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    arm_faults(app[STATE], exit_process=exit_process_on_crash)
    bound = [f"{a[0]}:{a[1]}" for a in runner.addresses if isinstance(a, tuple)]
    log.info(
        "listening",
        host=host,
        port=int(bound[0].rsplit(":", 1)[1]) if bound else port,
        url=f"http://{bound[0] if bound else f'{host}:{port}'}",
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def run_server(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    spin_us: int = DEFAULT_SPIN_US,
) -> None:
    """Run the simulator in this process until SIGTERM or SIGINT (blocking)."""
    asyncio.run(serve(profile, faults, host=host, port=port, spin_us=spin_us))
