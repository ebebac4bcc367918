"""The load generator's figure for the project's bar: N streams × 5 ms per token against the simulator.

The simulator (test profile: 200 tok/s per stream, no contention) runs pinned to the first CPU, this client
to the second. For each level it starts N chat streams at once through `farm.bench.stream.StreamClient` (the
timed path of every measurement) and prints:

- tokens per second taken in against offered (N × 200 tok/s): over the whole round (TTFT included), and as
  the sum of the streams' decode rates ((tokens - 1) / (last - first chunk));
- TTFT error against the configured truth (base + prefill of each prompt, from /sim/profile), p50 / p99 / max,
  split into the simulator's read of the request (arrival - request sent), its lateness writing the first
  chunk (first chunk written - arrival - configured TTFT) and the client's read lag (first chunk read -
  first chunk written); and the TTFT error against the simulator's record (first chunk written - arrival);
- client CPU per token (process CPU time over the round / tokens).

    uv run python bench/loadgen.py [--streams 64 256] [--tokens 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from typing import Any

import aiohttp

from farm.bench import metrics
from farm.bench.prompts import CODE_PROMPT
from farm.bench.promptsize import unique_prefix
from farm.bench.records import RequestSample
from farm.bench.stream import StreamClient, StreamRequest

MODEL = "sim-test"
TOKEN_S = 0.005


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_sim(port: int, core: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "farm", "sim", "serve", "--profile", "test", "--port", str(port)]
    argv += ["--fault-startup-delay", "0", "--set", "max_num_seqs=4096"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.sched_setaffinity(process.pid, {core})
    return process


async def wait_ready(base_url: str) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(base_url + "/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the simulator did not become ready")


async def configured_ttft(base_url: str) -> Any:
    """base + a*n + b*n² from the simulator's profile, as a function of the prompt length."""
    async with aiohttp.ClientSession() as session, session.get(base_url + "/sim/profile") as response:
        profile = (await response.json())["profile"]
    base, a, b = (
        profile[k] for k in ("base_latency_s", "prefill_linear_s_per_token", "prefill_quadratic_s_per_token2")
    )
    return lambda n: base + a * n + b * n * n


async def server_records(base_url: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(base_url + "/sim/requests") as response:
        records: list[dict[str, Any]] = (await response.json())["requests"]
        return records


async def round_of(base_url: str, streams: int, tokens: int) -> tuple[list[RequestSample], float]:
    """One burst of `streams` requests (distinct lengths, to match them with the server's records)."""
    async with StreamClient(base_url, MODEL, concurrency=streams, request_timeout_s=120) as client:
        warm = [StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=2) for _ in range(streams)]
        await asyncio.gather(*(client.stream(request) for request in warm))  # open the connections
        async with aiohttp.ClientSession() as session:
            await session.delete(base_url + "/sim/requests")
        requests = [
            StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=tokens + index) for index in range(streams)
        ]
        cpu_before = time.process_time()
        samples = await asyncio.gather(*(client.stream(request) for request in requests))
        cpu_s = time.process_time() - cpu_before
    return list(samples), cpu_s


def line(label: str, values: list[float]) -> str:
    return (
        f"{label} p50 {metrics.percentile(values, 50):6.2f}  p99 {metrics.percentile(values, 99):6.2f}  "
        f"max {max(values):6.2f} ms"
    )


async def measure(base_url: str, streams: int, tokens: int) -> None:
    samples, cpu_s = await round_of(base_url, streams, tokens)
    failed = [sample for sample in samples if not sample.ok]
    ok = [sample for sample in samples if sample.ok]
    records = {record["completion_tokens"]: record for record in await server_records(base_url)}
    ttft_of = await configured_ttft(base_url)
    total_tokens = sum(sample.completion_tokens or 0 for sample in ok)
    first_start = min(sample.started_ns for sample in ok)
    last_token = max(sample.last_token_ns or 0 for sample in ok)
    taken_in = total_tokens / ((last_token - first_start) / 1e9)
    # Offered: every stream at 200 tok/s once its first token is out.
    errors, vs_configured, admission, late, read_lag = [], [], [], [], []
    for sample in ok:
        record = records[sample.completion_tokens]
        server_ttft = record["first_chunk_ns"] - record["arrival_ns"]
        client_ttft = (sample.first_token_ns or 0) - sample.started_ns
        configured = ttft_of(sample.prompt_tokens or 0) * 1e9
        errors.append((client_ttft - server_ttft) / 1e6)
        vs_configured.append((client_ttft - configured) / 1e6)
        admission.append((record["arrival_ns"] - sample.started_ns) / 1e6)
        late.append((server_ttft - configured) / 1e6)
        read_lag.append(((sample.first_token_ns or 0) - record["first_chunk_ns"]) / 1e6)
    tpot = [metrics.tpot_s(sample) * 1e3 for sample in ok]
    print(f"{streams} streams x {tokens}+ tokens, 5 ms per token ({streams / TOKEN_S:,.0f} tok/s offered):")
    decode_sum = sum(
        ((sample.completion_tokens or 0) - 1) / (((sample.last_token_ns or 0) - (sample.first_token_ns or 0)) / 1e9)
        for sample in ok
    )
    print(f"  taken in        {taken_in:10,.0f} tok/s over the round (TTFT included); {len(failed)} failed")
    print(f"                  {decode_sum:10,.0f} tok/s as the sum of the streams' decode rates")
    print(f"  TPOT            p50 {metrics.percentile(tpot, 50):6.3f} ms (truth 5.000)")
    print("  " + line("TTFT - configured", vs_configured))
    print("  " + line("  sim read req   ", admission))
    print("  " + line("  sim late 1st   ", late))
    print("  " + line("  client lag     ", read_lag))
    print("  " + line("TTFT - sim record", errors))
    per_token_us = cpu_s / total_tokens * 1e6
    print(f"  client CPU      {per_token_us:6.2f} µs per token ({cpu_s:.2f} s for {total_tokens:,} tokens)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--tokens", type=int, default=400)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        sys.exit("needs two CPUs: one for the simulator, one for the client")
    port = free_port()
    process = start_sim(port, cores[0])
    os.sched_setaffinity(0, {cores[1]})
    base_url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_ready(base_url))
        for streams in args.streams:
            asyncio.run(measure(base_url, streams, args.tokens))
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
