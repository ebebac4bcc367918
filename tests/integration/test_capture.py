"""The packet capture on loopback (farm.bench.capture) against a real socket pair: a reader that is late still gets
each event's own kernel stamp, taken after the server wrote it and before the client read it."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from farm.bench.capture import KernelStamps, LoopbackCapture, unavailable
from farm.bench.wire import exchanges
from farm.errors import MeasurementError

EVENTS = 10
GAP_S = 0.005
LATE_S = 0.08

can_capture = pytest.mark.skipif(unavailable("127.0.0.1") is not None, reason=str(unavailable("127.0.0.1")))


def serve(listener: socket.socket, written_ns: list[int]) -> None:
    """One chunked SSE response of EVENTS events GAP_S apart, each write's time noted just before it."""
    conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for index in range(EVENTS):
            event = b'data: {"choices":[{"delta":{"content":"t%d"}}]}\n\n' % index
            written_ns.append(time.monotonic_ns())
            conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            time.sleep(GAP_S)
        conn.sendall(b"0\r\n\r\n")
        conn.recv(1)  # until the client closes


@can_capture
def test_a_late_reader_gets_each_events_own_kernel_stamp() -> None:
    """The client reads everything once, 80 ms late: each event's stamp lies between its write and that read, and
    the request's send stamp after the client's own stamp taken just before its write."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        written: list[int] = []
        with LoopbackCapture(port) as capture:
            server = threading.Thread(target=serve, args=(listener, written))
            server.start()
            with socket.create_connection(("127.0.0.1", port)) as client:
                before_send = time.monotonic_ns()
                client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                time.sleep(LATE_S + EVENTS * GAP_S)
                client.recv(1 << 20)
                read_ns = time.monotonic_ns()
            server.join()
    assert capture.stats.dropped == 0
    (exchange,) = exchanges(capture.segments(), ("127.0.0.1", port)).exchanges
    assert exchange.request is not None
    assert exchange.request.last_ns >= before_send
    stamps = [event.last_ns for event in exchange.response.events if event.content]
    assert len(stamps) == EVENTS
    for wrote, stamp in zip(written, stamps, strict=True):
        assert wrote <= stamp < read_ns - LATE_S * 1e9 / 2, (wrote, stamp, read_ns)
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == EVENTS  # one stamp per packet, not one per read


def test_kernel_stamps_say_why_they_cannot_run() -> None:
    """A server not on loopback: no capture, the reason said; asked for kernel stamps, a MeasurementError."""
    with KernelStamps("http://192.0.2.1:8000") as stamps:
        pass
    assert stamps.reason is not None
    assert "not on IPv4 loopback" in stamps.reason or "AF_PACKET" in stamps.reason
    assert stamps.restamp([]).timestamps == "user"
    with pytest.raises(MeasurementError, match="kernel timestamps asked for but unavailable"):
        KernelStamps("http://example.invalid:8000", "kernel").__enter__()
    with KernelStamps("http://127.0.0.1:8000", "user") as asked:
        pass
    assert asked.reason == "user-space stamps asked for"
    with pytest.raises(ValueError, match="timestamps must be auto, kernel or user"):
        KernelStamps("http://127.0.0.1:8000", "wall")  # type: ignore[arg-type]
