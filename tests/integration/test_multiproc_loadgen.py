"""The multi-process load generator against the simulator: one clock across processes, merged samples, and
each shard's own lag and CPU use.

The simulator stamps each request's arrival and first chunk with its own perf_counter_ns, which on Linux is
CLOCK_MONOTONIC, like the shards' shared base: a sample merged from any shard must have been sent before the
server read it, and read after the server wrote its first chunk.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from farm.bench.multiproc import default_processes, run_sharded, timed_placement
from farm.bench.promptsize import unique_prefix
from farm.bench.stream import StreamRequest
from farm.engines.process import EngineProcess
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

MODEL = "sim-test"
STREAMS = 24
TOKENS = 40


@pytest.fixture(scope="module")
def sim_cpu() -> int:
    """The second quietest CPU when the module starts: the simulator's, leaving the quietest to the client shards
    (with one CPU, they share it)."""
    placement = timed_placement()
    return placement[1] if placement else 0


@pytest.fixture(scope="module")
def sim(sim_cpu: int) -> Iterator[EngineProcess]:
    """A simulator on its own CPU."""
    with running_sim(model=MODEL, faults=("--fault-startup-delay", "0"), cpus={sim_cpu}) as process:
        yield process


def records(base_url: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(base_url + "/sim/requests", timeout=10) as response:  # noqa: S310 - loopback
        found: list[dict[str, object]] = json.loads(response.read())["requests"]
    return found


def test_two_processes_share_one_clock_and_merge_their_samples(sim: EngineProcess, sim_cpu: int) -> None:
    """Every request of two shards succeeds; on the merged clock each was sent before the server's arrival
    stamp and its first token read after the server wrote it; each shard reports its offset, CPU and lag."""
    cpus = default_processes(engine_cpus={sim_cpu})
    urllib.request.urlopen(urllib.request.Request(sim.base_url + "/sim/requests", method="DELETE"), timeout=10)  # noqa: S310
    requests = [
        StreamRequest(prompt=unique_prefix() + "Write some code.", max_tokens=TOKENS + index)
        for index in range(STREAMS)
    ]
    result = run_sharded(sim.base_url, MODEL, requests, cpus=cpus, processes=2, timeout_s=60)
    assert len(result.samples) == STREAMS
    assert all(sample.ok for sample in result.samples), [s.error for s in result.samples if not s.ok][:3]
    assert sorted(sample.completion_tokens or 0 for sample in result.samples) == [TOKENS + i for i in range(STREAMS)]
    by_length = {record["completion_tokens"]: record for record in records(sim.base_url)}
    for sample in result.samples:
        record = by_length[sample.completion_tokens]
        assert sample.started_ns <= int(str(record["arrival_ns"])), "sent after the server read it: clocks differ"
        assert sample.first_token_ns is not None
        assert sample.first_token_ns >= int(str(record["first_chunk_ns"])), "read before it was written"
    assert [report.index for report in result.shards] == [0, 1]
    assert sum(report.requests for report in result.shards) == STREAMS
    for report in result.shards:
        assert report.cpu_s > 0
        assert report.wall_s > 0
        assert report.loop_lag_ms_max >= report.loop_lag_ms_p99 >= report.loop_lag_ms_p50 >= 0
    lagging = [reason for report in result.shards if (reason := report.bottleneck()) is not None]
    if result.timestamps == "kernel":  # the capture ran: a lagging shard is a note, a closed window the flag
        assert result.notes == lagging
        assert all("receive window" in reason for reason in result.reasons)
    else:
        assert result.client_bound == bool(lagging)
