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
    fill_s = store_scale.fill(store, args.runs, template)
    store.trust_key(key.key_id)
    runs = store_scale.store_runs(store)
    if store.url.startswith("postgres"):
        store_scale.analyze(store)
    store.close()
    print(f"{runs} runs ({fill_s:.0f} s to fill, signed on delivery)", file=sys.stderr)

    env = {**os.environ, "FARM_DATABASE_URL": args.database_url}
    out = Path(f"/tmp/farm-bench-verify-{os.getpid()}.json")
    seconds, peak_mb, status, cpu_s = store_scale.run_measured(["verify", "--json"], env, stdout=out, repeats=1)
    checks = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    verdicts: dict[str, int] = {}
    for item in checks:
        verdicts[item["verdict"]] = verdicts.get(item["verdict"], 0) + 1
    print(f"farm verify: {len(checks)} runs in {seconds:.2f} s (cpu {cpu_s:.2f} s, {peak_mb:.0f} MB), exit {status}")
    print(f"  verdicts: {verdicts}")
    print(f"  {seconds / max(len(checks), 1) * 1000:.3f} ms per run")
    for name, argv in (
        ("farm leaderboard --json", ["leaderboard", "--json"]),
        ("farm leaderboard --verified --json", ["leaderboard", "--verified", "--json"]),
    ):
        seconds, peak_mb, status, cpu_s = store_scale.run_measured(argv, env, repeats=args.repeats)
        print(f"{name}: {seconds:.3f} s (cpu {cpu_s:.2f} s, {peak_mb:.0f} MB), exit {status}")


if __name__ == "__main__":
    main()
