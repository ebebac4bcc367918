"""What signing and checking cost: `farm verify` over a store of N signed runs, and the readers beside it.

    uv run python bench/verify.py --runs 10000 --database-url sqlite:////tmp/verify/10k.db
    uv run python bench/verify.py --runs 10000 --database-url postgresql+psycopg://postgres@127.0.0.1/verify10k

The store is filled in bulk (`fill`): the reader benchmark's template (bench/store_scale.py: the demo sweep
measured for real on the simulator, 151 figures and their raw samples) copied N times, each copy its own run
(its figures scaled per recipe, hardware and engine version with a per-run noise, its own recipe, host and
provenance, as store_scale makes them, and its own engine log as an artifact). Jobs are queued with
Store.submit and claimed with Store.claim_job; each result is signed by one host key as a worker signs it
(farm.signing.runs.sign_result) and delivered FILL_BATCH at a time through Store.complete_many, which stores
and checks each run exactly as Store.complete does (the signature checked at delivery and its verdict kept).
The key is trusted first (once: trusting it again would re-check every run it signed), and `python -m farm
verify` runs as a user runs it (its own process, the whole store: every figure, the bytes of every repeat's
samples, every provenance, every artifact, every signature); then
`farm leaderboard --json`, with and without `--verified`, to show that readers do not check signatures. The check
of the pooled table (`group_stats` derived again in the database, part of a whole-store `farm verify`) is also
timed alone, in this process.

Runs are signed as workers sign them now (farm-run/v2, docs/signing.md). A store that already holds N runs is
not filled again: the same command then times `farm verify` (and the readers) alone, on the same store.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

store_scale: Any = importlib.import_module("store_scale")  # the sibling benchmark, on the path just above

from farm.bench.records import figure_from_json  # noqa: E402
from farm.domain import Artifact, RunResult  # noqa: E402
from farm.logs import configure  # noqa: E402
from farm.recipes.model import Recipe  # noqa: E402
from farm.signing.keys import HostKey  # noqa: E402
from farm.signing.runs import sign_result  # noqa: E402
from farm.store import Store  # noqa: E402
from farm.store.encode_once import EncodeOnce  # noqa: E402

KEY_DIR = Path("/tmp/farm-bench-verify-key")
FILL_BATCH = 200
"""Runs queued, claimed, signed and delivered (one Store.complete_many) at a time: ~36 MB of results."""
WORKERS = 12
"""The fill's hosts (host-<n>-w1), each registered with the key that signs its runs."""


def engine_log(job_id: str, worker: str) -> str:
    """An engine log of the size a short vLLM run writes (~6 KB), its own for each run (signed with it)."""
    lines = [f"INFO worker {worker} job {job_id}: starting engine"]
    lines += [f"INFO {step:04d} engine step: scheduled 16 sequences, kv cache usage {step}.0%" for step in range(90)]
    return "\n".join(lines) + "\n"


def fill(store: Store, runs: int, template: dict[str, Any], key: HostKey, seed: int = 7) -> tuple[float, int]:
    """Store signed runs until the store holds `runs` (another filler may add to it at once); returns the
    seconds it took and how many runs this call stored (0, 0 when the store held enough)."""
    have = store_scale.store_runs(store)
    if have >= runs:
        return 0.0, 0
    stored = 0
    rng = random.Random(seed + have)
    figures = [figure_from_json(f) for f in template["figures"]]
    samples = template["samples"]
    base = dict(template["provenance"])
    codec = EncodeOnce()  # the template's repeats and parameters, shared by every run: encoded once to sign
    recipes: dict[tuple[int, int, int], Recipe] = {}
    when0 = datetime(2026, 1, 1, tzinfo=UTC)
    start = time.monotonic()
    for begin in range(have, runs, FILL_BATCH):
        deliveries: list[tuple[str, int, str, RunResult]] = []
        for index in range(begin, min(begin + FILL_BATCH, runs)):
            r, h = index % store_scale.RECIPES, (index // store_scale.RECIPES) % len(store_scale.HARDWARE)
            v = (index // (store_scale.RECIPES * len(store_scale.HARDWARE))) % len(store_scale.ENGINE_VERSIONS)
            recipe = recipes.get((r, h, v)) or recipes.setdefault(
                (r, h, v), store_scale.recipe(r, store_scale.HARDWARE[h], store_scale.ENGINE_VERSIONS[v])
            )
            simulated, endpoint = index % 10 == 9, index % 50 == 7
            hardware_class = f"sim:{recipe.hardware_class}" if simulated else recipe.hardware_class
            when = when0 + timedelta(minutes=index)
            [job_id] = store.submit(
                recipe, "verify", {"repeats": 3}, "ab" * 32, 3, simulated, hardware_class=hardware_class, now=when
            )
            worker = f"host-{index % WORKERS}-w1"
            claimed = store.claim_job(job_id, worker, [hardware_class], 3600, now=when)
            assert claimed is not None
            speed = 1.0 + 0.05 * r - 0.1 * h + 0.04 * v
            provenance = {
                **base,
                "engine": {
                    "name": "sim" if simulated else "vllm",
                    "version": store_scale.ENGINE_VERSIONS[v],
                    "image_digest": "sha256:" + f"{v:02x}" * 32,
                    **({"kind": "endpoint"} if endpoint and not simulated else {}),
                },
                "host": {**(base.get("host") or {}), "name": f"host-{index % WORKERS}"},
                "worker_id": worker,
                "attempt": claimed.attempt,
                "simulated": simulated,
            }
            result = RunResult(
                figures=tuple(store_scale._scaled(f, speed, rng) for f in figures),
                samples=samples,
                provenance=provenance,
                artifacts=(Artifact("engine.log", engine_log(job_id, worker)),),
                total_requests=100,
            )
            signed = sign_result(job_id, claimed.attempt, worker, result, key, codec=codec)
            deliveries.append((job_id, claimed.attempt, worker, signed))
        store.complete_many(deliveries)
        stored += len(deliveries)
        done = begin + len(deliveries)
        if done % 1000 < FILL_BATCH or done == runs:
            rate = (done - have) / (time.monotonic() - start)
            print(f"  filled {done}/{runs} runs ({rate:.0f} runs/s)", file=sys.stderr, flush=True)
        if store_scale.store_runs(store) >= runs:  # another filler's runs count too
            break
    return time.monotonic() - start, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--template", type=Path, default=store_scale.TEMPLATE)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timed command (the fastest counts)")
    parser.add_argument("--fill-only", action="store_true", help="fill the store and stop (time it later)")
    parser.add_argument(
        "--seed", type=int, default=7, help="the figures' noise (a second filler of one store gives another)"
    )
    args = parser.parse_args()
    configure("json", "warning")

    key = HostKey.load_or_create(KEY_DIR)
    template = store_scale.load_template(args.template)
    store = Store.open(args.database_url, auto_upgrade=True)
    for index in range(WORKERS):
        store.register_worker(f"host-{index}-w1", f"host-{index}", ["any"], public_key=key.public)
    # Trusted before the fill, so each run is verified by the check at delivery; trusting it again would check
    # the whole store once more (Store.trust_key re-checks the runs the key signed) before anything is timed.
    known = store.keys()
    if not any(view.key_id == key.key_id and view.trusted for view in known):
        store.trust_key(key.key_id)
    fill_cpu = time.process_time()
    fill_s, filled = fill(store, args.runs, template, key, seed=args.seed)
    fill_cpu = time.process_time() - fill_cpu
    runs = store_scale.store_runs(store)
    if store.url.startswith("postgres"):
        store_scale.analyze(store)
    store.close()
    if filled:
        print(
            f"filled {filled} runs in {fill_s:.0f} s wall, {fill_cpu:.1f} s CPU ({filled / fill_s:.1f} runs/s, "
            f"{fill_cpu / filled * 1000:.1f} ms CPU per run: signing, the check at delivery, the store's writes)"
        )
    print(f"{runs} runs in the store (signed on delivery); load average {os.getloadavg()[0]:.1f}")
    if args.fill_only:
        return

    env = {**os.environ, "FARM_DATABASE_URL": args.database_url}
    # What a `farm verify` costs before it checks anything (interpreter, imports, the store opened): one that
    # names a job with no run. Subtracted to give the cost per run.
    base_s, _, _, base_cpu = store_scale.run_measured(["verify", "--json", "no-such-job"], env, repeats=args.repeats)
    print(f"farm verify of no run (start-up): {base_s:.2f} s wall, {base_cpu:.2f} s CPU")
    out = Path(f"/tmp/farm-bench-verify-{os.getpid()}.json")
    for label, extra in (("one process", ["--workers", "1"]), ("default processes", [])):
        seconds, peak_mb, status, cpu_s = store_scale.run_measured(["verify", "--json", *extra], env, stdout=out)
        listed = json.loads(out.read_text(encoding="utf-8"))
        checks = [item for item in listed if "job_id" in item]  # the runs; then each pooled group that differs
        pooled = [item for item in listed if "pooled" in item]
        verdicts: dict[str, int] = {}
        for item in checks:
            verdicts[item["verdict"]] = verdicts.get(item["verdict"], 0) + 1
        validated = sum(1 for item in checks if item["validated"])
        n = max(len(checks), 1)
        print(
            f"farm verify ({label}): {len(checks)} runs in {seconds:.2f} s wall, {cpu_s:.2f} s CPU "
            f"(all processes), {peak_mb:.0f} MB, exit {status}; verdicts {verdicts}, {validated} validated, "
            f"{len(pooled)} pooled groups differ; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"  per run: {(cpu_s - base_cpu) / n * 1000:.3f} ms CPU, {(seconds - base_s) / n * 1000:.3f} ms wall "
            f"(start-up subtracted); 10,000 runs at this rate: {base_cpu + (cpu_s - base_cpu) / n * 10_000:.1f} s CPU"
        )
    out.unlink()
    # The pooled table's check alone (part of each whole-store `farm verify` above): derived again in the
    # database and compared with what is stored.
    store = Store.open(args.database_url)
    timings = []
    for _ in range(args.repeats):
        began, began_cpu = time.monotonic(), time.process_time()
        differ = store.check_pooled()
        timings.append((time.monotonic() - began, time.process_time() - began_cpu))
    store.close()
    wall, cpu = min(timings)
    print(
        f"pooled table check (group_stats derived again and compared): {wall:.3f} s wall, {cpu:.3f} s CPU here; "
        f"{len(differ)} groups differ"
    )
    for name, argv in (
        ("farm leaderboard --json", ["leaderboard", "--json"]),
        ("farm leaderboard --verified --json", ["leaderboard", "--verified", "--json"]),
    ):
        seconds, peak_mb, status, cpu_s = store_scale.run_measured(argv, env, repeats=args.repeats)
        print(f"{name}: {seconds:.3f} s (cpu {cpu_s:.2f} s, {peak_mb:.0f} MB), exit {status}")


if __name__ == "__main__":
    main()
