"""The timed path: one streaming completion per call, timed from a monotonic clock in the client.

One `StreamClient` (one aiohttp session, its connector limited to the measurement's concurrency) serves one
measurement. The request body is serialised before the clock starts. `started_ns` is taken when aiohttp is
about to write the request to the socket (its `on_request_chunk_sent` trace signal, fired right before the
write), so a request waiting in our own event loop behind the others of a burst, or for its connection, is
not counted as server latency; it falls back to the moment `post` was called when the signal never fired.
Every read of the body is stamped with `time.perf_counter_ns()` as soon as aiohttp hands it over
(`iter_any`, no line buffering), then parsed by `farm.bench.sse.StreamAccumulator`.

A request that fails (HTTP status, connection, timeout, a stream without usage) returns a `RequestSample` with
`error` set: failures are data. The `openai` package is not used here; its per-chunk cost is ten times ours.

Each sample names its connection (the local port, and which response on that connection it was), so that a
packet capture (`farm.bench.kstamps`) can put the kernel's receive stamps in place of these user-space ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace, TracebackType
from typing import Any, Literal

import aiohttp

from farm.bench.records import RequestSample
from farm.bench.sse import CHAT_TEXT_KEYS, COMPLETION_TEXT_KEYS, StreamAccumulator, StreamFormatError

Api = Literal["chat", "completions"]

IDLE_KEEPALIVE_S = 4.0
"""Seconds an idle client connection is kept: under cpp-httplib's 5 s keep-alive (llama-server)."""

RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024
"""Each connection's socket receive buffer (the kernel caps it at `net.core.rmem_max`). A client that falls behind
reading leaves the bytes in the kernel; with the default buffer (128 KiB, and each small loopback packet costs its
whole buffer's truesize) a stream of 5 ms tokens closed its window after about half a second of lag, which throttles
the server, the one lag kernel receive stamps cannot undo (`farm.bench.kstamps`)."""

ERROR_BODY_BYTES = 500
"""How much of an error response's body a failed sample keeps."""


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """One streaming request. EOS is ignored and `min_tokens` = `max_tokens` unless said otherwise, so that
    random-weight models (and real ones) produce exactly the asked length."""

    prompt: str
    max_tokens: int
    api: Api = "chat"
    temperature: float = 0.0
    thinking: bool = False
    ignore_eos: bool = True
    min_tokens: int | None = None
    history: Sequence[tuple[str, str]] = ()
    """Earlier turns as (user, assistant) pairs, sent before `prompt` as chat messages (the chat API only)."""
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Engine-specific body fields added as they are (llama.cpp's `cache_prompt: false` on a cold request)."""

    def body(self, model: str) -> dict[str, Any]:
        """The JSON body for vLLM's OpenAI-compatible API (vLLM's extra sampling fields at the top level)."""
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self.max_tokens,
            "min_tokens": self.max_tokens if self.min_tokens is None else self.min_tokens,
            "ignore_eos": self.ignore_eos,
            "temperature": self.temperature,
        }
        if self.api == "chat":
            body["messages"] = [
                *(
                    message
                    for said, answer in self.history
                    for message in ({"role": "user", "content": said}, {"role": "assistant", "content": answer})
                ),
                {"role": "user", "content": self.prompt},
            ]
            body["chat_template_kwargs"] = {"enable_thinking": self.thinking}
        else:
            body["prompt"] = self.prompt
        if self.extra:
            body.update(self.extra)
        return body

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"


MEASUREMENT_GC_THRESHOLDS = (50_000, 50, 100)
"""While a measurement runs, young collections every 50k allocations instead of 700: a collection pause in the
client is time added to every TTFT and ITL stamped after it."""


class _QuietGC:
    """Fewer, later garbage collections while any measurement runs (nesting allowed); restored after the last."""

    def __init__(self) -> None:
        self._depth = 0
        self._saved: tuple[int, int, int] = gc.get_threshold()

    def enter(self) -> None:
        if self._depth == 0:
            self._saved = gc.get_threshold()
            gc.freeze()  # what exists before the measurement is never scanned during it
            gc.set_threshold(*MEASUREMENT_GC_THRESHOLDS)
        self._depth += 1

    def exit(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            gc.set_threshold(*self._saved)
            gc.unfreeze()


_quiet_gc = _QuietGC()


class StreamClient:
    """Streaming requests to one server for one measurement: `async with StreamClient(...) as client`."""

    def __init__(self, base_url: str, model: str, *, concurrency: int = 1, request_timeout_s: float = 600.0):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.concurrency = concurrency
        self.request_timeout_s = request_timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._answered: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        """Responses received so far on each connection (by its protocol object): the index of the next one."""

    async def __aenter__(self) -> StreamClient:
        # An idle connection is dropped after 4 s, before llama-server's HTTP library (cpp-httplib) closes it at
        # 5 s: a request written into a connection the server had closed fails ("Can not write request body").
        connector = aiohttp.TCPConnector(
            limit=self.concurrency,
            limit_per_host=0,
            ttl_dns_cache=None,
            keepalive_timeout=IDLE_KEEPALIVE_S,
            socket_factory=_roomy_socket,
        )
        tracing = aiohttp.TraceConfig()
        tracing.on_request_chunk_sent.append(_stamp_send)
        self._session = aiohttp.ClientSession(
            connector=connector,
            trace_configs=[tracing],
            timeout=aiohttp.ClientTimeout(total=None),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
            auto_decompress=False,
        )
        _quiet_gc.enter()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._session is not None:
            _quiet_gc.exit()
            await self._session.close()
            self._session = None

    async def stream(self, request: StreamRequest, *, timeout_s: float | None = None) -> RequestSample:
        """Send one request and time its stream; `timeout_s` (default: the client's) bounds all of it."""
        session = self._session
        if session is None:
            raise RuntimeError("StreamClient used outside `async with`")
        url = self.base_url + request.path
        payload = json.dumps(request.body(self.model)).encode()
        keys = CHAT_TEXT_KEYS if request.api == "chat" else COMPLETION_TEXT_KEYS
        accumulator = StreamAccumulator(keys)
        limit = self.request_timeout_s if timeout_s is None else min(timeout_s, self.request_timeout_s)
        clock = time.perf_counter_ns
        called_ns = clock()
        connection: tuple[int, int] | None = None
        for attempt in range(2):
            sent = _SendStamp()
            answered = False
            try:
                async with asyncio.timeout(limit):
                    async with session.post(url, data=payload, trace_request_ctx=sent) as response:
                        answered = True
                        connection = self._connection_of(response)
                        if response.status != 200:
                            body = await response.content.read(ERROR_BODY_BYTES)
                            text = body.decode("utf-8", "replace").strip()
                            return _failed(sent.ns or called_ns, f"HTTP {response.status}: {text}")
                        feed = accumulator.feed
                        async for data in response.content.iter_any():
                            feed(data, clock())
            except TimeoutError:
                return _failed(sent.ns or called_ns, f"timeout after {limit:.1f} s", accumulator)
            except aiohttp.ClientConnectionError as error:
                # A pooled connection the server had already closed (llama-server's cpp-httplib closes one after
                # a stream): nothing was answered, so the request is sent once more on a fresh connection.
                if attempt == 0 and not answered:
                    continue
                return _failed(sent.ns or called_ns, f"{type(error).__name__}: {error}", accumulator)
            except aiohttp.ClientError as error:
                return _failed(sent.ns or called_ns, f"{type(error).__name__}: {error}", accumulator)
            except StreamFormatError as error:
                return _failed(sent.ns or called_ns, f"bad stream: {error}", accumulator)
            break
        return replace(accumulator.sample(sent.ns or called_ns), connection=connection)

    def _connection_of(self, response: aiohttp.ClientResponse) -> tuple[int, int] | None:
        """(local port, index of this response on its connection), counted per connection; None when unknown."""
        # The response's protocol, not its connection: a body that had all arrived by the time the head was read
        # has already released the connection (None) back to the pool; the protocol is that socket's still.
        protocol = getattr(response, "_protocol", None)
        if protocol is None and response.connection is not None:
            protocol = response.connection.protocol
        transport = getattr(protocol, "transport", None)
        if protocol is None or transport is None:
            return None
        name = transport.get_extra_info("sockname")
        if not isinstance(name, tuple) or len(name) < 2:
            return None
        index = self._answered.get(protocol, 0)
        self._answered[protocol] = index + 1
        return (int(name[1]), index)


def _roomy_socket(address: tuple[Any, ...]) -> socket.socket:
    """A client socket with a receive buffer of `RECEIVE_BUFFER_BYTES` (set before connect, so the window scale
    is chosen for it)."""
    family, kind, proto = address[0], address[1], address[2]
    sock = socket.socket(family, kind, proto)
    with contextlib.suppress(OSError):  # a platform that refuses it keeps its default; a capture shows the cost
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    return sock


class _SendStamp:
    """When the request's first bytes were handed to the socket (0 until then)."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0


async def _stamp_send(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    stamp = context.trace_request_ctx
    if isinstance(stamp, _SendStamp) and not stamp.ns:
        stamp.ns = time.perf_counter_ns()


def _failed(started_ns: int, error: str, accumulator: StreamAccumulator | None = None) -> RequestSample:
    stamps = tuple(accumulator.chunk_ns) if accumulator is not None else ()
    return RequestSample(
        started_ns=started_ns,
        first_token_ns=stamps[0] if stamps else None,
        last_token_ns=stamps[-1] if stamps else None,
        prompt_tokens=accumulator.prompt_tokens if accumulator is not None else None,
        completion_tokens=accumulator.completion_tokens if accumulator is not None else None,
        chunk_ns=stamps,
        error=error,
    )
