"""The kernel's receive stamps put in place of the client's own, per request sample (pure, no I/O).

A sample from the timed client (`farm.bench.stream`) names its connection: the local port and which response on
that connection it was. Of the capture's exchanges on that port (`farm.bench.wire.exchanges`), the one whose
request was sent nearest the client's own send stamp is the sample's (a connection carries one request at a time;
a connection opened before the capture began has answered some the capture never saw, so the index alone cannot
say), and gives:

- the send time: the kernel's stamp of the packet that carried the request's last byte;
- each content chunk's time: the stamp of the packet that completed its SSE event (the blank line after it),
  the moment the event became readable, however late the client's loop got to it.

TTFT, ITL and E2E then come from those stamps. The client's own stamps are kept beside them (`user_started_ns`,
`user_chunk_ns`); their difference is the client's lag in reading, reported per measurement (`client_lag_ms`).

All or nothing per measurement: when any successful sample cannot be matched (no connection known, no exchange,
another count of content events than the client parsed: a capture that lost packets), every sample keeps its
user-space stamps and the reason is said, so one measurement never mixes two clocks.

Client-bound, with kernel stamps, means the client fell behind in reading far enough to throttle the server: its
receive window closed (zero-window packets) or the server sent exactly up to the window the client had advertised.
A loop that lagged but read before the buffers filled bent only the user-space stamps, which are not used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from farm.bench import metrics
from farm.bench.records import RequestSample
from farm.bench.wire import Capture, Exchange

KERNEL = "kernel"
USER = "user"


@dataclass(frozen=True)
class Restamped:
    """The samples of one measurement, on kernel stamps where every one could be matched, and what that showed."""

    samples: list[RequestSample]
    timestamps: str
    """`kernel` or `user`."""
    reason: str | None = None
    """Why the stamps are the user-space ones (None with kernel stamps)."""
    client_lag_ms: list[float] = field(default_factory=list)
    """Per content chunk: the client's stamp minus the kernel's (ms)."""
    send_lag_ms: list[float] = field(default_factory=list)
    """Per request: the kernel's send stamp minus the client's (ms): the write after the client's stamp."""
    throttled: list[str] = field(default_factory=list)
    """Why the client throttled the server (the narrower client-bound); empty when it did not."""

    @property
    def client_bound(self) -> bool:
        return bool(self.throttled)

    def lag_summary(self) -> dict[str, float]:
        """Client lag p50 / p99 / max (ms), empty where there are no kernel stamps."""
        if not self.client_lag_ms:
            return {}
        lags = self.client_lag_ms
        return {
            "client_lag_ms_p50": metrics.percentile(lags, 50),
            "client_lag_ms_p99": metrics.percentile(lags, 99),
            "client_lag_ms_max": max(lags),
        }


def _sent_gap(exchange: Exchange, shift: int, sample: RequestSample) -> int:
    assert exchange.request is not None
    return abs(exchange.request.last_ns + shift - sample.started_ns)


def user_only(samples: Sequence[RequestSample], reason: str) -> Restamped:
    """The samples as they are, on user-space stamps, with the reason."""
    return Restamped(list(samples), USER, reason)


def restamp(samples: Sequence[RequestSample], capture: Capture, *, monotonic_to_sample_ns: int = 0) -> Restamped:
    """Each successful sample moved onto the kernel stamps of its exchange in `capture`.

    `monotonic_to_sample_ns`: the samples' clock minus CLOCK_MONOTONIC (the capture's clock); 0 when the samples are
    on `time.perf_counter_ns` of a Linux process (the same clock).
    """
    by_port: dict[int, list[Exchange]] = {}
    for exchange in capture.exchanges:
        if exchange.request is not None:
            by_port.setdefault(exchange.client_port, []).append(exchange)
    used: set[int] = set()
    shift = monotonic_to_sample_ns
    out: list[RequestSample] = []
    lags: list[float] = []
    send_lags: list[float] = []
    for sample in samples:
        if not sample.ok:
            out.append(sample)
            continue
        if sample.connection is None:
            return user_only(samples, "a sample does not name its connection")
        candidates = by_port.get(sample.connection[0], [])
        if not candidates:
            return user_only(
                samples,
                f"no captured exchange for port {sample.connection[0]}, response {sample.connection[1]}"
                + (f" (the capture has {capture.gaps} connections with lost packets)" if capture.gaps else ""),
            )
        # One request at a time per connection (no pipelining): the exchange sent nearest the client's own send
        # stamp is this sample's, whatever the connection carried before the capture began.
        index = sample.connection[1]
        exchange = min(candidates, key=lambda e: (_sent_gap(e, shift, sample), e.index != index))
        if id(exchange) in used:
            return user_only(samples, f"port {sample.connection[0]}: two samples match one captured exchange")
        used.add(id(exchange))
        assert exchange.request is not None
        chunks = tuple(event.last_ns + shift for event in exchange.response.events if event.content)
        if len(chunks) != len(sample.chunk_ns):
            return user_only(
                samples,
                f"port {sample.connection[0]}: the capture holds {len(chunks)} content events, the client parsed "
                f"{len(sample.chunk_ns)}",
            )
        started = exchange.request.last_ns + shift
        lags.extend((user - kernel) / 1e6 for user, kernel in zip(sample.chunk_ns, chunks, strict=True))
        send_lags.append((started - sample.started_ns) / 1e6)
        out.append(
            replace(
                sample,
                started_ns=started,
                first_token_ns=chunks[0] if chunks else None,
                last_token_ns=chunks[-1] if chunks else None,
                chunk_ns=chunks,
                timestamps=KERNEL,
                user_started_ns=sample.started_ns,
                user_chunk_ns=sample.chunk_ns,
            )
        )
    throttled = []
    if capture.zero_windows:
        throttled.append(
            f"the client's receive window closed {capture.zero_windows} times: it fell behind reading and its "
            "socket buffers filled"
        )
    if capture.window_full:
        throttled.append(f"the server filled the client's receive window {capture.window_full} times")
    return Restamped(out, KERNEL, None, lags, send_lags, throttled)
