"""Packets to SSE events with the kernel's stamps (farm.bench.wire), and the samples moved onto them
(farm.bench.kstamps): built packets, no sockets."""

from __future__ import annotations

import struct

import pytest

from farm.bench.kstamps import restamp
from farm.bench.records import RequestSample
from farm.bench.wire import (
    ACK,
    FIN,
    SYN,
    Reassembly,
    Segment,
    WireFormatError,
    exchanges,
    parse_packet,
    parse_responses,
)

SERVER = ("127.0.0.1", 8000)
CLIENT = ("127.0.0.1", 40000)
CLIENT_ISN = 1000
SERVER_ISN = 5000
REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n{..}"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def event(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"' + text.encode() + b'"}}]}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
END = chunk(USAGE) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def ipv4_tcp(
    src: tuple[str, int],
    dst: tuple[str, int],
    seq: int,
    payload: bytes = b"",
    *,
    flags: int = ACK,
    ack: int = 0,
    window: int = 65535,
    options: bytes = b"",
) -> bytes:
    """An IPv4 packet with a TCP segment, as an AF_PACKET SOCK_DGRAM socket gives it (IP header first)."""
    tcp_len = 20 + len(options)
    tcp = struct.pack("!HHIIHHHH", src[1], dst[1], seq, ack, (tcp_len // 4) << 12 | flags, window, 0, 0) + options
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0, bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    return ip + tcp + payload


class Wire:
    """One connection's packets, built in order with their stamps."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.client_seq = CLIENT_ISN + 1
        self.server_seq = SERVER_ISN + 1

    def add(self, packet: bytes, stamp_ns: int) -> None:
        segment = parse_packet(packet, stamp_ns)
        assert segment is not None
        self.segments.append(segment)

    def handshake(self, stamp_ns: int) -> None:
        self.add(ipv4_tcp(CLIENT, SERVER, CLIENT_ISN, flags=SYN, options=b"\x03\x03\x07\x00"), stamp_ns)
        self.add(ipv4_tcp(SERVER, CLIENT, SERVER_ISN, flags=SYN | ACK, options=b"\x03\x03\x07\x00"), stamp_ns)

    def client(self, payload: bytes, stamp_ns: int, *, window: int = 65535) -> None:
        self.add(ipv4_tcp(CLIENT, SERVER, self.client_seq, payload, ack=self.server_seq, window=window), stamp_ns)
        self.client_seq += len(payload)

    def server(self, payload: bytes, stamp_ns: int, *, seq: int | None = None) -> None:
        at = self.server_seq if seq is None else seq
        self.add(ipv4_tcp(SERVER, CLIENT, at, payload, ack=self.client_seq), stamp_ns)
        if seq is None:
            self.server_seq += len(payload)


def one_exchange(wire: Wire) -> list[tuple[int, int]]:
    capture = exchanges(wire.segments, SERVER)
    assert len(capture.exchanges) == 1
    return [(e.first_ns, e.last_ns) for e in capture.exchanges[0].response.events if e.content]


def test_parse_packet_reads_ports_sequence_flags_and_payload() -> None:
    """The header fields and the payload come out of an IPv4 TCP packet; other packets are None."""
    segment = parse_packet(ipv4_tcp(CLIENT, SERVER, 77, b"abc", ack=9, window=123), 5)
    assert segment == Segment(5, CLIENT, SERVER, 77, 9, ACK, 123, b"abc")
    udp = bytearray(ipv4_tcp(CLIENT, SERVER, 1))
    udp[9] = 17
    assert parse_packet(bytes(udp), 0) is None
    assert parse_packet(ipv4_tcp(CLIENT, SERVER, 1, b"abcdef")[:-3], 0) is None  # cut short by the snap length
    syn = parse_packet(ipv4_tcp(CLIENT, SERVER, 1, flags=SYN, options=b"\x01\x03\x03\x09"), 0)
    assert syn is not None
    assert syn.window_scale == 9


def test_several_events_in_one_packet_share_its_stamp() -> None:
    """Two events in one packet: both stamped with that packet's arrival, however late the client read them."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    wire.server(HEAD + chunk(event("a")) + chunk(event("b")), 100)
    wire.server(END, 200)
    assert one_exchange(wire) == [(100, 100), (100, 100)]


def test_an_event_split_over_packets_has_the_first_packets_and_the_last_packets_stamps() -> None:
    """An event cut across three packets: its first byte's stamp is the first packet's, it completes with the
    third; the event after it in the third packet has the third's."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    body = chunk(event("split")) + chunk(event("next"))
    wire.server(HEAD + body[:20], 100)
    wire.server(body[20:40], 150)
    wire.server(body[40:] + END, 205)
    assert one_exchange(wire) == [(100, 205), (205, 205)]


def test_an_event_across_two_http_chunks_and_chunk_size_lines_split_from_their_data() -> None:
    """Chunked encoding boundaries: one SSE event sent as two HTTP chunks, a chunk-size line in one packet and its
    data in the next; the events come from the de-chunked body, stamped through it."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    first = event("one")
    wire.server(HEAD + chunk(first[:10]), 100)
    wire.server(chunk(first[10:]) + b"%x\r\n" % len(event("two")), 110)
    wire.server(event("two") + b"\r\n", 120)
    wire.server(END, 130)
    assert one_exchange(wire) == [(100, 110), (120, 120)]


def test_the_end_of_an_event_decides_its_last_stamp_with_crlf_line_ends() -> None:
    """CRLF event ends: the event completes with the packet that carried its blank line."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    crlf = event("x").replace(b"\n\n", b"\r\n\r\n")
    wire.server(HEAD + b"%x\r\n" % len(crlf) + crlf[:-2], 100)
    wire.server(crlf[-2:] + b"\r\n" + END, 140)
    assert one_exchange(wire) == [(100, 140)]


def test_a_retransmitted_segment_keeps_the_first_arrival() -> None:
    """A segment seen twice (a retransmit): its bytes keep the first stamp; the copy is counted."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    at = wire.server_seq
    wire.server(HEAD + chunk(event("a")), 100)
    wire.server(HEAD + chunk(event("a")), 180, seq=at)
    wire.server(chunk(event("b")) + END, 200)
    assert one_exchange(wire) == [(100, 100), (200, 200)]
    assert exchanges(wire.segments, SERVER).retransmitted_bytes == len(HEAD + chunk(event("a")))


def test_an_out_of_order_segment_is_readable_only_when_the_gap_before_it_fills() -> None:
    """A segment that arrives before the one ahead of it: its bytes are stamped when the hole is filled (a reader
    cannot see them earlier), the filler's own bytes with its own stamp."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    first = HEAD + chunk(event("a"))
    second = chunk(event("b"))
    start = wire.server_seq
    wire.server(second, 100, seq=start + len(first))  # arrives first
    wire.server(first, 130, seq=start)
    wire.server_seq = start + len(first) + len(second)
    wire.server(END, 200)
    assert one_exchange(wire) == [(130, 130), (130, 130)]


def test_a_hole_that_never_fills_is_reported_as_a_gap() -> None:
    """Bytes beyond a lost packet are not invented: the response stops before the hole and the gap is counted."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    wire.server(HEAD + chunk(event("a")), 100)
    wire.server(chunk(event("c")) + END, 200, seq=wire.server_seq + 50)
    capture = exchanges(wire.segments, SERVER)
    assert capture.gaps == 1
    response = capture.exchanges[0].response
    assert not response.complete
    assert [e.first_ns for e in response.events if e.content] == [100]


def test_requests_and_responses_pair_in_order_on_a_kept_alive_connection() -> None:
    """Two requests on one connection: each response's index, and each request's send time is the stamp of the
    packet with its last byte."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST[:30], 10)
    wire.client(REQUEST[30:], 12)
    wire.server(HEAD + chunk(event("a")) + END, 100)
    wire.client(REQUEST, 300)
    wire.server(HEAD + chunk(event("b")) + END, 400)
    wire.add(ipv4_tcp(SERVER, CLIENT, wire.server_seq, flags=FIN | ACK), 500)
    capture = exchanges(wire.segments, SERVER)
    assert [(e.client_port, e.index) for e in capture.exchanges] == [(40000, 0), (40000, 1)]
    requests = [e.request for e in capture.exchanges]
    assert [(r.first_ns, r.last_ns) for r in requests if r is not None] == [(10, 12), (300, 300)]
    assert [e.response.end_ns for e in capture.exchanges] == [100, 400]
    assert all(e.syn_ns == 0 for e in capture.exchanges)


def test_a_closed_receive_window_is_counted() -> None:
    """The client advertising a zero window (its socket buffer full) is what marks a round client-bound."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    wire.server(HEAD + chunk(event("a")), 100)
    wire.client(b"", 110, window=0)
    wire.server(END, 200)
    capture = exchanges(wire.segments, SERVER)
    assert capture.zero_windows == 1
    assert capture.window_full == 0


def test_the_server_filling_the_advertised_window_is_counted() -> None:
    """A server segment that ends exactly at the client's acknowledged byte plus its (scaled) window."""
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 10)
    # The window scale is 7 (the SYNs' option): a window field of 1 is 128 bytes; the server sends exactly those.
    wire.client(b"", 20, window=1)
    wire.server((HEAD + chunk(event("a")) * 3)[:128], 100)
    assert exchanges(wire.segments, SERVER).window_full == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"zz\r\n", "bad chunk size"),
        (b"", None),
    ],
)
def test_a_bad_chunk_size_is_an_error_naming_it(body: bytes, message: str | None) -> None:
    """A chunk-size line that is not hex is refused with its text; an empty body is an incomplete response."""
    stream = Reassembly()
    stream.feed(0, HEAD + body, 1)
    if message is None:
        (response,) = parse_responses(stream)
        assert not response.complete
        return
    with pytest.raises(WireFormatError, match=message):
        parse_responses(stream)


def test_a_bad_status_line_is_an_error() -> None:
    """Bytes that are not an HTTP/1.1 response are refused, naming the line."""
    stream = Reassembly()
    stream.feed(0, b"SSH-2.0-OpenSSH\r\n\r\n", 1)
    with pytest.raises(WireFormatError, match="bad status line"):
        parse_responses(stream)


def user_sample(started: int, chunks: tuple[int, ...], connection: tuple[int, int] | None) -> RequestSample:
    return RequestSample(
        started_ns=started,
        first_token_ns=chunks[0],
        last_token_ns=chunks[-1],
        prompt_tokens=3,
        completion_tokens=len(chunks),
        chunk_ns=chunks,
        connection=connection,
    )


def two_event_wire() -> Wire:
    wire = Wire()
    wire.handshake(0)
    wire.client(REQUEST, 1_000_000)
    wire.server(HEAD + chunk(event("a")), 51_000_000)
    wire.server(chunk(event("b")) + END, 56_000_000)
    return wire


def test_restamp_moves_a_sample_onto_the_kernel_stamps_and_keeps_its_own() -> None:
    """The matched sample's send, chunks, first and last token come from the capture; the user stamps are kept
    beside them and their difference is the client lag."""
    capture = exchanges(two_event_wire().segments, SERVER)
    sample = user_sample(900_000, (60_000_000, 66_000_000), (40000, 0))
    result = restamp([sample], capture)
    assert result.timestamps == "kernel"
    (moved,) = result.samples
    assert (moved.started_ns, moved.first_token_ns, moved.last_token_ns) == (1_000_000, 51_000_000, 56_000_000)
    assert moved.chunk_ns == (51_000_000, 56_000_000)
    assert (moved.user_started_ns, moved.user_chunk_ns) == (900_000, (60_000_000, 66_000_000))
    assert result.client_lag_ms == [9.0, 10.0]
    assert result.send_lag_ms == [0.1]
    assert not result.client_bound
    assert result.lag_summary()["client_lag_ms_max"] == 10.0


def test_restamp_applies_the_clock_offset() -> None:
    """Samples on another clock: the capture's stamps are moved by the offset."""
    capture = exchanges(two_event_wire().segments, SERVER)
    sample = user_sample(5_900_000, (65_000_000, 71_000_000), (40000, 0))
    (moved,) = restamp([sample], capture, monotonic_to_sample_ns=5_000_000).samples
    assert moved.chunk_ns == (56_000_000, 61_000_000)


@pytest.mark.parametrize(
    ("sample", "reason"),
    [
        (user_sample(0, (60_000_000, 66_000_000), None), "does not name its connection"),
        (user_sample(0, (60_000_000, 66_000_000), (40001, 0)), "no captured exchange for port 40001"),
        (user_sample(0, (60_000_000, 66_000_000), (40000, 1)), "two samples match one captured exchange"),
    ],
)
def test_restamp_keeps_every_user_stamp_when_one_sample_cannot_be_matched(sample: RequestSample, reason: str) -> None:
    """All or nothing: a sample that cannot be matched leaves the whole measurement on user stamps, saying why."""
    good = user_sample(900_000, (60_000_000, 66_000_000), (40000, 0))
    result = restamp([good, sample], exchanges(two_event_wire().segments, SERVER))
    assert result.timestamps == "user"
    assert result.reason is not None
    assert reason in result.reason
    assert result.samples == [good, sample]


def test_restamp_refuses_a_sample_whose_event_count_differs() -> None:
    """A capture with other events than the client parsed (a lost packet, another stream): user stamps, said why."""
    sample = user_sample(0, (60_000_000, 61_000_000, 66_000_000), (40000, 0))
    result = restamp([sample], exchanges(two_event_wire().segments, SERVER))
    assert result.timestamps == "user"
    assert result.reason is not None
    assert "holds 2 content events, the client parsed 3" in result.reason


def test_restamp_matches_by_send_time_when_the_connection_answered_before_the_capture() -> None:
    """A kept-alive connection that answered requests before the capture began: the client says response 7, the
    capture saw it as its first; the send time pairs them."""
    sample = user_sample(900_000, (60_000_000, 66_000_000), (40000, 7))
    result = restamp([sample], exchanges(two_event_wire().segments, SERVER))
    assert result.timestamps == "kernel"
    assert result.samples[0].chunk_ns == (51_000_000, 56_000_000)


def test_restamp_leaves_failed_samples_alone_and_flags_a_closed_window() -> None:
    """A failed sample is passed through; a zero window in the capture is the reason the round is client-bound."""
    wire = two_event_wire()
    wire.client(b"", 57_000_000, window=0)
    failed = RequestSample(0, None, None, None, None, error="HTTP 500: x")
    good = user_sample(900_000, (60_000_000, 66_000_000), (40000, 0))
    result = restamp([failed, good], exchanges(wire.segments, SERVER))
    assert result.samples[0] is failed
    assert result.samples[1].timestamps == "kernel"
    assert result.client_bound
    assert "receive window closed 1 times" in result.throttled[0]
