"""The simulator's HTTP routes: vLLM's endpoints over the simulated engine, plus the sim-only truth endpoints.

    GET  /health /version /v1/models /metrics          as vLLM answers them
    POST /tokenize /detokenize /v1/completions /v1/chat/completions
    GET  /sim/profile   the profile, its truth values, the fault plan and the schedule lateness
    GET  /sim/stats     schedule lateness (p50/p99 of write time minus due time) and scheduler counters;
         DELETE clears the lateness
    GET  /sim/requests  server-side truth per request (?chunks=1 adds every chunk's time); DELETE clears
    GET  /sim/gpu       simulated per-card memory, and with a power model each card's energy counter (mJ) and
                        power (mW), for a worker's simulated GPU probe
    GET  /sim/energy    the power model's exact energy per card over ?start_ns=&end_ns= (perf_counter_ns, the
                        clock of /sim/requests): the truth the farm's measured energy is checked against
    POST /reset_prefix_cache   empties the prefix cache (vLLM's, served in its dev mode: the profile's
                               `dev_mode`; its counters go on counting)

With `tokenize_endpoint = false` it has no /tokenize and /detokenize, as most OpenAI-compatible servers.

With the profile's `dialect = "sglang"` it answers as SGLang does instead: no /version, but /get_server_info
(with the version) and /get_model_info, /flush_cache instead of /reset_prefix_cache, and /metrics under
SGLang's `sglang:*` names; llama.cpp's (`/slots`, slot erase, `cache_prompt`, `timings.cache_n`), Ollama,
LM Studio, TabbyAPI and MLX likewise (farm.sim.dialects), without vLLM's
/reset_prefix_cache.

Unknown paths answer 404 and known paths with another method 405, in FastAPI's `{"detail": ...}` shape.

Every handler is synchronous and runs inside `data_received` of `farm.sim.http`: a generation request is
parsed, tokenized, planned and handed to the engine (`farm.sim.engine.admit`) there, its schedule anchored at
the request's arrival (the moment its body was read), so the truth TTFT holds from that instant however many
requests arrive together. A non-streaming answer is sent when its last token is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any
from urllib.parse import parse_qs

from farm.sim import protocol, timing, tokenizer
from farm.sim.dialects import OWNERS, apply_dialect
from farm.sim.engine import Pending, SimState, admit
from farm.sim.faults import FaultPlan
from farm.sim.http import JSON, Connection, Request, Response, connection_factory, json_response
from farm.sim.metrics import llamacpp_exposition, sglang_exposition
from farm.sim.profile import SimProfile
from farm.sim.scheduler import DEFAULT_SPIN_US

SHUTDOWN_TIMEOUT_S = 1.0  # answers in flight (or hung by a fault) get this long after SIGTERM

Handler = Callable[[SimState, Request, Connection], Response | None]


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
            "/sim/energy": {"GET": sim_energy},
            "/reset_prefix_cache": {"POST": vllm_reset_prefix_cache},
        }
        # Another server's routes (farm.sim.dialects): SGLang has no /version, its version is in
        # /get_server_info (and its metrics are sglang:*); Ollama's API is under /api; ...
        sglang: dict[str, dict[str, Handler]] = {
            "/get_server_info": {"GET": sglang_server_info},
            "/get_model_info": {"GET": sglang_model_info},
            "/flush_cache": {"GET": reset_prefix_cache, "POST": reset_prefix_cache},
        }
        apply_dialect(self.routes, state.profile.dialect, sglang, generate)
        if state.profile.dialect != "vllm" or not state.profile.dev_mode:
            self.routes.pop("/reset_prefix_cache", None)  # vLLM's own call, in its dev mode only
        if not state.profile.tokenize_endpoint:
            self.routes.pop("/tokenize", None)
            self.routes.pop("/detokenize", None)

    def __call__(self, request: Request, conn: Connection) -> Response | None:
        if self.state.hung:
            return None  # never answered: the connection stays busy, as a hung engine's does
        methods = self.routes.get(request.path)
        if methods is None:
            # One path parameter, as the last segment (llama.cpp's /slots/{id}).
            head, _, last = request.path.rpartition("/")
            methods = self.routes.get(f"{head}/{{id}}") if last else None
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
        "owned_by": OWNERS.get(p.dialect, p.dialect),
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
    text = m.render()
    if state.profile.dialect == "sglang":
        text = sglang_exposition(text)
    elif state.profile.dialect == "llamacpp":
        text = llamacpp_exposition(m.prompt_tokens, m.generation_tokens)
    return Response(200, text.encode(), "text/plain; charset=utf-8")


def sglang_server_info(state: SimState, request: Request, conn: Connection) -> Response:
    """SGLang's /get_server_info: its server arguments with the version beside them (a subset of the real
    answer's keys)."""
    p = state.profile
    return json_response(
        {
            "model_path": p.root,
            "served_model_name": p.served_model_name,
            "tp_size": max(1, p.gpu_count),
            "context_length": p.max_model_len,
            "max_running_requests": p.max_num_seqs,
            "version": p.version,
        }
    )


def sglang_model_info(state: SimState, request: Request, conn: Connection) -> Response:
    """SGLang's /get_model_info."""
    p = state.profile
    return json_response(
        {"model_path": p.root, "tokenizer_path": p.root, "is_generation": True, "preferred_sampling_params": None}
    )


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


def reset_prefix_cache(state: SimState, request: Request, conn: Connection) -> Response:
    """vLLM's POST /reset_prefix_cache (SGLang's /flush_cache): every cached block is dropped; the hit and query
    counters are counters and keep their values."""
    state.prefix_cache.clear()
    state.cache_resets += 1
    return Response(200)


def vllm_reset_prefix_cache(state: SimState, request: Request, conn: Connection) -> Response:
    """vLLM's answer to POST /reset_prefix_cache (with VLLM_SERVER_DEV_MODE=1): `{"success": true}` (the
    simulator holds no blocks a reset must wait for)."""
    reset_prefix_cache(state, request, conn)
    return json_response({"success": True})


def detokenize(state: SimState, request: Request, conn: Connection) -> Response:
    try:
        body: protocol.DetokenizeBody = protocol.parse_body(request.body, protocol.DetokenizeBody)
        protocol.check_model(body.model, state.profile)
    except protocol.ApiError as err:
        return _json_error(err)
    return json_response({"prompt": state.vocabulary.decode(body.tokens)})


def generate(
    state: SimState, request: Request, conn: Connection, kind: str, *, native: str | None = None
) -> Response | None:
    """A completion or chat request: parse, plan and hand it to the scheduler (or queue it for a slot).
    `native`: the dialect whose own form the whole answer takes (Ollama's /api/generate), else OpenAI's.

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
        one_stream_rate=timing.rate_at_depth(
            profile.decode_tok_s.get(workload or "", profile.default_decode_tok_s),
            len(req.prompt_tokens),
            profile.decode_s_per_context_token,
        ),
        completion_tokens=completion_tokens,
        finish_reason="length" if completion_tokens == req.max_tokens else "stop",
        # The same draws as timing.plan_steps(rng=Random(seed * 1_000_003 + n)); none without drafts.
        step_rng=random.Random(profile.seed * 1_000_003 + state.request_counter)
        if profile.num_speculative_tokens > 0
        else None,
        native=native,
    )
    admit(state, pending)
    return None


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
            "prefix_cache_resets": state.cache_resets,
            "prefix_cache_blocks": len(state.prefix_cache),
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
    meter = state.scheduler.power
    now = perf_counter_ns()
    cards: list[dict[str, Any]] = [
        {
            "index": i,
            "name": p.gpu_name,
            "uuid": f"GPU-sim-{i:08x}",
            "memory_used_mib": p.gpu_memory_used_mib,
            "memory_total_mib": p.gpu_memory_total_mib,
        }
        for i in range(p.gpu_count)
    ]
    if meter is not None:
        energy_mj, power_mw = meter.energy_j(now) * 1000, meter.watts * 1000
        for card in cards:
            card["energy_mj"] = energy_mj
            card["power_mw"] = power_mw
    return json_response(cards)


def sim_energy(state: SimState, request: Request, conn: Connection) -> Response:
    meter = state.scheduler.power
    if meter is None:
        return json_response({"detail": "this profile models no power"}, 404)
    query = parse_qs(request.query)
    try:
        start_ns, end_ns = int(query["start_ns"][-1]), int(query["end_ns"][-1])
    except (KeyError, ValueError):
        return json_response({"detail": "give start_ns and end_ns as integers (perf_counter_ns)"}, 400)
    per_card = meter.energy_between(start_ns, end_ns)
    count = state.profile.gpu_count
    return json_response(
        {
            "start_ns": start_ns,
            "end_ns": end_ns,
            "cards": count,
            "energy_j_per_card": per_card,
            "energy_j": per_card * count if per_card is not None else None,
        }
    )
