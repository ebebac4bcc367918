"""Server-sent events of an OpenAI-compatible stream, parsed incrementally from the bytes as they arrive.

This is the per-read work of the timed client, kept free of I/O so it is tested and benchmarked alone:

- `SSEDecoder` turns reads into event payloads: events split across reads, several events per read,
  `data:` with or without a space, comments, CRLF / CR / LF line ends, multi-line data.
- `extract_text` reads one string field (`"content"` of a chat delta, `"text"` of a completion choice)
  without decoding the whole chunk: the chunk is JSON, so an unescaped `"content"` followed by `:` can only
  be that key (inside a string every quote is escaped). A string with no backslash is returned as its raw
  UTF-8 bytes, one with escapes is decoded by `json.loads` of that string alone: both give the UTF-8 of the
  decoded text, which is what the output hash needs.
- `StreamAccumulator` keeps what a `RequestSample` needs: the arrival time of every content chunk, the text
  hash, and the final `usage`. Only the rare chunks without content that mention `usage` or `error` are
  decoded with `json.loads`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from farm.bench.records import RequestSample

DONE = b"[DONE]"
CHAT_TEXT_KEYS = (b'"content"', b'"reasoning_content"', b'"reasoning"')
"""Chat deltas: the answer, and the reasoning fields vLLM uses when a model thinks (a token is a token)."""
COMPLETION_TEXT_KEYS = (b'"text"',)

_QUOTE = 0x22
_BACKSLASH = 0x5C
_COLON = 0x3A
_CR = 0x0D
_LF = 0x0A
_WHITESPACE = frozenset(b" \t\r\n")


class StreamFormatError(ValueError):
    """The stream is not the SSE / JSON an OpenAI-compatible server sends."""


class SSEDecoder:
    """Incremental SSE parser: `feed(bytes)` returns the data payloads of the events that read completed."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    @property
    def idle(self) -> bool:
        """True between events: no partial event is waiting for the next read."""
        return not self._pending

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._pending + data if self._pending else data
        held = b""
        if _CR in buffer:
            if buffer.endswith(b"\r"):
                # The "\r" may be the first half of a "\r\n" split across reads: decide on the next read.
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = buffer.split(b"\n\n")
        self._pending = events.pop() + held
        payloads = []
        for event in events:
            if event:
                payload = _event_payload(event)
                if payload is not None:
                    payloads.append(payload)
        return payloads


def _event_payload(event: bytes) -> bytes | None:
    """The data of one event (its lines joined by LF), or None when it has none (a comment, an `id:`)."""
    if event[:6] == b"data: " and _LF not in event:
        return event[6:]
    data_lines = []
    for line in event.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data_lines.append(value)
    if not data_lines:
        return None
    payload = b"\n".join(data_lines)
    return payload or None


def extract_text(payload: bytes, keys: tuple[bytes, ...]) -> bytes:
    """The UTF-8 text of the first key in `keys` that holds a non-empty string; b"" when none does."""
    for key in keys:
        start = payload.find(key)
        while start != -1:
            text = _string_after_key(payload, start + len(key))
            if text:
                return text
            start = payload.find(key, start + 1)
    return b""


def _string_after_key(payload: bytes, index: int) -> bytes:
    """The string value after a key ending at `index`; b"" when it is not a key or its value no string."""
    size = len(payload)
    while index < size and payload[index] in _WHITESPACE:
        index += 1
    if index >= size or payload[index] != _COLON:
        return b""
    index += 1
    while index < size and payload[index] in _WHITESPACE:
        index += 1
    if index >= size or payload[index] != _QUOTE:
        return b""  # null, or another type
    return _string_at(payload, index)


def _string_at(payload: bytes, quote: int) -> bytes:
    """The UTF-8 of the JSON string whose opening quote is at `quote`."""
    end = payload.find(b'"', quote + 1)
    if end == -1:
        raise StreamFormatError(f"unterminated string in chunk: {payload[:200]!r}")
    segment = payload[quote + 1 : end]
    if _BACKSLASH not in segment:
        return segment
    while True:
        backslashes = 0
        probe = end - 1
        while payload[probe] == _BACKSLASH:
            backslashes += 1
            probe -= 1
        if backslashes % 2 == 0:
            break
        end = payload.find(b'"', end + 1)
        if end == -1:
            raise StreamFormatError(f"unterminated string in chunk: {payload[:200]!r}")
    try:
        text: str = json.loads(payload[quote : end + 1])
    except ValueError as error:
        raise StreamFormatError(f"bad string in chunk: {payload[:200]!r}") from error
    return text.encode("utf-8", "surrogatepass")


class StreamAccumulator:
    """What one streaming response tells the client, fed read by read with the time each read arrived.

    `feed` is the hot path. A single-line `data: {...}` event whose compact text field holds a non-empty
    string costs a handful of bytes operations; anything else (CR line ends, a comment, a spaced or empty
    field, usage, an error, `[DONE]`) goes through `SSEDecoder` and `extract_text`.
    """

    __slots__ = (
        "_decoder",
        "_hasher",
        "_keys",
        "_marker",
        "_pending",
        "cached_tokens",
        "chunk_ns",
        "completion_tokens",
        "done",
        "error",
        "prompt_tokens",
    )

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self._decoder = SSEDecoder()
        self._hasher = hashlib.sha256()
        self._keys = keys
        self._marker = keys[0] + b':"'  # the compact form servers write: "content":"...
        self._pending = b""
        self.chunk_ns: list[int] = []
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.cached_tokens: int | None = None
        """Prompt tokens the server says it served from its cache (`usage.prompt_tokens_details.cached_tokens`,
        or llama-server's `timings.cache_n`); None when it does not say."""
        self.error: str | None = None
        self.done = False

    def feed(self, data: bytes, now_ns: int) -> None:
        """One read of the response body, and `time.perf_counter_ns()` taken as soon as it was read."""
        # `int in bytes` is a memchr; `bytes in bytes` goes through the buffer protocol: ten times slower.
        if _CR in data or not self._decoder.idle:
            if self._pending:
                data, self._pending = self._pending + data, b""
            self._payloads(self._decoder.feed(data), now_ns)
            return
        buffer = self._pending + data if self._pending else data
        events = buffer.split(b"\n\n")
        self._pending = events.pop()
        marker = self._marker
        skip = len(marker) - 1
        try:
            for event in events:
                quote = event.rfind(marker)
                # One single-line `data: ` event whose text field is a non-empty string.
                if quote != -1 and event[quote + skip + 1] != _QUOTE and event[:6] == b"data: " and _LF not in event:
                    self.chunk_ns.append(now_ns)
                    self._hasher.update(_string_at(event, quote + skip))
                elif event:
                    payload = _event_payload(event)
                    if payload is not None:
                        self._payloads([payload], now_ns)
        except IndexError as error:  # the event ends right after the key: it was cut short
            raise StreamFormatError(f"truncated chunk in {buffer[:200]!r}") from error

    def _payloads(self, payloads: list[bytes], now_ns: int) -> None:
        keys = self._keys
        for payload in payloads:
            text = extract_text(payload, keys)
            if text:
                self.chunk_ns.append(now_ns)
                self._hasher.update(text)
            elif payload == DONE:
                self.done = True
            elif b'"usage"' in payload or b'"error"' in payload or b'"timings"' in payload:
                self._inspect(payload)

    def _inspect(self, payload: bytes) -> None:
        try:
            chunk: Any = json.loads(payload)
        except ValueError as error:
            raise StreamFormatError(f"chunk is not JSON: {payload[:200]!r}") from error
        if not isinstance(chunk, dict):
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = usage.get("prompt_tokens")
            self.completion_tokens = usage.get("completion_tokens")
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if isinstance(cached, int) and not isinstance(cached, bool):
                self.cached_tokens = cached
        timings = chunk.get("timings")
        cache_n = timings.get("cache_n") if isinstance(timings, dict) else None
        if isinstance(cache_n, int) and not isinstance(cache_n, bool):
            self.cached_tokens = cache_n
        if chunk.get("object") == "error" or "error" in chunk:
            detail = chunk.get("error", chunk)
            message = detail.get("message") if isinstance(detail, dict) else detail
            self.error = f"server error: {message or detail}"

    def sample(self, started_ns: int) -> RequestSample:
        """The request's sample. A stream without usage, or without any content, is a failed sample."""
        stamps = tuple(self.chunk_ns)
        error = self.error
        if error is None and self.completion_tokens is None:
            error = "no usage"
        if error is None and not stamps:
            error = "no content"
        return RequestSample(
            started_ns=started_ns,
            first_token_ns=stamps[0] if stamps else None,
            last_token_ns=stamps[-1] if stamps else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            chunk_ns=stamps,
            error=error,
            cached_tokens=self.cached_tokens,
            text_sha256=self._hasher.hexdigest(),
        )
