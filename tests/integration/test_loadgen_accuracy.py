"""The load generator against the simulator's configured truth: what the client measures is what was configured.

The simulator stamps a request's arrival when its bytes are read and anchors its schedule there, so the
configured TTFT (base + prefill of the prompt) and 5 ms per token are what it serves, burst or not; the
tests compare the client's figures with those configured values, and separately with the wire-level truth
the simulator recorded (`/sim/requests`: arrival, first chunk written), which isolates the client's own error.

One simulator per module configuration, the test process pinned to the quietest CPU and the simulator to another
(the simulator and the client would otherwise take turns on one core and measure each other; a client that
shares its core with a busy program reads each chunk when its turn comes: CI saw first chunks read 7 ms after
they were written with another program on the client's core, while the same program on the simulator's core
left every figure within bounds). The simulator's
TTFT is raised to about 250 ms (`base_latency_s=0.25`, a realistic figure for a prompt of a few thousand
tokens) so that 2% is 5 ms: on this 2-core VM the client stamps a first chunk 0.5-4 ms after it was written
(an idle core's wake-up, then 0.3 ms of client work per stream), and other processes share the cores; a
burst of 64 is also handled well inside it. Decode stays at the test profile's 200 tok/s (5 ms per token).

Two chunkings: one token per chunk, and speculative decoding (3 drafts, acceptance 0.6: chunks of 1 to 4
tokens), where counting chunks instead of `usage` tokens would be wrong by half.
"""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from farm.bench import metrics
from farm.bench.multiproc import timed_placement
from farm.bench.prompts import CODE_PROMPT
from farm.bench.promptsize import unique_prefix
from farm.bench.records import RequestSample
from farm.bench.stream import StreamClient, StreamRequest
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow

MODEL = "sim-test"
BASE_LATENCY_S = 0.25
ONE_TOKEN_PER_CHUNK: tuple[str, ...] = ()
SPECULATIVE = ("num_speculative_tokens=3", "acceptance_rate=0.6")


@dataclass(frozen=True)
class Sim:
    """A running simulator and what it was told."""

    base_url: str
    profile: dict[str, Any]


def start_sim(placement: tuple[int, int] | None, *overrides: str) -> Iterator[Sim]:
    """Start the simulator on the second quietest CPU through the one launcher, read its profile, stop it
    afterwards."""
    settings = (f"base_latency_s={BASE_LATENCY_S}", "max_num_seqs=1024", *overrides)
    with running_sim(
        model=MODEL,
        overrides=settings,
        faults=("--fault-startup-delay", "0"),
        cpus={placement[1]} if placement else None,
    ) as process:
        yield Sim(process.base_url, asyncio.run(_profile(process.base_url)))


async def _profile(base_url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(base_url + "/sim/profile") as response:
        answer: dict[str, Any] = await response.json()
        return answer


@pytest.fixture(scope="module")
def placement() -> tuple[int, int] | None:
    """The client's CPU and the simulator's, the two quietest when the module starts (None: nothing pinned)."""
    return timed_placement()


@pytest.fixture(scope="module", autouse=True)
def _client_on_its_own_core(placement: tuple[int, int] | None) -> Iterator[None]:
    """The test process runs on the quietest CPU while this module runs."""
    if placement is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {placement[0]})
    yield
    os.sched_setaffinity(0, before)


@pytest.fixture(scope="module", params=[ONE_TOKEN_PER_CHUNK, SPECULATIVE], ids=["1-token-chunks", "spec-decode"])
def sim(request: pytest.FixtureRequest, placement: tuple[int, int] | None) -> Iterator[Sim]:
    """One simulator per chunking, shared by the module's tests."""
    yield from start_sim(placement, *request.param)


async def burst(sim: Sim, streams: int, output_tokens: int, *, distinct_lengths: bool = False) -> list[RequestSample]:
    """`streams` chat requests at once, each with its own prompt (no cache hit), after a warm-up request."""
    async with StreamClient(sim.base_url, MODEL, concurrency=streams, request_timeout_s=60) as client:
        await client.stream(StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=4))
        async with aiohttp.ClientSession() as session:
            await session.delete(sim.base_url + "/sim/requests")
        requests = [
            StreamRequest(
                prompt=unique_prefix() + CODE_PROMPT,
                max_tokens=output_tokens + (index if distinct_lengths else 0),
            )
            for index in range(streams)
        ]
        samples = await asyncio.gather(*(client.stream(request) for request in requests))
    failures = [sample.error for sample in samples if not sample.ok]
    assert not failures, failures[:3]
    return list(samples)


async def server_records(sim: Sim) -> list[dict[str, Any]]:
    """The simulator's own per-request timestamps (the same CLOCK_MONOTONIC as the client's)."""
    async with aiohttp.ClientSession() as session, session.get(sim.base_url + "/sim/requests") as response:
        records: list[dict[str, Any]] = (await response.json())["requests"]
        return records


def sim_lateness(sim: Sim) -> str:
    """The simulator's own lateness (write time minus due time over every chunk so far), for every report."""

    async def read() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, session.get(sim.base_url + "/sim/stats") as response:
            stats: dict[str, Any] = await response.json()
            return stats

    lateness = asyncio.run(read())["lateness"]
    return f"simulator lateness p50 {lateness['p50_us']:.0f} µs, p99 {lateness['p99_us']:.0f} µs"


def truth_ttft_s(sim: Sim, prompt_tokens: int) -> float:
    """The configured TTFT of an uncached prompt: base + a*n + b*n²."""
    profile = sim.profile["profile"]
    return float(
        profile["base_latency_s"]
        + profile["prefill_linear_s_per_token"] * prompt_tokens
        + profile["prefill_quadratic_s_per_token2"] * prompt_tokens**2
    )


def truth_token_s(sim: Sim) -> float:
    """Seconds per output token at any concurrency (the test profile has no contention)."""
    return 1.0 / float(sim.profile["truth"]["decode_tok_s"]["code"])


def within(measured: float, truth: float, fraction: float) -> bool:
    return abs(measured - truth) <= fraction * truth


def client_ttft_s(sample: RequestSample) -> float:
    """The client's TTFT: from its send stamp to its first-token stamp."""
    return ((sample.first_token_ns or 0) - sample.started_ns) / 1e9


ROUNDS = 5
"""Each burst is measured this many times and judged on the median round, as the farm judges any figure on
repeats: one stream is one sample, and under a busy machine one stall delays a whole round of 16 streams alike
(CI once saw a round 9 ms late with the simulator itself 4 ms late at p99): an outlier, not the client's error."""


@pytest.mark.parametrize("streams", [1, 16])
def test_ttft_and_tpot_within_two_percent(sim: Sim, streams: int) -> None:
    """At 1 and 16 streams, the client's TTFT and TPOT are within 2% of the simulator's configuration.

    TTFT (median over the streams) against base + prefill of the prompt; TPOT against 5 ms. The client's
    own error is also checked against the wire: its TTFT minus what the simulator did (first chunk written -
    arrival) is within 5 ms at the median and not negative at the median beyond clock noise. Every figure is the
    median over ROUNDS rounds (each round's own median for TTFT).
    """
    samples: list[RequestSample] = []
    wire_errors_ms = []
    round_ttfts_s = []
    configured = 0.0
    for _ in range(ROUNDS):
        round_samples = asyncio.run(burst(sim, streams, output_tokens=120, distinct_lengths=True))
        records = {record["completion_tokens"]: record for record in asyncio.run(server_records(sim))}
        configured = truth_ttft_s(sim, round_samples[0].prompt_tokens or 0)
        for sample in round_samples:
            record = records[sample.completion_tokens]
            assert sample.started_ns <= record["arrival_ns"]
            assert record["first_chunk_ns"] - record["arrival_ns"] >= configured * 1e9 * 0.999  # never early
            server_ttft_ns = record["first_chunk_ns"] - record["arrival_ns"]
            wire_errors_ms.append((client_ttft_s(sample) * 1e9 - server_ttft_ns) / 1e6)
        samples += round_samples
        round_ttfts_s.append(statistics.median(client_ttft_s(sample) for sample in round_samples))
    measured = statistics.median(round_ttfts_s)
    assert within(measured, configured, 0.02), (round_ttfts_s, configured, sim_lateness(sim))
    # Median, not min: the VM sometimes stops a process for ~10 ms between a write and its time stamp.
    assert statistics.median(wire_errors_ms) > -0.5, wire_errors_ms
    assert statistics.median(wire_errors_ms) < 5.0, (wire_errors_ms, sim_lateness(sim))
    tpot = statistics.median(metrics.tpot_s(sample) for sample in samples)
    assert within(tpot, truth_token_s(sim), 0.02), (tpot, truth_token_s(sim))
    # Tokens come from usage, never from chunks: every stream has exactly what it asked for.
    assert sorted(sample.completion_tokens or 0 for sample in samples) == sorted(
        list(range(120, 120 + streams)) * ROUNDS
    )


RATE_ROUNDS = 3
"""Rounds of the rate test, judged on the median round like the others: a stall of 10 ms in a 0.6 s decode is
1.7% of a whole round's rate."""


@pytest.mark.parametrize("streams", [1, 16])
def test_chunk_gaps_and_rates_within_two_percent(sim: Sim, streams: int) -> None:
    """Per-stream tok/s and the mean chunk gap per token carried match 200 tok/s within 2% (median of
    RATE_ROUNDS rounds); every round carries every token in the chunks its chunking makes."""
    rounds = [asyncio.run(burst(sim, streams, output_tokens=120)) for _ in range(RATE_ROUNDS)]
    figures = [metrics.concurrency_figures(samples).values for samples in rounds]
    rate = 1.0 / truth_token_s(sim)
    per_stream = [f["per_stream_tok_s"] for f in figures]
    assert within(statistics.median(per_stream), rate, 0.02), (per_stream, sim_lateness(sim))
    # Aggregate: all tokens over the round, TTFT included (first token at TTFT, the other 119 at 5 ms).
    round_s = truth_ttft_s(sim, rounds[0][0].prompt_tokens or 0) + 119 * truth_token_s(sim)
    aggregate = [f["aggregate_tok_s"] for f in figures]
    assert within(statistics.median(aggregate), 120 * streams / round_s, 0.05), aggregate
    per_token_gaps = []
    for samples, f in zip(rounds, figures, strict=True):
        chunks = sum(len(sample.chunk_ns) for sample in samples)
        if not sim.profile["profile"]["num_speculative_tokens"]:
            assert chunks == 120 * streams
            per_token_gaps.append(f["itl_ms_p50"] / 1000)
        else:
            # Several tokens per chunk: fewer chunks than tokens, each gap spanning the tokens it carried.
            assert chunks < 0.75 * 120 * streams
            gaps = [gap for sample in samples for gap in metrics.chunk_itls_s(sample)]
            tokens_after_first = sum((sample.completion_tokens or 0) - 1 for sample in samples)
            per_token_gaps.append(sum(gaps) / tokens_after_first)
    assert within(statistics.median(per_token_gaps), truth_token_s(sim), 0.02), per_token_gaps


def test_two_point_decode_within_two_percent(sim: Sim) -> None:
    """Two-point decode on one warmed prompt (64 and 448 tokens) gives 200 tok/s within 2%."""

    async def measure() -> float:
        prompt = unique_prefix() + CODE_PROMPT
        async with StreamClient(sim.base_url, MODEL) as client:
            await client.stream(StreamRequest(prompt=prompt, max_tokens=8))
            short = await client.stream(StreamRequest(prompt=prompt, max_tokens=64))
            long = await client.stream(StreamRequest(prompt=prompt, max_tokens=448))
        return metrics.two_point_decode_tok_s(
            short.completion_tokens or 0,
            metrics.e2e_s(short),
            long.completion_tokens or 0,
            metrics.e2e_s(long),
        )

    decode = asyncio.run(measure())
    assert within(decode, 1.0 / truth_token_s(sim), 0.02), decode


BURSTS = 5
"""The 64-stream burst is measured this many times and judged on the median burst, as the farm judges any
figure on repeats: one stall of the VM (a whole burst 10+ ms late, every stream alike) is an outlier, not the
load generator's error."""


def test_ttft_at_64_streams_against_the_configured_truth(sim: Sim) -> None:
    """64 streams at once, median of 5 bursts: the client's own TTFT error within 5 ms at p99, and against the
    configured TTFT never below it and within 10 ms at the median.

    Per burst: the client's read of each first chunk minus the simulator's write of it (the load generator's
    own error against the wire, p99), the simulator's read of each request minus the client's send (p99), and
    the client's TTFT minus the configured TTFT (base + prefill of its prompt; p50, and never negative). That
    last error holds everything: the burst leaving the client, the simulator reading it, the simulator's own
    lateness writing 64 first chunks due within a millisecond (about 60 µs a send here), and the client's lag.
    Pinned and quiet, bench/loadgen.py measures it at p50 2.1, p99 2.9 ms; inside pytest the same burst shows
    p50 3 to 7 ms, so 10 ms is asserted and the p99 is printed, not asserted: the simulator's share of it is
    not the client's.
    """
    bursts = [measure_64_stream_burst(sim) for _ in range(BURSTS)]
    for burst_summary in bursts:
        print(burst_summary["summary"])
        assert burst_summary["min_error_ms"] >= 0.0, burst_summary["summary"]  # nothing served before its time

    def median_of(key: str) -> float:
        return float(statistics.median(b[key] for b in bursts))

    summaries = "\n".join(str(b["summary"]) for b in bursts) + "\n" + sim_lateness(sim)
    print(sim_lateness(sim))
    assert median_of("error_p50_ms") <= 10.0, summaries
    assert median_of("arrival_p99_ms") <= 5.0, summaries
    assert median_of("lag_p99_ms") <= 5.0, summaries


def measure_64_stream_burst(sim: Sim) -> dict[str, Any]:
    """One burst of 64 streams, split against the simulator's record of it."""
    samples = asyncio.run(burst(sim, 64, output_tokens=100, distinct_lengths=True))
    records = {record["completion_tokens"]: record for record in asyncio.run(server_records(sim))}
    errors_ms, arrival_ms, late_ms, lag_ms = [], [], [], []
    for sample in samples:
        record = records[sample.completion_tokens]
        configured_ns = truth_ttft_s(sim, sample.prompt_tokens or 0) * 1e9
        assert sample.started_ns <= record["arrival_ns"]
        errors_ms.append((client_ttft_s(sample) * 1e9 - configured_ns) / 1e6)
        arrival_ms.append((record["arrival_ns"] - sample.started_ns) / 1e6)
        late_ms.append((record["first_chunk_ns"] - record["arrival_ns"] - configured_ns) / 1e6)
        lag_ms.append(((sample.first_token_ns or 0) - record["first_chunk_ns"]) / 1e6)

    def spread(values: list[float]) -> str:
        return f"p50 {metrics.percentile(values, 50):.2f} p99 {metrics.percentile(values, 99):.2f} ms"

    return {
        "summary": f"client TTFT - configured: {spread(errors_ms)}; arrival - send {spread(arrival_ms)}; "
        f"first chunk written - due {spread(late_ms)}; read - written {spread(lag_ms)}",
        "min_error_ms": min(errors_ms),
        "error_p50_ms": metrics.percentile(errors_ms, 50),
        "arrival_p99_ms": metrics.percentile(arrival_ms, 99),
        "lag_p99_ms": metrics.percentile(lag_ms, 99),
    }
