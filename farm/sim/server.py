"""The simulator's HTTP application: vLLM's endpoints over the timing model, plus the sim-only truth endpoints.

    GET  /health /version /v1/models /metrics          as vLLM answers them
    POST /tokenize /detokenize /v1/completions /v1/chat/completions
    GET  /sim/profile   the profile, its truth values, the fault plan and the schedule lateness
    GET  /sim/stats     schedule lateness (p50/p99 of write time minus due time) and scheduler counters;
         DELETE clears the lateness
    GET  /sim/requests  server-side truth per request (?chunks=1 adds every chunk's time); DELETE clears
    GET  /sim/gpu       simulated per-card memory, for a worker's simulated GPU probe

Unknown paths answer 404 and known paths with another method 405, in FastAPI's `{"detail": ...}` shape.

Every handler is synchronous and runs inside `data_received` of `farm.sim.http`: a generation request is
parsed, tokenized, planned and handed to the scheduler there, its schedule anchored at the request's arrival
(the moment its body was read), so the truth TTFT holds from that instant however many requests arrive
together. At most `max_num_seqs` requests run; the rest wait in arrival order and start when a slot frees.
A non-streaming answer is sent when its last token is due.

`build_app(profile, faults)` makes the application (its state under `app.state`); `serve` runs it and arms
the faults: the socket listens only after the start-up delay, as vLLM's does after loading the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any
from urllib.parse import parse_qs

from farm.logs import get_logger
from farm.sim import protocol, timing, tokenizer
from farm.sim.faults import CRASH_EXIT_CODE, ErrorDraw, FaultPlan
from farm.sim.http import Connection, Request, Response, connection_factory, new_event_loop
from farm.sim.metrics import EngineMetrics, LatenessRecorder
from farm.sim.prefix_cache import PrefixCache, block_hashes
from farm.sim.profile import SimProfile
from farm.sim.scheduler import DEFAULT_SPIN_US, RequestRecord, Scheduler, Stream

MAX_RECORDS = 100_000  # /sim/requests keeps the latest this many
GC_THRESHOLDS = (50_000, 50, 100)
"""Young collections every 50k allocations instead of 700: the per-chunk work allocates little that lives."""
SHUTDOWN_TIMEOUT_S = 1.0  # answers in flight (or hung by a fault) get this long after SIGTERM
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
JSON = "application/json"

log = get_logger("farm.sim")


@dataclass(slots=True)
class Pending:
    """A generation request parsed and planned, waiting for one of the `max_num_seqs` slots."""

    req: protocol.GenerationRequest
    conn: Connection
    arrival_ns: int
    request_id: str
    created: int
    workload: str | None
    one_stream_rate: float
    completion_tokens: int
    finish_reason: str
    step_rng: random.Random | None


class SimState:
    """Everything one simulated engine holds: profile, faults, caches, counters, records, scheduler."""

    def __init__(self, profile: SimProfile, faults: FaultPlan, *, spin_us: int = DEFAULT_SPIN_US) -> None:
        self.profile = profile
        self.faults = faults
        self.metrics = EngineMetrics(profile.served_model_name, profile.max_model_len, profile.num_speculative_tokens)
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
        self.queue: deque[Pending] = deque()
        self.engine_dead = False
        self.hung = False
        self.started_ns = perf_counter_ns()

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
                workload: {str(c): timing.per_stream_rate(rate, p.contention, c) for c in (1, 2, 4, 8, 16, 32, 64)}
                for workload, rate in p.decode_tok_s.items()
            },
            "spec_decode": {
                "num_speculative_tokens": p.num_speculative_tokens,
                "acceptance_rate": p.acceptance_rate,
                "mean_accepted_length": timing.mean_accepted_length(p.num_speculative_tokens, p.acceptance_rate)
                if p.spec_decoding
                else 1.0,
            },
        }


Handler = Callable[[SimState, Request, Connection], Response | None]


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj).encode(), JSON)


def _json_error(err: protocol.ApiError) -> Response:
    return json_response(err.body(), err.status)


NOT_FOUND = Response(404, b'{"detail":"Not Found"}', JSON)


class SimApp:
    """The application `farm.sim.http` calls: routes each request to its handler over one `SimState`.

    The scheduler task runs between `start()` and `stop()`; `connections` holds the open connections.
    """

    def __init__(self, state: SimState, clock: Callable[[], int] = perf_counter_ns) -> None:
        self.state = state
        self.clock = clock
        self.connections: set[Connection] = set()
        self._scheduler_task: asyncio.Task[None] | None = None
        self.routes: dict[str, dict[str, Handler]] = {
            "/health": {"GET": health},
            "/version": {"GET": version},
            "/v1/models": {"GET": models},
            "/metrics": {"GET": metrics},
            "/tokenize": {"POST": tokenize},
            "/detokenize": {"POST": detokenize},
            "/v1/completions": {"POST": lambda s, r, c: generate(s, r, c, "completion")},
            "/v1/chat/completions": {"POST": lambda s, r, c: generate(s, r, c, "chat")},
            "/sim/profile": {"GET": sim_profile},
            "/sim/stats": {"GET": sim_stats, "DELETE": sim_stats_clear},
            "/sim/requests": {"GET": sim_requests, "DELETE": sim_requests_clear},
            "/sim/gpu": {"GET": sim_gpu},
        }

    def __call__(self, request: Request, conn: Connection) -> Response | None:
        if self.state.hung:
            return None  # never answered: the connection stays busy, as a hung engine's does
        methods = self.routes.get(request.path)
        if methods is None:
            return NOT_FOUND
        handler = methods.get("GET" if request.method == "HEAD" else request.method)
        if handler is None:
            allow = ", ".join(sorted(set(methods) | ({"HEAD"} if "GET" in methods else set())))
            return Response(405, b'{"detail":"Method Not Allowed"}', JSON, {"Allow": allow})
        return handler(self.state, request, conn)

    def protocol_factory(self) -> Callable[[], Any]:
        """What `loop.create_server` takes: a `farm.sim.http.Connection` per client, calling this app."""
        return connection_factory(self, self.connections, self.clock)

    def start(self) -> None:
        """Start the scheduler task (in the running loop)."""
        if self._scheduler_task is None:
            self._scheduler_task = asyncio.create_task(self.state.scheduler.run(), name="sim-scheduler")

    async def stop(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Let answers in flight finish for up to `timeout_s`, close every connection, stop the scheduler."""
        deadline = time.monotonic() + timeout_s
        # Polls the connections' state, which no event marks.
        while any(c.busy for c in self.connections) and not self.state.hung and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        task, self._scheduler_task = self._scheduler_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def build_app(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    spin_us: int = DEFAULT_SPIN_US,
    clock: Callable[[], int] = perf_counter_ns,
) -> SimApp:
    """The simulator's application over a fresh engine state; `serve` listens with it.

    `clock` stamps arrivals: `perf_counter_ns`, or the poll-time clock of `farm.sim.http.new_event_loop`.
    """
    return SimApp(SimState(profile, faults or FaultPlan(), spin_us=spin_us), clock)


def health(state: SimState, request: Request, conn: Connection) -> Response:
    return Response(503 if state.engine_dead else 200)


def version(state: SimState, request: Request, conn: Connection) -> Response:
    return json_response({"version": state.profile.version})


def models(state: SimState, request: Request, conn: Connection) -> Response:
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
    return json_response({"object": "list", "data": [card]})


def metrics(state: SimState, request: Request, conn: Connection) -> Response:
    m = state.metrics
    m.running = state.running
    m.waiting = state.waiting
    m.kv_cache_usage = min(1.0, max(0, state.scheduler.kv_tokens) / state.profile.kv_cache_tokens)
    return Response(200, m.render().encode(), "text/plain; charset=utf-8")


def tokenize(state: SimState, request: Request, conn: Connection) -> Response:
    try:
        body: protocol.TokenizeBody = protocol.parse_body(request.body, protocol.TokenizeBody)
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
    return json_response(
        {"count": len(ids), "max_model_len": state.profile.max_model_len, "tokens": ids, "token_strs": None}
    )


def detokenize(state: SimState, request: Request, conn: Connection) -> Response:
    try:
        body: protocol.DetokenizeBody = protocol.parse_body(request.body, protocol.DetokenizeBody)
        protocol.check_model(body.model, state.profile)
    except protocol.ApiError as err:
        return _json_error(err)
    return json_response({"prompt": state.vocabulary.decode(body.tokens)})


def generate(state: SimState, request: Request, conn: Connection, kind: str) -> Response | None:
    """A completion or chat request: parse, plan and hand it to the scheduler (or queue it for a slot).

    Returns an error response, or None: the answer comes from the scheduler (`_finished`).
    """
    profile = state.profile
    if state.engine_dead:
        return _json_error(protocol.ApiError(500, "The engine is dead.", "InternalServerError"))
    try:
        if kind == "completion":
            req = protocol.completion_request(protocol.parse_body(request.body, protocol.CompletionBody), profile)
        else:
            req = protocol.chat_request(protocol.parse_body(request.body, protocol.ChatBody), profile)
    except protocol.ApiError as err:
        return _json_error(err)
    if state.errors.next_fails():
        return _json_error(protocol.ApiError(500, "Injected engine error.", "InternalServerError"))

    state.request_counter += 1
    workload = timing.detect_workload(req.prompt_text, profile.workload_markers)
    completion_tokens = timing.completion_length(
        req.max_tokens,
        ignore_eos=req.ignore_eos,
        min_tokens=req.min_tokens,
        eos_after_tokens=profile.eos_after_tokens,
    )
    pending = Pending(
        req=req,
        conn=conn,
        arrival_ns=request.arrival_ns,
        request_id=protocol.new_request_id(req.kind),
        created=protocol.now_s(),
        workload=workload,
        one_stream_rate=profile.decode_tok_s.get(workload or "", profile.default_decode_tok_s),
        completion_tokens=completion_tokens,
        finish_reason="length" if completion_tokens == req.max_tokens else "stop",
        # The same draws as timing.plan_steps(rng=Random(seed * 1_000_003 + n)); none without drafts.
        step_rng=random.Random(profile.seed * 1_000_003 + state.request_counter)
        if profile.num_speculative_tokens > 0
        else None,
    )
    if state.running >= profile.max_num_seqs:
        state.waiting += 1
        state.queue.append(pending)
        return None
    state.running += 1
    _start(state, pending, request.arrival_ns)
    return None


def _start(state: SimState, pending: Pending, admitted_ns: int) -> None:
    """Prefill starts at `admitted_ns` (the arrival, unless it waited for a slot): record it, schedule token 0."""
    profile = state.profile
    req = pending.req
    prompt_len = len(req.prompt_tokens)
    hashes = block_hashes(req.prompt_tokens, profile.prefix_block_tokens) if profile.prefix_cache_blocks else []
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
        request_id=pending.request_id,
        kind=req.kind,
        stream=req.stream,
        arrival_ns=pending.arrival_ns,
        admitted_ns=admitted_ns,
        prompt_tokens=prompt_len,
        cached_tokens=cached,
        workload=pending.workload,
        ttft_model_s=ttft,
        decode_rate_one_stream_tok_s=pending.one_stream_rate,
    )
    state.records.append(record)
    conn = pending.conn
    templates: protocol.ChunkTemplates | None = None
    chunked = True
    if req.stream:
        # The head goes out now, as vLLM's does, not with the first chunk: that would save a `send` here but
        # put the client's handling of the response head on the path of its first-token stamp.
        head, chunked = conn.stream_head(200, SSE_HEADERS)
        conn.write(head)
        templates = protocol.ChunkTemplates(req, pending.request_id, pending.created)
    stream = Stream(
        record=record,
        req=req,
        completion_tokens=pending.completion_tokens,
        step_rng=pending.step_rng,
        finish_reason=pending.finish_reason,
        one_stream_rate=pending.one_stream_rate,
        text_offset=protocol.text_offset(req, state.rng),
        transport=conn.transport,
        templates=templates,
        on_done=lambda s: _finished(state, pending, s),
        chunked=chunked,
        on_first_token=lambda: state.prefix_cache.insert(hashes),
    )
    state.scheduler.admit(stream)
    state.scheduler.push(admitted_ns + round(ttft * timing.NS_PER_S), stream)


def _finished(state: SimState, pending: Pending, stream: Stream) -> None:
    """The scheduler wrote the last step (or aborted): answer a non-streaming request, free the slot."""
    state.running -= 1
    conn = pending.conn
    record = stream.record
    if record.status == "ok" and not stream.req.stream:
        req = pending.req
        text = protocol.output_text(stream.text_offset, 0, pending.completion_tokens).decode("ascii")
        body = protocol.full_response(
            req,
            pending.request_id,
            pending.created,
            text,
            pending.finish_reason,
            record.prompt_tokens,
            pending.completion_tokens,
        )
        conn.send(json_response(body))
    else:
        conn.finish()  # a stream's terminator went out with its last step; an aborted one is closed
    queue = state.queue
    while queue and state.running < state.profile.max_num_seqs:
        waiting = queue.popleft()
        state.waiting -= 1
        if waiting.conn.closed:
            continue  # the client gave up while it waited
        state.running += 1
        _start(state, waiting, perf_counter_ns())


def sim_profile(state: SimState, request: Request, conn: Connection) -> Response:
    faults = state.faults
    return json_response(
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


def sim_stats(state: SimState, request: Request, conn: Connection) -> Response:
    return json_response(
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


def sim_stats_clear(state: SimState, request: Request, conn: Connection) -> Response:
    state.lateness.clear()
    return Response(204)


def sim_requests(state: SimState, request: Request, conn: Connection) -> Response:
    chunks = parse_qs(request.query).get("chunks", ["0"])[-1] not in ("0", "", "false")
    return json_response({"requests": [r.to_json(chunks=chunks) for r in state.records]})


def sim_requests_clear(state: SimState, request: Request, conn: Connection) -> Response:
    state.records.clear()
    return Response(204)


def sim_gpu(state: SimState, request: Request, conn: Connection) -> Response:
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
    return json_response(cards)


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
    clock: Callable[[], int] = perf_counter_ns,
) -> None:
    """Wait out the start-up delay, listen, arm the faults, serve until `stop` is set (or SIGTERM/SIGINT)."""
    faults = faults or FaultPlan()
    delay = profile.startup_s if faults.startup_delay_s is None else faults.startup_delay_s
    log.info("starting", profile=profile.name, model=profile.served_model_name, startup_delay_s=delay)
    app = build_app(profile, faults, spin_us=spin_us, clock=clock)
    await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(app.protocol_factory(), host, port, backlog=1024, reuse_address=True)
    app.start()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread there are no signal handlers: the caller stops us through `stop`.
        with contextlib.suppress(RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    arm_faults(app.state, exit_process=exit_process_on_crash)
    bound = server.sockets[0].getsockname() if server.sockets else (host, port)
    # The simulator is a clock: a garbage-collection pause would be lateness that no real engine shows. What
    # exists at start-up is frozen out of collection, and young collections run far less often.
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    log.info("listening", host=host, port=int(bound[1]), url=f"http://{bound[0]}:{bound[1]}")
    try:
        await stop.wait()
    finally:
        server.close()
        await app.stop()
        await server.wait_closed()


def run_server(
    profile: SimProfile,
    faults: FaultPlan | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    spin_us: int = DEFAULT_SPIN_US,
) -> None:
    """Run the simulator in this process until SIGTERM or SIGINT (blocking), arrivals stamped at poll time."""
    loop, clock = new_event_loop()
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(serve(profile, faults, host=host, port=port, spin_us=spin_us, clock=clock))
