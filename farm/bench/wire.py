"""HTTP/1.1 streaming exchanges rebuilt from captured packets, each SSE event stamped with the kernel's time (pure).

The timed client's user-space stamps say when its event loop got to a read, not when the bytes came: a client
sharing its core reads late, and every TTFT and ITL it stamps is bent by that lag. The kernel stamps each packet
as it is received; `farm.bench.capture` keeps one stamp per packet from an `AF_PACKET` capture (a `recvmsg` on the
TCP socket gives only the last byte's stamp of what it coalesced, measured: a reader 60 ms late got ten events
under one stamp). This module turns those packets into what the client saw, by sequence number:

- `parse_packet`: an IPv4 packet (as an `AF_PACKET` `SOCK_DGRAM` socket gives it, from the IP header) into a
  `Segment`: ports, sequence and acknowledgement numbers, flags, window, payload. Anything else is None.
- `Reassembly`: one direction of one TCP connection, segments in the order captured. A byte's stamp is the kernel
  time of the packet that made it readable in order (its own packet, or, after a gap, the packet that filled the
  gap: a reader cannot see a byte before the bytes ahead of it); a retransmitted byte keeps its first stamp.
- `parse_responses`: the server's bytes as HTTP/1.1 responses (status line, headers, `Content-Length` or chunked
  body, or a body to the close), each body cut into SSE events with the stamps of each event's first byte and of
  the byte that completed it (the blank line after it: an event is known only when it ends).
- `parse_requests`: the client's bytes as requests (headers and a `Content-Length` body): the stamp of each one's
  last byte is when it was sent.
- `exchanges`: all of it per connection, keyed by (client port, index of the response on that connection), with
  whether the client's receive window closed (the server was throttled by a reader that fell behind).

Times are whatever clock the packets carry (the capture moves them onto CLOCK_MONOTONIC).
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from farm.bench.sse import CHAT_TEXT_KEYS, COMPLETION_TEXT_KEYS, _event_payload, extract_text

TCP = 6
FIN = 0x01
SYN = 0x02
RST = 0x04
ACK = 0x10
TEXT_KEYS = CHAT_TEXT_KEYS + COMPLETION_TEXT_KEYS
"""An event carries content when any of these holds a non-empty string (chat or completions alike)."""

_COMPACT_MARKERS = tuple(key + b':"' for key in TEXT_KEYS)
_QUOTE = 0x22
_CR = 0x0D
_LF = 0x0A
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_HEAD_END = b"\r\n\r\n"
SEQ_MOD = 1 << 32


class WireFormatError(ValueError):
    """Captured bytes that are not the HTTP/1.1 a client and server speak."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One captured TCP segment (IPv4), with the kernel's stamp of its arrival."""

    stamp_ns: int
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    window: int
    payload: bytes
    window_scale: int | None = None
    """The window-scale option of a SYN, else None."""


def parse_packet(data: bytes, stamp_ns: int) -> Segment | None:
    """An IPv4 TCP packet starting at its IP header into a `Segment`; None for anything else (or cut short)."""
    if len(data) < 20 or data[0] >> 4 != 4 or data[9] != TCP:
        return None
    ihl = (data[0] & 0x0F) * 4
    total = struct.unpack_from("!H", data, 2)[0]
    if total > len(data) or len(data) < ihl + 20:
        return None  # truncated by the capture's snap length
    src_ip = ".".join(str(b) for b in data[12:16])
    dst_ip = ".".join(str(b) for b in data[16:20])
    sport, dport, seq, ack, offset_flags, window = struct.unpack_from("!HHIIHH", data, ihl)
    tcp_len = (offset_flags >> 12) * 4
    flags = offset_flags & 0x3F
    scale = _window_scale(data[ihl + 20 : ihl + tcp_len]) if flags & SYN else None
    return Segment(
        stamp_ns=stamp_ns,
        src=(src_ip, sport),
        dst=(dst_ip, dport),
        seq=seq,
        ack=ack,
        flags=flags,
        window=window,
        payload=bytes(data[ihl + tcp_len : total]),
        window_scale=scale,
    )


def _window_scale(options: bytes) -> int | None:
    index = 0
    while index < len(options):
        kind = options[index]
        if kind == 0:
            break
        if kind == 1:
            index += 1
            continue
        if index + 1 >= len(options):
            break
        length = options[index + 1]
        if kind == 3 and length == 3 and index + 2 < len(options):
            return min(options[index + 2], 14)
        if length < 2:
            break
        index += length
    return None


@dataclass
class Reassembly:
    """One direction of a TCP connection as an in-order byte stream, each run of bytes with its kernel stamp.

    `base` is the sequence number of the first byte (the SYN's plus one; else the first segment's). Segments are
    fed in capture order; `runs` holds (start offset, stamp) for each run of bytes that became readable at once.
    """

    base: int | None = None
    data: bytearray = field(default_factory=bytearray)
    run_starts: list[int] = field(default_factory=list)
    run_stamps: list[int] = field(default_factory=list)
    _ahead: dict[int, tuple[bytes, int]] = field(default_factory=dict)
    retransmitted_bytes: int = 0

    def syn(self, seq: int) -> None:
        self.base = (seq + 1) % SEQ_MOD

    def feed(self, seq: int, payload: bytes, stamp_ns: int) -> None:
        if not payload:
            return
        if self.base is None:
            self.base = seq
        offset = (seq - self.base) % SEQ_MOD
        if offset >= SEQ_MOD // 2:  # before the base: a retransmit of bytes from before the capture began
            offset -= SEQ_MOD
        end = offset + len(payload)
        have = len(self.data)
        if end <= have:
            self.retransmitted_bytes += len(payload)
            return
        if offset > have:
            kept = self._ahead.get(offset)
            if kept is None or len(kept[0]) < len(payload):
                self._ahead[offset] = (payload, kept[1] if kept else stamp_ns)
            return
        if offset < have:
            self.retransmitted_bytes += have - offset
        self._append(payload[have - offset :], stamp_ns)
        self._drain(stamp_ns)

    def _append(self, payload: bytes, stamp_ns: int) -> None:
        if self.run_stamps and self.run_stamps[-1] == stamp_ns:
            self.data += payload  # the same packet's stamp: one run
            return
        self.run_starts.append(len(self.data))
        self.run_stamps.append(stamp_ns)
        self.data += payload

    def _drain(self, stamp_ns: int) -> None:
        """Segments that arrived ahead of a gap become readable when the gap is filled: at `stamp_ns`."""
        while self._ahead:
            have = len(self.data)
            ready = [offset for offset in self._ahead if offset <= have]
            if not ready:
                return
            for offset in sorted(ready):
                payload, _ = self._ahead.pop(offset)
                have = len(self.data)
                if offset + len(payload) > have:
                    self._append(payload[have - offset :], stamp_ns)
                else:
                    self.retransmitted_bytes += len(payload)

    @property
    def gap(self) -> bool:
        """Bytes beyond a hole that never filled (the capture lost a packet)."""
        return bool(self._ahead)

    def stamp_at(self, offset: int) -> int:
        """The kernel stamp of the byte at `offset`."""
        if not 0 <= offset < len(self.data):
            raise IndexError(f"offset {offset} outside the {len(self.data)} bytes reassembled")
        return self.run_stamps[bisect.bisect_right(self.run_starts, offset) - 1]


@dataclass(frozen=True, slots=True)
class Event:
    """One SSE event: when its first byte and its completing blank line arrived, and whether it carried text."""

    first_ns: int
    last_ns: int
    content: bool


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP response as the capture saw it."""

    status: int
    head_ns: int
    events: tuple[Event, ...]
    end_ns: int | None
    """When its last byte arrived; None when it never completed in the capture."""
    complete: bool


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request as the capture saw it: stamps of its first and last bytes."""

    first_ns: int
    last_ns: int
    method: bytes
    target: bytes


def _head(data: bytes | bytearray, start: int) -> tuple[bytes, dict[bytes, bytes], int] | None:
    """(start line, lower-cased headers, offset after the blank line) of a head starting at `start`, or None when
    the head is not all there."""
    end = data.find(_HEAD_END, start)
    if end == -1:
        return None
    lines = bytes(data[start:end]).split(b"\r\n")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            raise WireFormatError(f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, end + 4


def parse_requests(stream: Reassembly) -> list[Request]:
    """The client's requests on one connection, in order (a `Content-Length` body or none)."""
    data = stream.data
    requests = []
    offset = 0
    while offset < len(data):
        head = _head(data, offset)
        if head is None:
            break
        line, headers, body_start = head
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            raise WireFormatError(f"bad request line {line[:80]!r}")
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            raise WireFormatError("a chunked request body is not followed")
        length = _content_length(headers)
        end = body_start + (length or 0)
        if end > len(data):
            break
        requests.append(Request(stream.stamp_at(offset), stream.stamp_at(end - 1), parts[0], parts[1]))
        offset = end
    return requests


def _content_length(headers: dict[bytes, bytes]) -> int | None:
    value = headers.get(b"content-length")
    if value is None:
        return None
    if not value.isdigit():
        raise WireFormatError(f"bad Content-Length {value[:40]!r}")
    return int(value)


def parse_responses(stream: Reassembly, *, closed: bool = False) -> list[Response]:
    """The server's responses on one connection, in order; `closed`: the connection ended (a body without length
    or chunking runs to the close)."""
    data = stream.data
    responses = []
    offset = 0
    while offset < len(data):
        head = _head(data, offset)
        if head is None:
            break
        line, headers, body_start = head
        parts = line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise WireFormatError(f"bad status line {line[:80]!r}")
        status = int(parts[1])
        head_ns = stream.stamp_at(body_start - 1)
        pieces: list[tuple[int, int]] = []  # (stream offset, length) of each piece of the body
        complete = False
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            position = body_start
            while True:
                size_end = data.find(b"\r\n", position)
                if size_end == -1:
                    break
                size_text = bytes(data[position:size_end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError as error:
                    raise WireFormatError(f"bad chunk size {size_text[:40]!r}") from error
                chunk_start = size_end + 2
                if size == 0:
                    trailer_end = data.find(b"\r\n", chunk_start)
                    while trailer_end not in (-1, chunk_start):  # trailers, then the blank line
                        chunk_start = trailer_end + 2
                        trailer_end = data.find(b"\r\n", chunk_start)
                    if trailer_end == -1:
                        break
                    position = trailer_end + 2
                    complete = True
                    break
                if chunk_start + size + 2 > len(data):
                    if chunk_start < len(data):
                        pieces.append((chunk_start, min(size, len(data) - chunk_start)))
                    position = len(data)
                    break
                pieces.append((chunk_start, size))
                position = chunk_start + size + 2
            end = position
        else:
            length = _content_length(headers)
            if length is None and status in (204, 304):
                length = 0
            if length is None:
                end = len(data)
                complete = closed
            else:
                end = min(body_start + length, len(data))
                complete = body_start + length <= len(data)
            if end > body_start:
                pieces.append((body_start, end - body_start))
        events = tuple(_events(stream, pieces)) if status == 200 else ()
        end_ns = stream.stamp_at(end - 1) if complete and end > 0 else None
        responses.append(Response(status, head_ns, events, end_ns, complete))
        if not complete:
            break
        offset = end
    return responses


def _events(stream: Reassembly, pieces: list[tuple[int, int]]) -> Iterable[Event]:
    """The body's SSE events, each stamped through the map from body offsets back to stream offsets."""
    data = stream.data
    body = b"".join(bytes(data[start : start + length]) for start, length in pieces)
    starts = []
    total = 0
    for _, length in pieces:
        starts.append(total)
        total += length

    def stream_offset(body_offset: int) -> int:
        index = bisect.bisect_right(starts, body_offset) - 1
        return pieces[index][0] + body_offset - starts[index]

    position = 0
    for match in _EVENT_END.finditer(body):
        text = body[position : match.start()]
        first = position
        position = match.end()
        if not text.strip(b"\r\n"):
            continue
        while body[first] in b"\r\n":  # a stray line end before the event belongs to no event
            first += 1
        if text[:6] == b"data: " and _LF not in text and _CR not in text:
            payload: bytes | None = text[6:]  # the one-line event servers write: no line-end handling needed
        else:
            payload = _event_payload(text.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
        if payload is None:
            continue
        yield Event(
            first_ns=stream.stamp_at(stream_offset(first)),
            last_ns=stream.stamp_at(stream_offset(match.end() - 1)),
            content=_has_text(payload),
        )


def _has_text(payload: bytes) -> bool:
    """Whether a text field holds a non-empty string; the compact `"content":"x` is found without a scan."""
    for marker in _COMPACT_MARKERS:
        at = payload.find(marker)
        if at != -1 and at + len(marker) < len(payload) and payload[at + len(marker)] != _QUOTE:
            return True
    return bool(extract_text(payload, TEXT_KEYS))


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its response on one connection, as the kernel saw them."""

    client_port: int
    index: int
    """Which response on its connection (0 first)."""
    request: Request | None
    response: Response
    syn_ns: int | None
    """When the connection's SYN was seen (None: it was open before the capture)."""


@dataclass
class _Connection:
    client: tuple[str, int]
    syn_ns: int | None = None
    to_server: Reassembly = field(default_factory=Reassembly)
    to_client: Reassembly = field(default_factory=Reassembly)
    client_scale: int = 0
    server_scale: int = 0
    scaling: bool = False
    client_acked: int | None = None
    client_window: int | None = None
    closed: bool = False
    zero_windows: int = 0
    window_full: int = 0


@dataclass(frozen=True, slots=True)
class Capture:
    """What one capture holds: the exchanges, and how often the client's receive window closed or filled."""

    exchanges: tuple[Exchange, ...]
    zero_windows: int
    """Packets from the client advertising a receive window of 0 (its socket buffer was full)."""
    window_full: int
    """Server packets that filled the window the client had advertised (the server could send no more)."""
    gaps: int
    """Connections with bytes the capture never saw (a lost packet): their exchanges after the hole are missing."""
    retransmitted_bytes: int


def exchanges(segments: Iterable[Segment], server: tuple[str, int]) -> Capture:
    """Every exchange with `server` (ip, port) in the capture; segments in capture order."""
    connections: list[_Connection] = []
    live: dict[tuple[str, int], _Connection] = {}
    for segment in segments:
        if segment.dst == server:
            client, to_server = segment.src, True
        elif segment.src == server:
            client, to_server = segment.dst, False
        else:
            continue
        connection = live.get(client)
        if segment.flags & SYN and to_server and not segment.flags & ACK:
            connection = _Connection(client, syn_ns=segment.stamp_ns)
            connection.to_server.syn(segment.seq)
            if segment.window_scale is not None:
                connection.client_scale = segment.window_scale
            live[client] = connection
            connections.append(connection)
            continue
        if connection is None:
            connection = _Connection(client)
            live[client] = connection
            connections.append(connection)
        if segment.flags & SYN:  # the SYN-ACK
            connection.to_client.syn(segment.seq)
            if segment.window_scale is not None and connection.syn_ns is not None:
                connection.server_scale = segment.window_scale
                connection.scaling = True
            continue
        if to_server:
            connection.to_server.feed(segment.seq, segment.payload, segment.stamp_ns)
            if segment.flags & ACK:
                if segment.window == 0 and not segment.flags & (RST | FIN):
                    connection.zero_windows += 1
                connection.client_acked = segment.ack
                connection.client_window = segment.window << (connection.client_scale if connection.scaling else 0)
        else:
            stream = connection.to_client
            stream.feed(segment.seq, segment.payload, segment.stamp_ns)
            if segment.payload and connection.client_acked is not None and connection.client_window is not None:
                limit = (connection.client_acked + connection.client_window) % SEQ_MOD
                if (segment.seq + len(segment.payload)) % SEQ_MOD == limit:
                    connection.window_full += 1
        if segment.flags & (FIN | RST):
            connection.closed = True
    found: list[Exchange] = []
    for connection in connections:
        requests = parse_requests(connection.to_server)
        responses = parse_responses(connection.to_client, closed=connection.closed)
        for index, response in enumerate(responses):
            request = requests[index] if index < len(requests) else None
            found.append(Exchange(connection.client[1], index, request, response, connection.syn_ns))
    return Capture(
        exchanges=tuple(found),
        zero_windows=sum(c.zero_windows for c in connections),
        window_full=sum(c.window_full for c in connections),
        gaps=sum(1 for c in connections if c.to_client.gap or c.to_server.gap),
        retransmitted_bytes=sum(c.to_client.retransmitted_bytes + c.to_server.retransmitted_bytes for c in connections),
    )
