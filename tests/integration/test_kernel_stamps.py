"""Kernel receive stamps against the simulator's truth while a busy process shares the client's CPU (issue 28).

The simulator (TTFT 50 ms, a token every 5 ms, no contention) runs on the second quietest CPU; the client on the
quietest, with a spinning process pinned beside it, so every read of the client's loop waits for its turn. The
user-space stamps bend by that wait (CI saw ITL p99 14 ms against 5 ms); the kernel's stamps, from the packet
capture, do not. Judged against the simulator's own record of each request (`/sim/requests?chunks=1`: arrival,
and when each chunk was written), at 256 streams in a burst (the sharded client) and with open-loop arrivals keeping
about 256 in flight (the client in this process), not flagged client-bound; without the busy process, at 1024:
- TTFT: the first token stamped within 5 ms (p99) of the moment the simulator wrote it, and the request's send
  stamp between the client's own stamp before its write and the simulator's read of the request. The TTFT a user
  waits runs from the send to the first token on the wire; the simulator stamps its arrival in user space, so under
  a burst its own lag in reading requests (tens of ms at 256 on a shared machine) is server latency, part of the
  truth, which a TTFT compared with its arrival-to-write time would count as client error. That gap is printed.
- ITL: p99 within 2 ms of the truth's (the simulator's write times).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from farm.bench import metrics
from farm.bench.capture import KernelStamps, unavailable
from farm.bench.multiproc import run_sharded, timed_placement
from farm.bench.prompts import CODE_PROMPT
from farm.bench.promptsize import unique_prefix
from farm.bench.records import RequestSample
from farm.bench.stream import StreamClient, StreamRequest
from farm.sim.launch import running_sim

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable("127.0.0.1") is not None, reason=f"no capture: {unavailable('127.0.0.1')}"),
]

MODEL = "sim-test"
TTFT_BOUND_MS = 5.0
ITL_BOUND_MS = 2.0
TOKENS = 200


def get_json(url: str, method: str = "GET") -> Any:
    request = urllib.request.Request(url, method=method)  # noqa: S310 - the simulator on loopback
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - same
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def placement() -> tuple[int, int]:
    """(client CPU, simulator CPU): the two quietest."""
    found = timed_placement()
    if found is None:
        pytest.skip("needs two CPUs and sched_setaffinity")
    return found


@pytest.fixture(scope="module")
def sim_url(placement: tuple[int, int]) -> Iterator[str]:
    with running_sim(
        model=MODEL,
        overrides=("base_latency_s=0.05", "max_num_seqs=4096"),
        faults=("--fault-startup-delay", "0"),
        cpus={placement[1]},
    ) as process:
        yield process.base_url


@pytest.fixture
def busy_neighbour(placement: tuple[int, int]) -> Iterator[None]:
    """A spinning process on the client's CPU for the test."""
    spinner = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {placement[0]})
    )
    time.sleep(0.2)
    yield
    spinner.kill()
    spinner.wait()


def requests_of(count: int) -> list[StreamRequest]:
    """Distinct lengths, so each sample finds its record by its completion tokens."""
    return [StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=TOKENS + index) for index in range(count)]


def errors(sim_url: str, samples: list[RequestSample]) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per request TTFT error (client TTFT minus first write minus arrival) and first-read error (the first token's
    stamp minus its write), the client's ITLs and the truth's (ms)."""
    records = {r["completion_tokens"]: r for r in get_json(sim_url + "/sim/requests?chunks=1")["requests"]}
    ttft_errors, first_errors, itls, truth_itls = [], [], [], []
    for sample in samples:
        record = records[sample.completion_tokens]
        truth_ttft = record["first_chunk_ns"] - record["arrival_ns"]
        ttft_errors.append(((sample.first_token_ns or 0) - sample.started_ns - truth_ttft) / 1e6)
        first_errors.append(((sample.first_token_ns or 0) - record["first_chunk_ns"]) / 1e6)
        itls += [(b - a) / 1e6 for a, b in itertools.pairwise(sample.chunk_ns)]
        truth_itls += [(b - a) / 1e6 for a, b in itertools.pairwise(record["chunk_ns"])]
    return ttft_errors, first_errors, itls, truth_itls


def judge(sim_url: str, samples: list[RequestSample], count: int) -> str:
    """The bounds of the issue, with the figures in the message."""
    assert len(samples) == count
    assert all(sample.ok for sample in samples), [s.error for s in samples if not s.ok][:3]
    assert all(sample.timestamps == "kernel" for sample in samples)
    ttft_errors, first_errors, itls, truth_itls = errors(sim_url, samples)
    lags = [(u - k) / 1e6 for s in samples for u, k in zip(s.user_chunk_ns, s.chunk_ns, strict=True)]
    figures = (
        f"TTFT error p50 {metrics.percentile(ttft_errors, 50):.2f} p99 {metrics.percentile(ttft_errors, 99):.2f} ms; "
        f"first read error p99 {metrics.percentile(first_errors, 99):.2f} ms (the TTFT error less the simulator's "
        "own lag in reading the request: its arrival is stamped in user space); "
        f"ITL p99 {metrics.percentile(itls, 99):.2f} vs truth {metrics.percentile(truth_itls, 99):.2f} ms; "
        f"client lag p99 {metrics.percentile(lags, 99):.2f} ms; "
        f"sim lateness {get_json(sim_url + '/sim/stats')['lateness']}"
    )
    # The kernel stamps a packet before any reader can: the user stamps are never earlier (clock conversion aside).
    assert min(lags) > -0.2, figures
    # The first token, stamped on the wire, within the bound of the server's write of it (and never before it).
    assert metrics.percentile(first_errors, 99) <= TTFT_BOUND_MS, figures
    assert min(first_errors) > -0.2, figures
    # The send stamp lies between the client's own stamp before the write and the server's read of the request.
    records = {r["completion_tokens"]: r for r in get_json(sim_url + "/sim/requests?chunks=1")["requests"]}
    for sample in samples:
        arrival = records[sample.completion_tokens]["arrival_ns"]
        user_started = sample.user_started_ns if sample.user_started_ns is not None else sample.started_ns
        assert user_started - 200_000 <= sample.started_ns <= arrival + 200_000, (
            sample.started_ns,
            user_started,
            arrival,
            figures,
        )
    assert abs(metrics.percentile(itls, 99) - metrics.percentile(truth_itls, 99)) <= ITL_BOUND_MS, figures
    return figures


def burst(sim_url: str, placement: tuple[int, int], count: int) -> list[RequestSample]:
    run_sharded(sim_url, MODEL, requests_of(4), cpus=[placement[0]], processes=1, timeout_s=60, timestamps="user")
    get_json(sim_url + "/sim/requests", "DELETE")
    get_json(sim_url + "/sim/stats", "DELETE")
    result = run_sharded(
        sim_url, MODEL, requests_of(count), cpus=[placement[0]], processes=1, timeout_s=120, timestamps="kernel"
    )
    assert result.timestamps == "kernel", result.timestamps_reason
    assert not result.client_bound, result.reasons
    assert result.client_lag
    return result.samples


@pytest.mark.usefixtures("busy_neighbour")
def test_burst_of_256_with_a_busy_process_on_the_clients_cpu(sim_url: str, placement: tuple[int, int]) -> None:
    """256 streams at once, the client sharing its CPU: kernel-stamped TTFT and ITL within the bounds."""
    judge(sim_url, burst(sim_url, placement, 256), 256)


def test_burst_of_1024_on_a_quiet_client_cpu(sim_url: str, placement: tuple[int, int]) -> None:
    """1024 streams at once, nothing beside the client: the same bounds."""
    judge(sim_url, burst(sim_url, placement, 1024), 1024)


async def open_loop(sim_url: str, rate_rps: float, count: int) -> list[RequestSample]:
    """`count` requests at `rate_rps`, evenly spaced, each sent at its time whatever the others are doing."""
    async with StreamClient(sim_url, MODEL, concurrency=count, request_timeout_s=120) as client:
        start = time.perf_counter() + 0.05

        async def one(index: int, request: StreamRequest) -> RequestSample:
            await asyncio.sleep(max(0.0, start + index / rate_rps - time.perf_counter()))
            return await client.stream(request)

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests_of(count)))))


@pytest.mark.usefixtures("busy_neighbour")
def test_open_loop_keeping_256_in_flight_with_a_busy_process(sim_url: str, placement: tuple[int, int]) -> None:
    """Open-loop arrivals at the rate that keeps about 256 streams in flight (a request lasts 50 ms + 200 x 5 ms
    and more), the client in this process on the shared CPU: the same bounds, and no closed receive window."""
    get_json(sim_url + "/sim/requests", "DELETE")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {placement[0]})
    try:
        with KernelStamps(sim_url, "kernel") as stamps:
            samples = asyncio.run(open_loop(sim_url, rate_rps=256 / 1.05, count=512))
        restamped = stamps.restamp(samples)
    finally:
        os.sched_setaffinity(0, before)
    assert restamped.timestamps == "kernel", restamped.reason
    assert not restamped.client_bound, restamped.throttled
    judge(sim_url, restamped.samples, 512)
