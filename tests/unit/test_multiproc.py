"""The multi-process load generator's pure parts: clock offsets, moving samples between clocks, the flag."""

from __future__ import annotations

import os

import pytest

from farm.bench import multiproc
from farm.bench.multiproc import CLIENT_CPU_LIMIT, CLIENT_LAG_LIMIT_MS, ShardReport, monotonic_offset_ns, shift_sample
from farm.bench.records import RequestSample


def test_offset_to_clock_monotonic_is_stable() -> None:
    """Two readings of perf_counter_ns - CLOCK_MONOTONIC in one process agree within 50 µs."""
    assert abs(monotonic_offset_ns() - monotonic_offset_ns()) < 50_000


def test_shift_sample_moves_every_stamp() -> None:
    """started, first, last and every chunk stamp move by the same delta; None stays None."""
    sample = RequestSample(10, 20, 40, 5, 3, chunk_ns=(20, 30, 40))
    moved = shift_sample(sample, -7)
    assert (moved.started_ns, moved.first_token_ns, moved.last_token_ns) == (3, 13, 33)
    assert moved.chunk_ns == (13, 23, 33)
    failed = shift_sample(RequestSample(10, None, None, None, None, error="x"), 5)
    assert failed.first_token_ns is None
    assert failed.started_ns == 15


def report(lag_p99: float, cpu_s: float) -> ShardReport:
    return ShardReport(0, None, 1, 0, cpu_s, 1.0, 0.0, lag_p99, lag_p99)


@pytest.mark.parametrize(
    ("lag_p99", "cpu_s", "bound"),
    [
        (0.5, 0.5, False),
        (CLIENT_LAG_LIMIT_MS + 0.1, 0.5, True),
        (0.5, CLIENT_CPU_LIMIT + 0.01, True),
        (CLIENT_LAG_LIMIT_MS, CLIENT_CPU_LIMIT, False),
    ],
)
def test_a_shard_is_a_bottleneck_by_lag_or_cpu(lag_p99: float, cpu_s: float, bound: bool) -> None:
    """Loop lag p99 above the limit or CPU busy above the limit flags the shard (the limits themselves pass)."""
    assert (report(lag_p99, cpu_s).bottleneck() is not None) is bound


PROC_STAT_BEFORE = """cpu  300 0 100 900 10 0 0 0 0 0
cpu0 100 0 50 450 5 0 0 0 0 0
cpu1 200 0 50 450 5 0 0 0 0 0
cpu2 0 0 0 0 0 0 0 0 0 0
intr 1327047 0 0
"""

PROC_STAT_AFTER = """cpu  600 0 150 1100 10 0 0 50 0 0
cpu0 110 0 55 530 5 0 0 0 0 0
cpu1 290 0 60 450 5 0 0 50 0 0
cpu2 0 0 0 0 0 0 0 0 0 0
intr 1327047 0 0
"""


def test_cpu_ticks_counts_all_but_idle_and_iowait_as_busy() -> None:
    ticks = multiproc.cpu_ticks(PROC_STAT_AFTER)
    assert ticks == {0: (165, 700), 1: (400, 855), 2: (0, 0)}  # the aggregate "cpu" line is not a CPU


def test_quietest_cpus_orders_by_the_busy_share_over_the_sample() -> None:
    """cpu1 was busy (and stolen from) over the window, cpu0 mostly idle, cpu2 counted nothing: 0-busy first."""
    reads = iter([PROC_STAT_BEFORE, PROC_STAT_AFTER])
    order = multiproc.quietest_cpus([1, 0, 2], sample_s=0.0, read=lambda: next(reads))
    assert order == [2, 0, 1]


def test_quietest_cpus_keeps_the_given_order_where_the_counters_cannot_be_read() -> None:
    def unreadable() -> str:
        raise OSError("no /proc here")

    assert multiproc.quietest_cpus([3, 1], sample_s=0.0, read=unreadable) == [1, 3]


def test_a_cpu_missing_from_the_counters_counts_as_busiest() -> None:
    reads = iter([PROC_STAT_BEFORE, PROC_STAT_AFTER])
    assert multiproc.quietest_cpus([5, 1, 0], sample_s=0.0, read=lambda: next(reads)) == [0, 1, 5]


def test_timed_placement_is_two_distinct_cpus_this_process_may_use() -> None:
    """The client's CPU and the server's: two different CPUs of this process's affinity, or None with one."""
    allowed = os.sched_getaffinity(0)
    placement = multiproc.timed_placement(sample_s=0.05)
    if len(allowed) < 2:
        assert placement is None
        return
    assert placement is not None
    client, server = placement
    assert client != server
    assert {client, server} <= allowed
