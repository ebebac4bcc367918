"""The simulated engine: its state (profile, caches, counters, records, scheduler) and the slots.

`SimState` holds everything one simulated engine has. `admit` takes a planned request (`Pending`): it starts
at once when one of `max_num_seqs` slots is free, else it waits in arrival order and starts when a slot frees
(`_finished`). `_start` anchors its schedule: token 0 is due TTFT after admission (the arrival, unless it
waited), from the timing model with the prefix cache's hit.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from farm.sim import protocol, timing, tokenizer
from farm.sim.dialects import ollama_final_message
from farm.sim.faults import ErrorDraw, FaultPlan
from farm.sim.http import Connection, json_response
from farm.sim.metrics import EngineMetrics, LatenessRecorder
from farm.sim.prefix_cache import PrefixCache, block_hashes
from farm.sim.profile import SimProfile
from farm.sim.scheduler import DEFAULT_SPIN_US, RequestRecord, Scheduler, Stream

MAX_RECORDS = 100_000  # /sim/requests keeps the latest this many
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


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
    native: str | None = None
    """The dialect whose own form a whole answer takes (`ollama`: /api/generate's final message)."""


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
        self.cache_resets = 0
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


def admit(state: SimState, pending: Pending) -> None:
    """Start the request now when a slot is free; else it waits for one, in arrival order."""
    if state.running >= state.profile.max_num_seqs:
        state.waiting += 1
        state.queue.append(pending)
        return
    state.running += 1
    _start(state, pending, pending.arrival_ns)


def _start(state: SimState, pending: Pending, admitted_ns: int) -> None:
    """Prefill starts at `admitted_ns` (the arrival, unless it waited for a slot): record it, schedule token 0."""
    profile = state.profile
    req = pending.req
    prompt_len = len(req.prompt_tokens)
    hashes = block_hashes(req.prompt_tokens, profile.prefix_block_tokens) if profile.prefix_cache_blocks else []
    # llama-server's `cache_prompt: false`: the whole prompt is evaluated again (and still cached after).
    reuse = req.cache_prompt or profile.dialect != "llamacpp"
    cached = state.prefix_cache.lookup(hashes) if reuse else 0
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
        templates = protocol.ChunkTemplates(
            req, pending.request_id, pending.created, report_cached=profile.dialect == "llamacpp"
        )
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
    if record.status == "ok" and not stream.req.stream and pending.native == "ollama":
        text = protocol.output_text(stream.text_offset, 0, pending.completion_tokens).decode("ascii")
        model = state.profile.served_model_name
        conn.send(
            json_response(ollama_final_message(model, text, pending.finish_reason, record, pending.completion_tokens))
        )
    elif record.status == "ok" and not stream.req.stream:
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
