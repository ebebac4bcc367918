"""Kernel receive stamps of every packet to and from a server on loopback: an `AF_PACKET` capture (Linux).

Why a capture and not `recvmsg` with `SO_TIMESTAMPNS` on the client's own sockets: on TCP that stamp is the last
byte's of what one read returned, and a late reader gets every queued event in one read under one stamp
(measured: ten events 5 ms apart read 60 ms late came back with the last one's stamp). A packet socket keeps one
stamp per packet, taken by the kernel when the packet was received, however late anyone reads it.

How: a `SOCK_DGRAM` packet socket (IP header first) bound to `lo`, outgoing copies ignored (`PACKET_IGNORE_OUTGOING`:
on loopback each packet is seen once, as received), a classic BPF filter that keeps TCP to or from the server's
port, and a TPACKET_V3 ring mapped into memory: the kernel writes packets and their stamps into blocks, and a
thread copies each block out whole as the kernel hands it over (one copy per block, not per packet; the packets
are parsed after the round by `farm.bench.wire`). The ring is large (`RING_BYTES`) so that a reader that falls
behind for a while loses nothing; the kernel's drop counter (`PACKET_STATISTICS`) is read at the end and a
capture that dropped packets says so.

Stamps are CLOCK_REALTIME (the kernel's software receive stamp, or its time of delivery to the ring where the
packet had none); they are moved onto CLOCK_MONOTONIC with an offset read at the start and checked at the end.

Where it cannot run (not Linux, no CAP_NET_RAW, a server not on loopback), `unavailable` says why and the timed
client keeps its user-space stamps.
"""

from __future__ import annotations

import ctypes
import ipaddress
import mmap
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal
from urllib.parse import urlsplit

from farm.bench import kstamps
from farm.bench.records import RequestSample
from farm.bench.wire import Segment, WireFormatError, exchanges, parse_packet
from farm.errors import MeasurementError

Timestamps = Literal["auto", "kernel", "user"]
"""`auto`: kernel stamps where the capture can run, else the client's; `kernel`: refuse to measure without them;
`user`: the client's own stamps only."""

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
TPACKET_V3 = 2
TP_STATUS_USER = 1
ETH_P_IP = 0x0800
SO_ATTACH_FILTER = 26

BLOCK_BYTES = 1 << 20
"""One ring block: the kernel hands a block over when it is full or `RETIRE_MS` after its first packet."""
RING_BYTES = 128 << 20
"""The ring: about a second of 256 streams' traffic even if the copying thread were stalled the whole time."""
RETIRE_MS = 4
"""A block that is not full is handed over this long after its first packet (so the end of a round is seen)."""
SNAP_BYTES = 65_536 + 128
"""Whole packets: loopback's MTU is 64 KiB."""


def unavailable(host: str) -> str | None:
    """Why packets to `host` cannot be captured here, or None when they can."""
    if not sys.platform.startswith("linux"):
        return f"no AF_PACKET on {sys.platform}"
    try:
        address = ipaddress.ip_address(loopback_address(host))
    except ValueError:
        return f"server {host} is not an IPv4 loopback address (only loopback is captured; no name is resolved)"
    if not (address.version == 4 and address.is_loopback):
        return f"server {host} is not on IPv4 loopback (only loopback is captured)"
    try:
        probe = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    except PermissionError:
        return "no CAP_NET_RAW to open a packet socket"
    except OSError as error:
        return f"cannot open a packet socket: {error}"
    probe.close()
    return None


def loopback_address(host: str) -> str:
    """The address of `host` without a name lookup: `localhost` is 127.0.0.1, anything else must be an address."""
    return "127.0.0.1" if host == "localhost" else host


def _port_filter(port: int) -> bytes:
    """A classic BPF program: accept IPv4 TCP whose source or destination port is `port`, drop the rest."""
    program = [
        (0x30, 0, 0, 9),  # ldb [9]: IP protocol
        (0x15, 0, 6, 6),  # jeq TCP, else drop
        (0xB1, 0, 0, 0),  # ldxb 4*([0]&0xf): IP header length
        (0x48, 0, 0, 0),  # ldh [x+0]: source port
        (0x15, 2, 0, port),  # jeq port: accept
        (0x48, 0, 0, 2),  # ldh [x+2]: destination port
        (0x15, 0, 1, port),  # jeq port: accept, else drop
        (0x06, 0, 0, 0x40000),  # ret: keep the whole packet
        (0x06, 0, 0, 0),  # ret: drop
    ]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


def realtime_to_monotonic_ns() -> int:
    """CLOCK_MONOTONIC minus CLOCK_REALTIME now: the tightest of a few interleaved readings."""
    readings = []
    for _ in range(16):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        readings.append((after - before, (before + after) // 2 - real))
    return min(readings)[1]


@dataclass
class CaptureStats:
    """What the kernel says about the capture: packets it delivered, and packets it dropped (ring full)."""

    packets: int = 0
    dropped: int = 0
    clock_drift_ns: int = 0
    """How far the realtime-to-monotonic offset moved over the capture (a clock step shows here)."""


@dataclass
class LoopbackCapture:
    """Packets to and from `port` on loopback while the `with` block runs: `segments()` afterwards."""

    port: int
    ring_bytes: int = RING_BYTES
    stats: CaptureStats = field(default_factory=CaptureStats)
    _blocks: list[bytes] = field(default_factory=list)
    _socket: socket.socket | None = None
    _ring: mmap.mmap | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _offset_ns: int = 0

    def __enter__(self) -> LoopbackCapture:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
        try:
            program = _port_filter(self.port)
            buffer = ctypes.create_string_buffer(program)
            fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(buffer))
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
            sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError as error:  # kernels before 4.20: each loopback packet would be seen twice
                raise OSError(f"PACKET_IGNORE_OUTGOING refused: {error}") from error
            blocks = max(self.ring_bytes // BLOCK_BYTES, 2)
            frame = 1 << 11
            request = struct.pack("IIIIIII", BLOCK_BYTES, blocks, frame, BLOCK_BYTES // frame * blocks, RETIRE_MS, 0, 0)
            sock.setsockopt(SOL_PACKET, PACKET_RX_RING, request)
            self._ring = mmap.mmap(
                sock.fileno(), BLOCK_BYTES * blocks, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
            sock.bind(("lo", ETH_P_IP))  # CPython swaps the protocol to network order itself
        except BaseException:
            sock.close()
            raise
        self._socket = sock
        self._offset_ns = realtime_to_monotonic_ns()
        self._thread = threading.Thread(target=self._copy, args=(blocks,), name="farm-capture", daemon=True)
        self._thread.start()
        return self

    def _copy(self, blocks: int) -> None:
        ring, sock = self._ring, self._socket
        assert ring is not None
        assert sock is not None
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN | select.POLLERR)
        index = 0
        draining = 0
        while True:
            start = index * BLOCK_BYTES
            status = struct.unpack_from("I", ring, start + 8)[0]
            if status & TP_STATUS_USER:
                used = struct.unpack_from("I", ring, start + 20)[0]  # blk_len: the bytes the kernel filled
                self._blocks.append(ring[start : start + used])
                struct.pack_into("I", ring, start + 8, 0)  # back to the kernel
                index = (index + 1) % blocks
                continue
            if self._stop.is_set():
                # After the stop, wait out the retire timeout once more for the last partial block.
                draining += 1
                if draining > 3:
                    return
            poller.poll(RETIRE_MS * 2)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        time.sleep(RETIRE_MS * 3 / 1000)  # the last packets' block retires
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        drift = realtime_to_monotonic_ns() - self._offset_ns
        self.stats.clock_drift_ns = drift
        if self._socket is not None:
            counters = self._socket.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12)
            self.stats.packets, self.stats.dropped = struct.unpack("II", counters[:8])
            if self._ring is not None:
                self._ring.close()
            self._socket.close()
        self._socket = None
        self._ring = None

    def segments(self) -> Iterator[Segment]:
        """Every captured segment in capture order, stamped on CLOCK_MONOTONIC."""
        offset = self._offset_ns
        for block in self._blocks:
            count, first = struct.unpack_from("II", block, 12)
            position = first
            for _ in range(count):
                next_offset, sec, nsec, snaplen = struct.unpack_from("IIII", block, position)
                mac = struct.unpack_from("H", block, position + 24)[0]
                segment = parse_packet(
                    block[position + mac : position + mac + snaplen], sec * 1_000_000_000 + nsec + offset
                )
                if segment is not None:
                    yield segment
                if not next_offset:
                    break
                position += next_offset


class KernelStamps:
    """A capture around one measurement and the kernel stamps it gives its samples:

        with KernelStamps(base_url) as stamps:
            samples = ...  # the timed client, in this process or others
        restamped = stamps.restamp(samples)

    With `mode="auto"` a capture that cannot run leaves the user-space stamps and says why (`reason`); with
    `mode="kernel"` it is a `MeasurementError`.
    """

    def __init__(self, base_url: str, mode: Timestamps = "auto") -> None:
        if mode not in ("auto", "kernel", "user"):
            raise ValueError(f"timestamps must be auto, kernel or user, not {mode!r}")
        parts = urlsplit(base_url)
        if parts.hostname is None:
            raise ValueError(f"no host in the server's URL {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.mode = mode
        self.reason: str | None = "user-space stamps asked for" if mode == "user" else None
        self._capture: LoopbackCapture | None = None
        self._address = ""

    def __enter__(self) -> KernelStamps:
        if self.mode == "user":
            return self
        self.reason = unavailable(self.host)
        if self.reason is None:
            try:
                self._address = loopback_address(self.host)
                self._capture = LoopbackCapture(self.port).__enter__()
            except OSError as error:
                self.reason = f"the packet capture could not start: {error}"
        if self.reason is not None and self.mode == "kernel":
            raise MeasurementError(f"kernel timestamps asked for but unavailable: {self.reason}")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._capture is not None:
            self._capture.__exit__(kind, error, trace)

    def restamp(self, samples: Sequence[RequestSample], *, monotonic_to_sample_ns: int = 0) -> kstamps.Restamped:
        """The samples on kernel stamps (after the `with` block), or as they are with the reason."""
        capture = self._capture
        if capture is None:
            return kstamps.user_only(samples, self.reason or "no capture")
        if capture.stats.dropped:
            return kstamps.user_only(samples, f"the capture's ring dropped {capture.stats.dropped} packets")
        try:
            seen = exchanges(capture.segments(), (self._address, self.port))
        except WireFormatError as error:
            return kstamps.user_only(samples, f"the captured stream does not parse: {error}")
        return kstamps.restamp(samples, seen, monotonic_to_sample_ns=monotonic_to_sample_ns)
