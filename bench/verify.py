"""What signing and checking cost: `farm verify` over a store of N signed runs, and the readers beside it.

    uv run python bench/verify.py --runs 10000 --database-url sqlite:////tmp/verify/10k.db
    uv run python bench/verify.py --runs 10000 --database-url postgresql+psycopg://postgres@127.0.0.1/verify10k

The store is filled by the reader benchmark's builder (bench/store_scale.py: the demo sweep measured for real on
the simulator, copied N times through Store.submit/claim_job/complete with its figures scaled per run), each run
signed on its way in by one host key, as a worker signs (farm.signing.runs.sign_result) and checked by the store
at delivery. The key is then trusted, and `python -m farm verify` runs as a user runs it (its own process, the
whole store: every figure, the bytes of every repeat's samples, every provenance, every signature); then
`farm leaderboard --json`, with and without `--verified`, to show that readers do not check signatures.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

store_scale: Any = importlib.import_module("store_scale")  # the sibling benchmark, on the path just above

from farm.domain import RunResult  # noqa: E402
from farm.logs import configure  # noqa: E402
from farm.signing.keys import HostKey  # noqa: E402
from farm.signing.runs import sign_result  # noqa: E402
from farm.store import Store  # noqa: E402

KEY_DIR = Path("/tmp/farm-bench-verify-key")


class SigningStore(Store):
    """A store whose deliveries are signed first, by the host key, as the worker signs them."""

    key: HostKey

    def complete(
        self, job_id: str, attempt: int, worker_id: str, result: RunResult, *, now: datetime | None = None
    ) -> None:
        provenance: dict[str, Any] = {**result.provenance, "worker_id": worker_id, "attempt": attempt}
        signed = sign_result(job_id, attempt, worker_id, replace(result, provenance=provenance), self.key)
        super().complete(job_id, attempt, worker_id, signed, now=now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--template", type=Path, default=store_scale.TEMPLATE)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timed command (the fastest counts)")
    args = parser.parse_args()
    configure("json", "warning")

    key = HostKey.load_or_create(KEY_DIR)
    template = store_scale.load_template(args.template)
    store = SigningStore.open(args.database_url, auto_upgrade=True)
    assert isinstance(store, SigningStore)
    store.key = key
    for index in range(12):  # the builder's workers: host-<n>-w1
        store.register_worker(f"host-{index}-w1", f"host-{index}", ["any"], public_key=key.public)
    have = store_scale.store_runs(store)
    fill_cpu = time.process_time()
    fill_s = store_scale.fill(store, args.runs, template)
    fill_cpu = time.process_time() - fill_cpu
    filled = args.runs - have if fill_s else 0
    store.trust_key(key.key_id)
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

    env = {**os.environ, "FARM_DATABASE_URL": args.database_url}
    # What a `farm verify` costs before it checks anything (interpreter, imports, the store opened): one that
    # names a job with no run. Subtracted to give the cost per run.
    base_s, _, _, base_cpu = store_scale.run_measured(["verify", "--json", "no-such-job"], env, repeats=args.repeats)
    print(f"farm verify of no run (start-up): {base_s:.2f} s wall, {base_cpu:.2f} s CPU")
    out = Path(f"/tmp/farm-bench-verify-{os.getpid()}.json")
    for label, extra in (("one process", ["--workers", "1"]), ("default processes", [])):
        seconds, peak_mb, status, cpu_s = store_scale.run_measured(["verify", "--json", *extra], env, stdout=out)
        checks = json.loads(out.read_text(encoding="utf-8"))
        verdicts: dict[str, int] = {}
        for item in checks:
            verdicts[item["verdict"]] = verdicts.get(item["verdict"], 0) + 1
        n = max(len(checks), 1)
        print(
            f"farm verify ({label}): {len(checks)} runs in {seconds:.2f} s wall, {cpu_s:.2f} s CPU "
            f"(all processes), {peak_mb:.0f} MB, exit {status}; verdicts {verdicts}"
        )
        print(
            f"  per run: {(cpu_s - base_cpu) / n * 1000:.3f} ms CPU, {(seconds - base_s) / n * 1000:.3f} ms wall "
            f"(start-up subtracted); 10,000 runs at this rate: {base_cpu + (cpu_s - base_cpu) / n * 10_000:.1f} s CPU"
        )
    out.unlink()
    for name, argv in (
        ("farm leaderboard --json", ["leaderboard", "--json"]),
        ("farm leaderboard --verified --json", ["leaderboard", "--verified", "--json"]),
    ):
        seconds, peak_mb, status, cpu_s = store_scale.run_measured(argv, env, repeats=args.repeats)
        print(f"{name}: {seconds:.3f} s (cpu {cpu_s:.2f} s, {peak_mb:.0f} MB), exit {status}")


if __name__ == "__main__":
    main()
