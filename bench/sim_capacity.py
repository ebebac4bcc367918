"""How well the simulator keeps its schedule under load: server on one core, an aiohttp client on the other.

    uv run python bench/sim_capacity.py [--streams 64 256] [--tokens 400] [--spin-us 300]

For each level it starts N streaming completions at once (test profile: 200 tok/s per stream, 5 ms per token,
EOS ignored) and prints the server's own lateness (write time minus due time, p50/p99 from /sim/stats), the
tokens per second the server wrote (from /sim/requests) and what the client took in, and the client's median
inter-chunk gap beside the 5 ms truth.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import time
from typing import Any

import aiohttp

from farm.bench.multiproc import timed_placement
from farm.sim.launch import running_sim


async def one_stream(session: aiohttp.ClientSession, base: str, tokens: int) -> tuple[int, list[int]]:
    body = {
        "model": "sim-test", "prompt": "Write an essay about lighthouses.", "max_tokens": tokens,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    chunk_ns: list[int] = []
    completion_tokens = 0
    tail = b""
    async with session.post(f"{base}/v1/completions", json=body) as resp:
        async for data in resp.content.iter_any():
            now = time.perf_counter_ns()
            # Count events without parsing them (the client must not be the bottleneck); parse only the usage.
            events = data.count(b"\n\n")
            chunk_ns.extend([now] * events)
            tail = (tail + data)[-4096:]
    for event in tail.split(b"\n\n"):
        if event.startswith(b"data: {") and b'"choices":[]' in event:
            obj: dict[str, Any] = json.loads(event[6:])
            completion_tokens = obj["usage"]["completion_tokens"]
            chunk_ns = chunk_ns[:-2]  # the usage event and [DONE] are not content chunks
    return completion_tokens, chunk_ns


async def level(session: aiohttp.ClientSession, base: str, streams: int, tokens: int) -> dict[str, Any]:
    await (await session.delete(f"{base}/sim/stats")).release()
    await (await session.delete(f"{base}/sim/requests")).release()
    started = time.perf_counter_ns()
    results = await asyncio.gather(*(one_stream(session, base, tokens) for _ in range(streams)))
    ended = time.perf_counter_ns()
    async with session.get(f"{base}/sim/stats") as r:
        stats = await r.json()
    async with session.get(f"{base}/sim/requests") as r:
        records = (await r.json())["requests"]
    total = sum(n for n, _ in results)
    gaps = [b - a for _, ns in results for a, b in itertools.pairwise(ns)]
    first = min(rec["first_chunk_ns"] for rec in records)
    last = max(rec["last_chunk_ns"] for rec in records)
    server_tokens = sum(rec["completion_tokens"] for rec in records)
    first_late = sorted(
        (rec["first_chunk_ns"] - rec["arrival_ns"]) / 1e6 - rec["ttft_model_s"] * 1e3 for rec in records
    )
    arrivals = [rec["arrival_ns"] for rec in records]
    return {
        "streams": streams,
        "server_lateness_p50_us": stats["lateness"]["p50_us"],
        "server_lateness_p99_us": stats["lateness"]["p99_us"],
        "server_lateness_max_us": stats["lateness"]["max_us"],
        "first_chunk_late_p50_ms": statistics.median(first_late),
        "first_chunk_late_p99_ms": first_late[int(0.99 * (len(first_late) - 1))],
        "arrival_spread_ms": (max(arrivals) - min(arrivals)) / 1e6,
        "server_tok_s": server_tokens / ((last - first) / 1e9),
        "offered_tok_s": streams * 200.0,
        "client_tok_s": total / ((ended - started) / 1e9),
        "client_gap_p50_ms": statistics.median(gaps) / 1e6 if gaps else None,
        "client_gap_p99_ms": sorted(gaps)[int(0.99 * (len(gaps) - 1))] / 1e6 if gaps else None,
    }


async def measure_levels(base: str, args: argparse.Namespace) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for streams in args.streams:
            row = await level(session, base, streams, args.tokens)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))


def run(args: argparse.Namespace) -> None:
    placement = timed_placement()  # the quietest CPU for this client, the next for the simulator
    faults = ("--fault-startup-delay", "0", "--spin-us", str(args.spin_us))
    with running_sim(
        overrides=("max_num_seqs=1024",), faults=faults, cpus={placement[1]} if placement else None
    ) as sim:
        if placement:
            os.sched_setaffinity(0, {placement[0]})
        asyncio.run(measure_levels(sim.base_url, args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--tokens", type=int, default=400, help="tokens per stream (400 = 2 s at 5 ms)")
    parser.add_argument("--spin-us", type=int, default=300)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
