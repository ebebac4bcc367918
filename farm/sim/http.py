"""A small HTTP/1.1 server on a raw `asyncio.Protocol`: just what the simulator serves, with no task per request.

Why not aiohttp: a request there costs a task, a stream reader and a handler coroutine, about 180 µs on a slow
VM, so a burst of 64 streams took 20-30 ms to admit and every request's schedule started that much late. Here a
request is parsed in `data_received`, stamped the moment its body is complete (`Request.arrival_ns`: the truth
of every timing starts there), and handed to the application synchronously: at once, or, behind a server's
`Dispatcher`, in the next loop iteration, one request per iteration (see `Dispatcher`).

What it speaks:
    requests   a request line, headers, and a body of `Content-Length` bytes, parsed incrementally (a request
               may arrive in any number of reads); a chunked request body is refused with 411, a malformed
               request with 400, a body over `MAX_BODY_BYTES` with 413, a header section over
               `MAX_HEAD_BYTES` with 431; after any of these the connection closes. `Expect: 100-continue`
               is answered.
    responses  `Content-Length` bodies (`Connection.send`), or a stream (`Connection.start_stream` writes
               the head; the application writes pre-framed chunks straight to the transport and calls
               `Connection.finish`). HTTP/1.1 streams are chunked; HTTP/1.0 streams end by closing.
    keep-alive HTTP/1.1 by default, HTTP/1.0 never; `Connection: close` honoured.
    pipelining a request that arrives while the previous one is answered waits in the buffer, parsed only
               when the answer is complete, so answers stay in order (reading pauses if the buffer grows).

Arrival stamps: with the event loop from `new_event_loop`, a request's arrival is when the poll that reported
its last bytes returned, the moment the server learned of them; a burst of requests reported by one poll all
arrive then, however long the first ones take to handle. (Without it, `perf_counter_ns()` in `data_received`:
the later requests of a burst would arrive as late as the handling of those before them.)

The application is a callable `(Request, Connection) -> Response | None`: a Response is sent at once; None
means the application answers later (a stream, a response due when the last token is, or never: a hang).
"""

from __future__ import annotations

import asyncio
import json
import selectors
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from time import perf_counter_ns
from typing import Any

MAX_HEAD_BYTES = 64 * 1024  # request line and headers; browsers and clients stay far below
MAX_BODY_BYTES = 64 * 1024 * 1024  # a 200k-token prompt is about 1 MB of JSON; aiohttp's limit was set to this
MAX_PENDING_BYTES = 1024 * 1024  # buffered while an answer is in progress before reading pauses

_REASONS = {s.value: s.phrase.encode("latin-1") for s in HTTPStatus}
_NO_BODY_STATUSES = frozenset({204, 304})
_STREAM_HEADS: dict[tuple[int, tuple[tuple[str, str], ...], bool, bool], bytes] = {}


@dataclass(slots=True)
class Request:
    """One parsed request. Header names are lower-case; `arrival_ns` is when its last byte was read."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes
    arrival_ns: int
    path: str = ""
    query: str = ""

    def __post_init__(self) -> None:
        path, _, query = self.target.partition("?")
        self.path = path
        self.query = query

    @property
    def http11(self) -> bool:
        return self.version == "HTTP/1.1"


@dataclass(slots=True)
class Response:
    """A complete response: status, body and its content type, and any extra headers."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


JSON = "application/json"


def json_response(obj: Any, status: int = 200) -> Response:
    """A JSON answer."""
    return Response(status, json.dumps(obj).encode(), JSON)


Application = Callable[[Request, "Connection"], Response | None]


class BadRequest(Exception):
    """The bytes on the wire are not a request this server accepts; answered with `status`, then closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str) -> Response:
    """A protocol-level error (before any route): FastAPI's `{"detail": ...}` shape, as vLLM answers."""
    body = b'{"detail":"%s"}' % message.replace('"', "'").encode("latin-1", "replace")
    return Response(status, body, "application/json")


def parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """The request line and headers (without the blank line). Raises BadRequest for anything malformed."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # latin-1 decodes any byte; kept for the type checker's sake
        raise BadRequest(400, "undecodable request head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise BadRequest(400, "bad request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505 if version.startswith("HTTP/") else 400, "unsupported HTTP version")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise BadRequest(400, "bad header line")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers:
            if key == "content-length" and headers[key] != value:
                raise BadRequest(400, "conflicting Content-Length headers")
            headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    return method, target, version, headers


def body_length(headers: dict[str, str]) -> int:
    """How many body bytes follow the head: Content-Length, or 0. A chunked body is refused (411)."""
    if "transfer-encoding" in headers:
        raise BadRequest(411, "chunked request bodies are not accepted: send Content-Length")
    raw = headers.get("content-length")
    if raw is None:
        return 0
    if "," in raw:  # the same value repeated (checked equal in parse_head)
        raw = raw.split(",")[0].strip()
    if not raw.isdigit():
        raise BadRequest(400, "bad Content-Length")
    length = int(raw)
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, "request body too large")
    return length


def response_head(
    status: int, content_type: str | None, length: int | None, headers: dict[str, str], close: bool
) -> bytes:
    """A response's status line and headers, up to and including the blank line."""
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
    if content_type is not None:
        lines.append(b"Content-Type: %s\r\n" % content_type.encode("latin-1"))
    if length is not None and status not in _NO_BODY_STATUSES:
        lines.append(b"Content-Length: %d\r\n" % length)
    for name, value in headers.items():
        lines.append(b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1")))
    if close:
        lines.append(b"Connection: close\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


class StampingSelector(selectors.DefaultSelector):
    """The loop's selector, noting when each poll returned: when the loop learned of the events it reports."""

    ready_ns = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(timeout)
        self.ready_ns = perf_counter_ns()
        return events


def new_event_loop() -> tuple[asyncio.AbstractEventLoop, Callable[[], int]]:
    """An event loop whose connections stamp arrivals at poll time, and the clock that reads that stamp."""
    selector = StampingSelector()
    return asyncio.SelectorEventLoop(selector), lambda: selector.ready_ns


class Dispatcher:
    """Hands parsed requests to the application one per loop iteration, in arrival order.

    Why not at once in `data_received`: handling a generation request costs about 100 µs on a slow VM, and
    while a burst is handled nothing polls, so requests arriving meanwhile would be stamped only at the next
    poll, as late as the whole batch took. One request per iteration puts a poll (cheap, no timeout) between
    any two, so every arrival is stamped within one request's handling of its bytes being read. It is one
    callback for all pending requests, not a task each.
    """

    def __init__(self) -> None:
        self.pending: deque[tuple[Connection, Request]] = deque()
        self._scheduled = False

    def submit(self, conn: Connection, request: Request) -> None:
        self.pending.append((conn, request))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run_one)

    def _run_one(self) -> None:
        self._scheduled = False
        if not self.pending:
            return
        conn, request = self.pending.popleft()
        if self.pending:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run_one)
        if not conn.closed:
            conn.dispatch(request)


class Connection(asyncio.Protocol):
    """One client connection: parses requests, hands them to the application one at a time, writes answers."""

    def __init__(
        self,
        app: Application,
        connections: set[Connection] | None = None,
        clock: Callable[[], int] = perf_counter_ns,
        dispatcher: Dispatcher | None = None,
    ) -> None:
        self.app = app
        self.connections = connections
        self.clock = clock
        self.dispatcher = dispatcher  # None: each request handled at once in data_received
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.busy = False  # a request is being answered; what arrives meanwhile waits in the buffer
        self.keep_alive = True
        self.head_only = False  # the request being answered is a HEAD
        self.version = "HTTP/1.1"  # of the request being answered
        self.on_lost: Callable[[], None] | None = None  # the application's hook while it answers later
        self._buffer = b""
        self._not_before_ns = 0  # no request on this connection can have arrived before this
        self._head: tuple[str, str, str, dict[str, str]] | None = None
        self._body_start = 0
        self._body_length = 0
        self._parsing = False
        self._paused = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._not_before_ns = self.clock()
        if self.connections is not None:
            self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.connections is not None:
            self.connections.discard(self)
        hook, self.on_lost = self.on_lost, None
        if hook is not None:
            hook()

    def data_received(self, data: bytes) -> None:
        self._buffer = self._buffer + data if self._buffer else data
        if self.busy:
            if len(self._buffer) > MAX_PENDING_BYTES and not self._paused and self.transport is not None:
                self.transport.pause_reading()
                self._paused = True
            return
        self._parse()

    # parsing

    def _parse(self) -> None:
        if self._parsing:
            return
        self._parsing = True
        try:
            while not self.busy and not self.closed and self._buffer:
                if not self._next_request():
                    return
        finally:
            self._parsing = False

    def _next_request(self) -> bool:
        """Parse and dispatch one request from the buffer; False when more bytes are needed (or it closed)."""
        buffer = self._buffer
        try:
            if self._head is None:
                if buffer[:2] == b"\r\n":  # a stray CRLF between requests is allowed (RFC 9112 2.2)
                    self._buffer = buffer = buffer.lstrip(b"\r\n")
                    if not buffer:
                        return False
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise BadRequest(431, "request header fields too large")
                    return False
                if end > MAX_HEAD_BYTES:
                    raise BadRequest(431, "request header fields too large")
                self._head = parse_head(buffer[:end])
                self._body_start = end + 4
                self._body_length = body_length(self._head[3])
                if (
                    self._head[3].get("expect", "").lower() == "100-continue"
                    and len(buffer) < self._body_start + self._body_length
                    and self.transport is not None
                ):
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body_end = self._body_start + self._body_length
            if len(buffer) < body_end:
                return False
        except BadRequest as exc:
            self._fail(exc)
            return False
        # The poll stamp, but never before this connection existed or its previous answer ended: a stamp from
        # a poll that returned before the request's bytes could have been sent would be wrong, not just early.
        arrival_ns = max(self.clock(), self._not_before_ns)
        method, target, version, headers = self._head
        body = buffer[self._body_start : body_end]
        self._buffer = buffer[body_end:]
        self._head = None
        connection_header = headers.get("connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in connection_header
        self.head_only = method == "HEAD"
        self.version = version
        self.busy = True
        request = Request(method, target, version, headers, body, arrival_ns)
        if self.dispatcher is not None:
            self.dispatcher.submit(self, request)
        else:
            self.dispatch(request)
        return True

    def dispatch(self, request: Request) -> None:
        """Hand a parsed request to the application and send its answer if it gives one now."""
        try:
            response = self.app(request, self)
        except Exception as exc:
            # A bug in a handler answers 500 and closes this connection; the server and its streams go on.
            response = error_response(500, f"{type(exc).__name__}: {exc}")
            self.keep_alive = False
        if response is not None:
            self.send(response)

    def _fail(self, exc: BadRequest) -> None:
        self.keep_alive = False
        self.head_only = False
        self.busy = True
        self.send(error_response(exc.status, exc.message))

    # answering

    def send(self, response: Response) -> None:
        """Write a complete response and finish the exchange."""
        transport = self.transport
        if transport is not None and not self.closed and not transport.is_closing():
            body = b"" if self.head_only or response.status in _NO_BODY_STATUSES else response.body
            head = response_head(
                response.status, response.content_type, len(response.body), response.headers, not self.keep_alive
            )
            transport.write(head + body)
        self.finish()

    def stream_head(self, status: int, headers: dict[str, str]) -> tuple[bytes, bool]:
        """A streamed response's head, and whether its body must be framed as HTTP chunks.

        HTTP/1.1: chunked, and the caller writes each chunk framed, then the `0\\r\\n\\r\\n` terminator.
        HTTP/1.0: unframed, and the connection closes when the stream finishes. The caller writes the head.
        """
        chunked = self.version == "HTTP/1.1"
        key = (status, tuple(headers.items()), chunked, self.keep_alive)
        head = _STREAM_HEADS.get(key)
        if head is None:
            extra = dict(headers)
            if chunked:
                extra["Transfer-Encoding"] = "chunked"
            head = _STREAM_HEADS[key] = response_head(status, None, None, extra, not self.keep_alive)
        return head, chunked

    def write(self, data: bytes) -> None:
        """Write raw bytes of the answer in progress (nothing once the connection is closed)."""
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def finish(self) -> None:
        """The current answer is complete: close, or read the next request."""
        self.on_lost = None
        self.head_only = False
        if not self.keep_alive or self.closed:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()
            self.busy = False
            return
        self.busy = False
        self._not_before_ns = self.clock()
        if self._paused and self.transport is not None:
            self.transport.resume_reading()
            self._paused = False
        if self._buffer:
            self._parse()

    def close(self) -> None:
        """Close the connection now (server shutdown)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def connection_factory(
    app: Application, connections: set[Connection], clock: Callable[[], int] = perf_counter_ns
) -> Callable[[], Any]:
    """The protocol factory for `loop.create_server`: connections registered in `connections`, their requests
    handed to `app` by one shared `Dispatcher`."""
    dispatcher = Dispatcher()
    return lambda: Connection(app, connections, clock, dispatcher)
