"""The single scheduler task: every stream's chunks, written at their due times from one heap.

Why one task and not a task per stream: at 256 streams × 200 tok/s there are 51k writes a second on one core.
A task per stream pays a timer, a future and a task switch per chunk; one task with a heap of due times wakes
once for all the chunks due together and writes them in a loop (see bench/sim_capacity.py for the figures).

Waiting: the loop timer (epoll) wakes at millisecond granularity, rounding up, so the scheduler sleeps whole
milliseconds ending at least `spin_ns` before the next due time, then yields to the event loop (`sleep(0)`,
which still serves sockets) until it is due.
Each write's lateness (time after the write minus due time) is recorded.

Writes go straight to the transport, already framed (the last write carries the chunked terminator), without
awaiting a drain: a client that stops reading could otherwise stall every stream. A stream whose socket has
more than STALL_BYTES unsent is aborted instead, and so is one whose client went away (streaming or not).

Steps are drawn lazily, one ahead of the write, from the stream's own `random.Random`, in the order
`timing.plan_steps` draws them, so the plan is the same; but admitting a request costs nothing per token (a
400-token plan of `Step` objects took a third of a millisecond, in the admission path of every request).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from farm.sim import protocol, timing
from farm.sim.metrics import EngineMetrics, LatenessRecorder
from farm.sim.power import EnergyMeter, card_power_w
from farm.sim.profile import SimProfile

STALL_BYTES = 4 * 1024 * 1024
HOLD_STEPS = 8
"""A late stream sends at most this many steps in one write: the client still sees it progress."""
DEFAULT_SPIN_US = 300  # margin for the wake-up jitter of an epoll timeout; below it the scheduler yields


@dataclass
class RequestRecord:
    """Server-side truth of one request; times from perf_counter_ns (CLOCK_MONOTONIC on Linux)."""

    request_id: str
    kind: str
    stream: bool
    arrival_ns: int
    prompt_tokens: int
    cached_tokens: int
    workload: str | None
    ttft_model_s: float
    decode_rate_one_stream_tok_s: float
    admitted_ns: int = 0
    first_due_ns: int | None = None
    first_chunk_ns: int | None = None
    last_chunk_ns: int | None = None
    chunk_count: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    status: str = "running"
    chunk_ns: array[int] = field(default_factory=lambda: array("q"))
    chunk_tokens: array[int] = field(default_factory=lambda: array("q"))

    def to_json(self, *, chunks: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "request_id": self.request_id,
            "kind": self.kind,
            "stream": self.stream,
            "status": self.status,
            "arrival_ns": self.arrival_ns,
            "admitted_ns": self.admitted_ns,
            "first_due_ns": self.first_due_ns,
            "first_chunk_ns": self.first_chunk_ns,
            "last_chunk_ns": self.last_chunk_ns,
            "chunk_count": self.chunk_count,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "workload": self.workload,
            "finish_reason": self.finish_reason,
            "ttft_model_s": self.ttft_model_s,
            "decode_rate_one_stream_tok_s": self.decode_rate_one_stream_tok_s,
        }
        if chunks:
            body["chunk_ns"] = list(self.chunk_ns)
            body["chunk_tokens"] = list(self.chunk_tokens)
        return body


class Stream:
    """One request being generated: its plan, where it is in it, and where its bytes go."""

    __slots__ = (
        "anchor_index",
        "anchor_ns",
        "chunked",
        "completion_tokens",
        "decoding",
        "due_ns",
        "emitted",
        "finish_reason",
        "held",
        "held_due",
        "on_done",
        "on_first_token",
        "one_stream_rate",
        "prev_write_ns",
        "rate",
        "record",
        "req",
        "step_accepted",
        "step_rng",
        "step_tokens",
        "templates",
        "text_offset",
        "transport",
    )

    def __init__(
        self,
        *,
        record: RequestRecord,
        req: protocol.GenerationRequest,
        completion_tokens: int,
        step_rng: random.Random | None,
        finish_reason: str,
        one_stream_rate: float,
        text_offset: int,
        transport: asyncio.Transport | None,
        templates: protocol.ChunkTemplates | None,
        on_done: Callable[[Stream], None] | None = None,
        chunked: bool = True,
        on_first_token: Callable[[], None] | None = None,
    ) -> None:
        if completion_tokens < 1:
            raise ValueError("a stream generates at least one token")
        self.record = record
        self.req = req
        self.completion_tokens = completion_tokens
        self.step_rng = step_rng  # drafts' acceptance draws; None without speculative decoding
        self.finish_reason = finish_reason
        self.one_stream_rate = one_stream_rate
        self.text_offset = text_offset
        self.transport = transport
        self.templates = templates
        self.on_done = on_done
        self.on_first_token = on_first_token
        self.step_tokens = 1  # the prefill step yields token 0 alone
        self.step_accepted: int | None = None
        self.emitted = 0
        self.due_ns = 0
        self.anchor_ns = 0
        self.anchor_index = 0
        self.rate = one_stream_rate
        self.prev_write_ns = 0
        self.held: list[bytes] = []  # steps written with the next one (the scheduler was behind)
        self.held_due: list[int] = []
        self.decoding = False
        self.chunked = chunked


def _done(stream: Stream) -> None:
    if stream.on_done is not None:
        on_done, stream.on_done = stream.on_done, None
        on_done(stream)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Scheduler:
    """Owns the heap of due chunks and the count of streams decoding (the `c` of the contention model)."""

    def __init__(
        self,
        profile: SimProfile,
        metrics: EngineMetrics,
        lateness: LatenessRecorder,
        *,
        spin_us: int = DEFAULT_SPIN_US,
    ) -> None:
        self.profile = profile
        self.metrics = metrics
        self.lateness = lateness
        self.spin_ns = spin_us * 1000
        self.decoding = 0
        self.prefilling = 0
        self.kv_tokens = 0
        self.power = EnergyMeter(self._watts(), perf_counter_ns()) if profile.models_power else None
        """Each card's exact energy under the profile's power model (None without one): farm.sim.power."""
        self.aborted = 0
        self._heap: list[tuple[int, int, Stream]] = []
        self._seq = itertools.count()
        self._wake_fut: asyncio.Future[None] | None = None
        self._sleep_until: int | None = None
        self._frozen = False
        self.rng = random.Random(profile.seed)

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, due_ns: int, stream: Stream) -> None:
        stream.due_ns = due_ns
        heapq.heappush(self._heap, (due_ns, next(self._seq), stream))
        fut = self._wake_fut
        if fut is not None and not fut.done() and (self._sleep_until is None or due_ns < self._sleep_until):
            fut.set_result(None)

    def freeze(self) -> None:
        """Stop writing anything, for ever (the hang fault)."""
        self._frozen = True
        if self._wake_fut is not None:
            _wake(self._wake_fut)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        heap = self._heap
        advance = self._advance
        while True:
            if self._frozen:
                await loop.create_future()  # never completes: a hung engine writes nothing more
            if not heap:
                self._sleep_until = None
                self._wake_fut = loop.create_future()
                await self._wake_fut
                continue
            now = perf_counter_ns()
            while heap and heap[0][0] <= now and not self._frozen:
                due, _, stream = heapq.heappop(heap)
                now = advance(stream, due, now)
            if not heap or self._frozen:
                continue
            # epoll rounds a timeout UP to whole milliseconds: sleep a whole number of them that ends at least
            # spin_ns before the due time, then yield until it is due.
            sleep_ms = (heap[0][0] - now - self.spin_ns) // 1_000_000
            if sleep_ms >= 1:
                self._sleep_until = heap[0][0]
                fut = self._wake_fut = loop.create_future()
                handle = loop.call_later(sleep_ms / 1000, _wake, fut)
                await fut
                handle.cancel()
            else:
                await asyncio.sleep(0)

    def _watts(self) -> float:
        p = self.profile
        idle = p.power_idle_w or 0.0
        return card_power_w(
            idle_w=idle,
            prefill_w=p.power_prefill_w,
            decode_w=p.power_decode_w,
            per_stream_w=p.power_per_stream_w,
            limit_w=p.power_limit_w if p.power_limit_w is not None else float("inf"),
            prefilling=self.prefilling,
            decoding=self.decoding,
        )

    def _power_changed(self) -> None:
        """Prefill or decoding started or ended: the cards' power changes from now on."""
        if self.power is not None:
            self.power.set_power(perf_counter_ns(), self._watts())

    def _rate_now(self, stream: Stream) -> float:
        return timing.per_stream_rate(stream.one_stream_rate, self.profile.contention, self.decoding)

    def _advance(self, stream: Stream, due: int, now: int) -> int:
        """Emit the stream's next step (it is due), schedule the next; returns its stamp, taken just before the
        write.

        The hot path: at 256 streams it runs 51k times a second, so it avoids calls it can do without.
        A stream whose next step is already due when this one is ready (the scheduler is behind) holds this
        step's bytes and sends them with the next one: one `send` for several steps, which is how it catches
        up (at most HOLD_STEPS at a time). Held steps are stamped (written, late by) when they really go out.
        The first and last steps are never held. `now` is the scheduler's clock when it took this step: the
        next step is judged overdue against it (no clock read for that on the hot path).
        """
        record = stream.record
        step_tokens = stream.step_tokens
        start = stream.emitted
        end = start + step_tokens
        first = start == 0
        last = end >= stream.completion_tokens
        transport = stream.transport
        if transport is not None and (transport.is_closing() or transport.get_write_buffer_size() > STALL_BYTES):
            self._abort(stream)
            return perf_counter_ns()
        if first:
            self._start_decoding(stream)
        data = (
            self._event_bytes(stream, start, end, first, last)
            if stream.templates is not None and transport is not None
            else None
        )
        metrics = self.metrics
        stream.emitted = end
        record.chunk_count += 1
        record.completion_tokens = end
        record.chunk_tokens.append(step_tokens)
        metrics.generation_tokens += step_tokens
        self.kv_tokens += step_tokens
        if stream.step_accepted is not None:
            metrics.observe_draft(stream.step_accepted)
        next_due = 0
        if not last:
            # The next step (timing.plan_steps, one step at a time): a draft of 1 + accepted tokens, or a size.
            left = stream.completion_tokens - end
            rng = stream.step_rng
            profile = self.profile
            if rng is not None:
                accepted = timing.draw_accepted(rng, profile.num_speculative_tokens, profile.acceptance_rate)
                stream.step_accepted = accepted
                stream.step_tokens = min(left, 1 + accepted)
            else:
                stream.step_tokens = min(left, profile.tokens_per_chunk)
            if profile.contention:
                rate = self._rate_now(stream)
                if rate != stream.rate:
                    # Concurrency changed: continue from this step's due time at the new rate.
                    stream.anchor_ns = due
                    stream.anchor_index = end - 1
                    stream.rate = rate
            # timing.next_due_ns, inlined: the due time of the next step's last token.
            next_due = stream.anchor_ns + round(
                (end + stream.step_tokens - 1 - stream.anchor_index) * timing.NS_PER_S / stream.rate
            )
            if data is not None and next_due <= now and not first and len(stream.held) < HOLD_STEPS:
                stream.held.append(data)
                stream.held_due.append(due)
                stream.due_ns = next_due
                heapq.heappush(self._heap, (next_due, next(self._seq), stream))
                return perf_counter_ns()
        # The time is taken before the bytes are handed to the kernel, never after: a stamp taken after the
        # write can come later than the client's read of those very bytes (and even than the client's end of
        # the whole answer) whenever this process is preempted between the write and the clock read, as it is
        # on a loaded machine. Before the write, the stamp is a true lower bound of when the bytes left.
        now = perf_counter_ns()
        if data is not None and transport is not None:
            if stream.held:
                stream.held.append(data)
                transport.write(b"".join(stream.held))
            else:
                transport.write(data)
        if stream.held:
            for held_due in stream.held_due:
                self._stamp(stream, record, held_due, now)
            stream.held.clear()
            stream.held_due.clear()
        # _stamp, inlined for the common step
        self.lateness.record_ns(now - due)
        record.chunk_ns.append(now)
        record.last_chunk_ns = now
        if stream.prev_write_ns:
            metrics.itl.observe((now - stream.prev_write_ns) / 1e9)
        stream.prev_write_ns = now
        if first:
            record.first_chunk_ns = now
            metrics.ttft.observe((now - record.arrival_ns) / 1e9)
            metrics.prefill_time.observe((now - record.admitted_ns) / 1e9)
        if last:
            self._finish(stream, now)
            return now
        stream.due_ns = next_due
        heapq.heappush(self._heap, (next_due, next(self._seq), stream))
        return now

    def _stamp(self, stream: Stream, record: RequestRecord, due: int, now: int) -> None:
        """One step went out at `now`: its lateness, its time in the record, the inter-token gap before it."""
        self.lateness.record_ns(now - due)
        record.chunk_ns.append(now)
        record.last_chunk_ns = now
        if stream.prev_write_ns:
            self.metrics.itl.observe((now - stream.prev_write_ns) / 1e9)
        stream.prev_write_ns = now

    @staticmethod
    def _event_bytes(stream: Stream, start: int, end: int, first: bool, last: bool) -> bytes:
        """The bytes of one step on the wire: its SSE event(s), framed as one HTTP chunk when the response is
        chunked, the last step followed by the terminating chunk: one `send` per step, nothing else."""
        templates = stream.templates
        assert templates is not None
        if end - start == 1:
            text = protocol.WORD_BYTES[(stream.text_offset + start) % len(protocol.WORD_BYTES)]
        else:
            text = protocol.output_text(stream.text_offset, start, end)
        if last:
            data = templates.final_chunk(text, stream.finish_reason)
            if stream.req.include_usage:
                data += templates.usage_chunk(stream.record.prompt_tokens, end, stream.record.cached_tokens)
            data += protocol.DONE
        else:
            data = templates.prefix + text + templates.suffix
        if first and templates.opening:
            data = templates.opening + data
        if stream.chunked:
            if last:
                return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
            return b"%x\r\n%s\r\n" % (len(data), data)
        return data

    def _start_decoding(self, stream: Stream) -> None:
        self.decoding += 1
        self.prefilling -= 1
        self._power_changed()
        stream.decoding = True
        stream.rate = self._rate_now(stream)
        stream.anchor_ns = stream.due_ns
        stream.anchor_index = 0
        stream.record.first_due_ns = stream.due_ns
        self.metrics.prompt_tokens += stream.record.prompt_tokens
        self.metrics.prompt_tokens_hist.observe(stream.record.prompt_tokens)
        if stream.on_first_token is not None:
            stream.on_first_token()

    def admit(self, stream: Stream) -> None:
        """A stream starts prefill: it holds KV for its prompt from now on."""
        self.kv_tokens += stream.record.prompt_tokens
        self.prefilling += 1
        self._power_changed()

    def _release(self, stream: Stream) -> None:
        if stream.decoding:
            self.decoding -= 1
            stream.decoding = False
        elif stream.emitted == 0:
            self.prefilling -= 1  # ended (aborted) before its first token
        self.kv_tokens -= stream.record.prompt_tokens + stream.emitted
        self._power_changed()

    def _finish(self, stream: Stream, now: int) -> None:
        record = stream.record
        metrics = self.metrics
        self._release(stream)
        record.finish_reason = stream.finish_reason
        record.status = "ok"
        metrics.request_success[stream.finish_reason] += 1
        metrics.e2e.observe((now - record.arrival_ns) / 1e9)
        metrics.queue_time.observe((record.admitted_ns - record.arrival_ns) / 1e9)
        first = record.first_chunk_ns or now
        metrics.decode_time.observe((now - first) / 1e9)
        metrics.generation_tokens_hist.observe(record.completion_tokens)
        if record.completion_tokens > 1:
            metrics.tpot.observe((now - first) / 1e9 / (record.completion_tokens - 1))
        _done(stream)

    def _abort(self, stream: Stream) -> None:
        """The client went away (or stopped reading): drop the stream, as vLLM aborts such a request."""
        self._release(stream)
        self.aborted += 1
        stream.record.status = "aborted"
        stream.record.finish_reason = "abort"
        self.metrics.request_success["abort"] += 1
        if stream.transport is not None and not stream.transport.is_closing():
            stream.transport.close()
        _done(stream)
