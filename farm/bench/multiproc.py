"""A load generator that scales across cores: streams sharded over N processes, each with its own event loop.

One Python process on one core takes in about 50k chunks a second; a server that streams faster than that
would be measured through the client's own queueing. Here the requests are dealt round-robin to N processes
(by default one per CPU not given to the engine), each pinned to its own CPU, each running the same timed path
(`farm.bench.stream.StreamClient`).

One clock: `perf_counter_ns` is per process, so every shard measures its offset to the system-wide
CLOCK_MONOTONIC (`time.clock_gettime_ns`), is told the start as a CLOCK_MONOTONIC instant, and returns its
samples on that base; the parent moves them onto its own `perf_counter_ns`. The samples are merged.

Each shard measures its own event-loop lag (a 1 ms ticker: how late each tick woke) and its CPU use (process
CPU time over the round's wall time). A shard whose loop lag p99 exceeds `CLIENT_LAG_LIMIT_MS`, or that was
busy more than `CLIENT_CPU_LIMIT` of the time, was a bottleneck itself: the result is flagged `client_bound`
with the reasons, and the figures should not be read as the server's.

Kernel stamps (`timestamps="auto"` where the server is on loopback and the capture can run, `farm.bench.capture`):
the parent captures the packets while the shards run and moves every sample onto the kernel's receive stamps.
Then a lagging loop bends nothing that is used: the shards' lag and CPU are kept as notes, and the result is
client-bound only when the capture shows the client throttled the server (its receive window closed).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from farm.bench import metrics
from farm.bench.capture import KernelStamps, Timestamps
from farm.bench.records import RequestSample
from farm.bench.stream import StreamClient, StreamRequest

CLIENT_LAG_LIMIT_MS = 5.0
"""Event-loop lag p99 above this means the shard's own queueing entered its time stamps."""

CLIENT_CPU_LIMIT = 0.9
"""A shard busy more than 90% of the round had no idle time left: it, not the server, set the pace."""

START_LEAD_NS = 300_000_000
"""The shards start together this long after the last one said it was ready."""

TICK_NS = 1_000_000
"""The loop-lag probe's period."""


def monotonic_offset_ns() -> int:
    """perf_counter_ns minus CLOCK_MONOTONIC in this process: the tightest of a few interleaved readings."""
    readings = []
    for _ in range(16):
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        perf = time.perf_counter_ns()
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        readings.append((after - before, perf - (before + after) // 2))
    return min(readings)[1]


def shift_sample(sample: RequestSample, delta_ns: int) -> RequestSample:
    """The same sample with every time stamp moved by `delta_ns`."""
    return replace(
        sample,
        started_ns=sample.started_ns + delta_ns,
        first_token_ns=None if sample.first_token_ns is None else sample.first_token_ns + delta_ns,
        last_token_ns=None if sample.last_token_ns is None else sample.last_token_ns + delta_ns,
        chunk_ns=tuple(stamp + delta_ns for stamp in sample.chunk_ns),
        user_started_ns=None if sample.user_started_ns is None else sample.user_started_ns + delta_ns,
        user_chunk_ns=tuple(stamp + delta_ns for stamp in sample.user_chunk_ns),
    )


@dataclass(frozen=True)
class ShardReport:
    """What one load-generator process measured about itself."""

    index: int
    cpu: int | None
    requests: int
    clock_offset_ns: int
    cpu_s: float
    wall_s: float
    loop_lag_ms_p50: float
    loop_lag_ms_p99: float
    loop_lag_ms_max: float

    @property
    def cpu_fraction(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def bottleneck(self) -> str | None:
        """Why this shard limited the measurement, or None."""
        if self.loop_lag_ms_p99 > CLIENT_LAG_LIMIT_MS:
            return f"shard {self.index}: event-loop lag p99 {self.loop_lag_ms_p99:.1f} ms > {CLIENT_LAG_LIMIT_MS:g} ms"
        if self.cpu_fraction > CLIENT_CPU_LIMIT:
            return f"shard {self.index}: CPU busy {self.cpu_fraction:.0%} of the round > {CLIENT_CPU_LIMIT:.0%}"
        return None


@dataclass(frozen=True)
class ShardedResult:
    """The merged samples (on the caller's perf_counter_ns), each shard's report, and the client-bound flag."""

    samples: list[RequestSample]
    shards: list[ShardReport]
    reasons: list[str] = field(default_factory=list)
    timestamps: str = "user"
    """`kernel` (the capture's receive stamps) or `user` (the shards' own clocks; `timestamps_reason` says why)."""
    timestamps_reason: str | None = None
    client_lag: dict[str, float] = field(default_factory=dict)
    """With kernel stamps: the client's lag in reading, p50 / p99 / max (ms) over every content chunk."""
    notes: list[str] = field(default_factory=list)
    """With kernel stamps: the shards' loop lag or CPU beyond the limits, which no longer bend the figures."""

    @property
    def client_bound(self) -> bool:
        return bool(self.reasons)


def default_processes(engine_cpus: Collection[int] = ()) -> list[int]:
    """The CPUs a load generator may use: those this process may run on, less the engine's (at least one)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    free = [cpu for cpu in allowed if cpu not in engine_cpus]
    return free or allowed[:1]


PROC_STAT = Path("/proc/stat")
"""Per-CPU time counters (Linux), read by `quietest_cpus`."""


def cpu_ticks(proc_stat: str) -> dict[int, tuple[int, int]]:
    """Each CPU's (busy, total) ticks from /proc/stat text. Busy is all but idle and iowait: steal counts as busy,
    since a vCPU whose host ran something else was not ours either."""
    ticks: dict[int, tuple[int, int]] = {}
    for line in proc_stat.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit():
            continue
        counters = [int(value) for value in rest.split()]
        idle = sum(counters[3:5])  # idle, iowait
        total = sum(counters[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
        ticks[int(name[3:])] = (total - idle, total)
    return ticks


def quietest_cpus(
    cpus: Collection[int] | None = None, sample_s: float = 0.5, read: Callable[[], str] | None = None
) -> list[int]:
    """`cpus` (default: those this process may run on) ordered from the least busy to the busiest over `sample_s`.

    A timed client pinned to a core that another program keeps busy waits for its turn on every read (CI saw
    first chunks read 7 ms after they were written, with a busy loop on the client's core); the quietest core
    is the one to measure from. Where per-CPU counters cannot be read, the order is unchanged.
    """
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    ordered = sorted(cpus)
    reader = read if read is not None else PROC_STAT.read_text
    try:
        before = cpu_ticks(reader())
        time.sleep(sample_s)
        after = cpu_ticks(reader())
    except OSError:
        return ordered

    def busy(cpu: int) -> float:
        if cpu not in before or cpu not in after:
            return 1.0
        busy_ticks = after[cpu][0] - before[cpu][0]
        total_ticks = after[cpu][1] - before[cpu][1]
        return busy_ticks / total_ticks if total_ticks > 0 else 0.0

    return sorted(ordered, key=busy)


def timed_placement(sample_s: float = 0.5) -> tuple[int, int] | None:
    """(client CPU, server CPU) for timing a client against a server on this machine: the quietest CPU and the next
    quietest (`quietest_cpus`). None where there is one CPU or processes cannot be pinned: nothing is pinned."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = quietest_cpus(sample_s=sample_s)
    return (cores[0], cores[1]) if len(cores) > 1 else None


async def _lag_probe(lags: list[float], stop: asyncio.Event) -> None:
    clock = time.perf_counter_ns
    while not stop.is_set():
        before = clock()
        await asyncio.sleep(TICK_NS / 1e9)
        lags.append(max(0, clock() - before - TICK_NS) / 1e6)


async def _run_shard(
    base_url: str, model: str, requests: Sequence[StreamRequest], start_perf_ns: int, timeout_s: float
) -> tuple[list[RequestSample], float, float, list[float]]:
    lags: list[float] = []
    stop = asyncio.Event()
    async with StreamClient(base_url, model, concurrency=max(len(requests), 1), request_timeout_s=timeout_s) as client:
        wait = start_perf_ns - time.perf_counter_ns()
        if wait > 2_000_000:
            await asyncio.sleep((wait - 1_000_000) / 1e9)
        while time.perf_counter_ns() < start_perf_ns:  # the last millisecond spun: all shards start together
            pass
        probe = asyncio.create_task(_lag_probe(lags, stop))
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        samples = await asyncio.gather(*(client.stream(request) for request in requests))
        cpu_s, wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
        stop.set()
        await probe
    return list(samples), cpu_s, wall_s, lags


def _shard_main(
    conn: Connection,
    index: int,
    cpu: int | None,
    base_url: str,
    model: str,
    requests: list[StreamRequest],
    timeout_s: float,
) -> None:  # pragma: no cover - runs in the child process (covered by the integration test)
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    offset = monotonic_offset_ns()
    conn.send(("ready", offset))
    start_monotonic_ns = conn.recv()
    samples, cpu_s, wall_s, lags = asyncio.run(
        _run_shard(base_url, model, requests, start_monotonic_ns + offset, timeout_s)
    )
    on_monotonic = [shift_sample(sample, -offset).to_json() for sample in samples]
    report = ShardReport(
        index=index,
        cpu=cpu,
        requests=len(requests),
        clock_offset_ns=offset,
        cpu_s=cpu_s,
        wall_s=wall_s,
        loop_lag_ms_p50=metrics.percentile(lags, 50) if lags else 0.0,
        loop_lag_ms_p99=metrics.percentile(lags, 99) if lags else 0.0,
        loop_lag_ms_max=max(lags, default=0.0),
    )
    conn.send(("done", on_monotonic, report))
    conn.close()


def _sample_from_json(data: dict[str, Any]) -> RequestSample:
    return RequestSample(
        started_ns=data["started_ns"],
        first_token_ns=data["first_token_ns"],
        last_token_ns=data["last_token_ns"],
        prompt_tokens=data["prompt_tokens"],
        completion_tokens=data["completion_tokens"],
        chunk_ns=tuple(data["chunk_ns"]),
        error=data["error"],
        text_sha256=data["text_sha256"],
        cached_tokens=data.get("cached_tokens"),
        connection=(data["connection"][0], data["connection"][1]) if data.get("connection") else None,
    )


def run_sharded(
    base_url: str,
    model: str,
    requests: Sequence[StreamRequest],
    *,
    cpus: Sequence[int] | None = None,
    processes: int | None = None,
    timeout_s: float = 600.0,
    timestamps: Timestamps = "auto",
) -> ShardedResult:
    """Send `requests` at once from `processes` processes (default: one per CPU of `cpus`, by default
    `default_processes()`); shard i is pinned to cpus[i % len(cpus)]. Blocks until every shard is done.
    `timestamps`: kernel receive stamps from a capture in this process (`auto`: where it can run), or `user`."""
    cpu_list = list(cpus) if cpus is not None else default_processes()
    count = processes or len(cpu_list)
    context = multiprocessing.get_context("spawn")
    shards: list[tuple[Any, Connection]] = []
    try:
        for index in range(count):
            ours, theirs = context.Pipe()
            cpu = cpu_list[index % len(cpu_list)] if cpu_list else None
            process = context.Process(
                target=_shard_main,
                args=(theirs, index, cpu, base_url, model, list(requests[index::count]), timeout_s),
                daemon=True,
            )
            process.start()
            theirs.close()
            shards.append((process, ours))
        for process, conn in shards:
            if not conn.poll(60):
                raise RuntimeError(f"load-generator process {process.pid} did not start within 60 s")
            conn.recv()
        with KernelStamps(base_url, timestamps) as stamps:
            start = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + START_LEAD_NS
            for _, conn in shards:
                conn.send(start)
            here = monotonic_offset_ns()
            merged: list[RequestSample] = []
            reports: list[ShardReport] = []
            for process, conn in shards:
                if not conn.poll(timeout_s + 60):
                    raise RuntimeError(f"load-generator process {process.pid} did not finish")
                _, samples, report = conn.recv()
                merged.extend(shift_sample(_sample_from_json(sample), here) for sample in samples)
                reports.append(report)
    finally:
        for process, conn in shards:
            conn.close()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    loop_reasons = [reason for report in reports if (reason := report.bottleneck()) is not None]
    restamped = stamps.restamp(merged, monotonic_to_sample_ns=here)
    if restamped.timestamps == "kernel":
        return ShardedResult(
            restamped.samples,
            reports,
            restamped.throttled,
            timestamps="kernel",
            client_lag=restamped.lag_summary(),
            notes=loop_reasons,
        )
    return ShardedResult(merged, reports, loop_reasons, timestamps_reason=restamped.reason)
