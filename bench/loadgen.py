"""The load generator's figures for the project's bar: N streams × 5 ms per token against the simulator.

The simulator (test profile: 200 tok/s per stream, no contention) runs pinned to the second quietest CPU just
before (`farm.bench.multiproc.quietest_cpus`); the client, in one or more processes (`farm.bench.multiproc`: one
clock, merged samples, each shard's loop lag and CPU), on the others, quietest first (with two CPUs, all client
processes share the quieter one). For each level it starts N chat streams at
once and prints:

- tokens per second taken in against offered (N × 200 tok/s);
- TTFT error against the simulator's record of the same request (client TTFT - (first chunk written -
  arrival)): the client's own error, p50 / p99 / max; and the simulator's own lateness (write time minus due
  time, from /sim/stats), which goes in every accuracy report;
- each client process's CPU use and event-loop lag, and whether the round was client-bound;
- how busy each CPU was over the round (from /proc/stat), to say how quiet the machine was.

`--fast` is the as-fast-as-possible test: the simulator streams at 1M tok/s per stream (no wait between
chunks), so the intake measures the client (or the simulator, whichever is slower).

    uv run python bench/loadgen.py [--streams 64 256] [--tokens 400] [--processes 1 2] [--fast]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

from farm.bench import metrics
from farm.bench.multiproc import ShardedResult, quietest_cpus, run_sharded
from farm.bench.prompts import CODE_PROMPT
from farm.bench.promptsize import unique_prefix
from farm.bench.stream import StreamRequest
from farm.sim.launch import running_sim

MODEL = "sim-test"
TOKEN_S = 0.005
FAST_TOK_S = 1_000_000


def get_json(url: str, method: str = "GET") -> Any:
    request = urllib.request.Request(url, method=method)  # noqa: S310 - the simulator on loopback
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - same
        body = response.read()
    return json.loads(body) if body else None


def cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat."""
    rows = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + values[4]
            rows.append((sum(values) - idle, sum(values)))
    return rows


def busy(before: list[tuple[int, int]], after: list[tuple[int, int]]) -> str:
    parts = []
    for index, ((b0, t0), (b1, t1)) in enumerate(zip(before, after, strict=True)):
        parts.append(f"cpu{index} {100 * (b1 - b0) / max(t1 - t0, 1):.0f}%")
    return ", ".join(parts)


def line(label: str, values: list[float]) -> str:
    return (
        f"{label} p50 {metrics.percentile(values, 50):7.2f}  p99 {metrics.percentile(values, 99):7.2f}  "
        f"max {max(values):7.2f} ms"
    )


def round_of(base_url: str, streams: int, tokens: int, processes: int, cpus: list[int]) -> ShardedResult:
    warm = [StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=2) for _ in range(4)]
    run_sharded(base_url, MODEL, warm, cpus=cpus, processes=1, timeout_s=60)
    get_json(base_url + "/sim/requests", "DELETE")
    get_json(base_url + "/sim/stats", "DELETE")
    requests = [
        StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=tokens + index) for index in range(streams)
    ]
    return run_sharded(base_url, MODEL, requests, cpus=cpus, processes=processes, timeout_s=300)


def report(base_url: str, streams: int, tokens: int, processes: int, cpus: list[int], fast: bool) -> float:
    load_before, cpu_before = os.getloadavg(), cpu_times()
    result = round_of(base_url, streams, tokens, processes, cpus)
    cpu_after = cpu_times()
    ok = [sample for sample in result.samples if sample.ok]
    records = {record["completion_tokens"]: record for record in get_json(base_url + "/sim/requests")["requests"]}
    lateness = get_json(base_url + "/sim/stats")["lateness"]
    total_tokens = sum(sample.completion_tokens or 0 for sample in ok)
    first_start = min(sample.started_ns for sample in ok)
    last_token = max(sample.last_token_ns or 0 for sample in ok)
    intake = total_tokens / ((last_token - first_start) / 1e9)
    errors = []
    for sample in ok:
        record = records[sample.completion_tokens]
        server_ttft = record["first_chunk_ns"] - record["arrival_ns"]
        errors.append(((sample.first_token_ns or 0) - sample.started_ns - server_ttft) / 1e6)
    offered = "as fast as possible" if fast else f"{streams / TOKEN_S:,.0f} tok/s offered"
    print(f"{streams} streams x {tokens}+ tokens, {processes} client process(es) ({offered}):")
    print(f"  taken in         {intake:10,.0f} tok/s; {len(result.samples) - len(ok)} failed")
    print("  " + line("TTFT error vs sim record", errors))
    print(f"  sim lateness     {json.dumps(lateness)}")
    for shard in result.shards:
        print(
            f"  client {shard.index} (cpu {shard.cpu}): {shard.requests} streams, CPU {shard.cpu_fraction:.0%}, "
            f"loop lag p50 {shard.loop_lag_ms_p50:.2f} p99 {shard.loop_lag_ms_p99:.2f} "
            f"max {shard.loop_lag_ms_max:.2f} ms"
        )
    print(f"  client-bound     {result.client_bound}{': ' + '; '.join(result.reasons) if result.reasons else ''}")
    print(f"  machine          load average {load_before[0]:.2f} before; over the round {busy(cpu_before, cpu_after)}")
    return intake


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--processes", type=int, nargs="+", default=[1])
    parser.add_argument("--fast", action="store_true", help="the simulator streams as fast as it can")
    args = parser.parse_args()
    cores = quietest_cpus()  # the least busy first: the second is the simulator's, the others the client's
    if len(cores) < 2:
        sys.exit("needs two CPUs: one for the simulator, one for the client")
    overrides = ["max_num_seqs=4096"]
    if args.fast:
        overrides += [f"decode_tok_s.code={FAST_TOK_S}", f"default_decode_tok_s={FAST_TOK_S}", "base_latency_s=0"]
    sim_cpu = cores[1]
    client_cpus = [cpu for cpu in cores if cpu != sim_cpu]  # quietest first: a single client process takes it
    with running_sim(model=MODEL, overrides=overrides, faults=("--fault-startup-delay", "0"), cpus={sim_cpu}) as sim:
        intakes: dict[int, float] = {}
        for streams in args.streams:
            for processes in args.processes:
                intakes[processes] = report(sim.base_url, streams, args.tokens, processes, client_cpus, args.fast)
            if len(intakes) > 1 and 1 in intakes:
                ratios = ", ".join(f"{p}: {v / intakes[1]:.2f}x" for p, v in sorted(intakes.items()) if p != 1)
                print(f"  intake against 1 process: {ratios} (client CPUs: {client_cpus})")


if __name__ == "__main__":
    main()
