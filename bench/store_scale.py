"""How the results readers scale: fill a store with N realistic succeeded runs, then time every reader.

    uv run python bench/store_scale.py --runs 10000 --database-url sqlite:////tmp/scale/10k.db
    uv run python bench/store_scale.py --runs 10000 --database-url postgresql+psycopg://postgres@127.0.0.1/scale10k

The runs are written through the store's own write path (Store.submit, claim_job, complete: one transaction per
run, the run summary and compact samples included), in one process. Each run is the demo sweep measured for real
on the simulator (jobs/demo.toml: decode on three workloads, prefill at 8k and 32k, short TTFT, the prefix-cache
repeat, concurrency 1/4/16; every figure and every raw sample), made once and kept as the template; each copy
gets its own figures (the template's scaled by a per-group speed and a per-run noise), its own recipe (20 recipes
x 5 hardware classes x 3 engine versions), host and time. About 10% of the runs are simulated, 2% endpoints.
A store already at N runs is not filled again. Then 10,000 queued jobs are added once (for `farm status`).

Each reader runs as its own process (`python -m farm ...`, as a user runs it), measured with os.wait4: wall time
and peak resident memory (ru_maxrss). GET /v1/leaderboard is timed from the client against a running
`farm serve`; its memory is the server's peak. The table goes to stdout, and as JSON with --json-out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from farm.bench.metrics import summarize
from farm.domain import Figure, RunResult
from farm.logs import configure
from farm.recipes.model import Engine, Recipe, RecipeProvenance, ServingLimits
from farm.store import Store

ROOT = Path(__file__).resolve().parent.parent
RECIPES = 20
HARDWARE = (
    ("rtx-pro-6000-blackwell-96gb", 2),
    ("rtx-5090-32gb", 4),
    ("h100-sxm-80gb", 8),
    ("mi300x-192gb", 1),
    ("dgx-spark-128gb", 1),
)
ENGINE_VERSIONS = ("0.11.0", "0.11.2", "0.12.0")
QUEUED_JOBS = 10_000
TEMPLATE = Path(tempfile.gettempdir()) / "farm-store-scale" / "template.json"
START_TIMEOUT_S = 60.0
READER_TIMEOUT_S = 900.0


def make_template(path: Path) -> dict[str, Any]:
    """Run the demo sweep on the simulator once and keep its figures, samples and provenance as JSON."""
    from farm.bench.records import figure_to_json
    from farm.demo import run_demo

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/template.db", auto_upgrade=True)
        try:
            job = run_demo(store, Path(tmp) / "data")
            if job.state != "succeeded":
                raise SystemExit(f"the demo sweep did not succeed: {job.failure_message}")
            template = {
                "figures": [figure_to_json(f) for f in store.results(job.id)],
                "samples": store.samples(job.id),
                "provenance": store.runs(job.id)[-1].provenance,
            }
        finally:
            store.close()
    path.write_text(json.dumps(template))
    return template


def load_template(path: Path) -> dict[str, Any]:
    if path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    print(f"making the template run (the demo sweep on the simulator) at {path}", file=sys.stderr)
    return make_template(path)


def recipe(index: int, hardware: tuple[str, int], version: str) -> Recipe:
    hardware_id, count = hardware
    model = f"org-{index % 7}/model-{index}-{'fp8' if index % 2 else 'bf16'}"
    return Recipe(
        id=f"model-{index}-{hardware_id}-vllm-tp{count}",
        model_id=model,
        hardware_id=hardware_id,
        hardware_count=count,
        engine=Engine(name="vllm", version=version),
        argv=("vllm", "serve", model, "--tensor-parallel-size", str(count), "--max-model-len", "131072"),
        serving=ServingLimits(max_context_tokens=131072, tensor_parallel=count),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256=f"{index:064x}"),
    )


def _scaled(figure: Figure, factor: float, rng: random.Random) -> Figure:
    lower_better = figure.unit in ("ms", "s", "GiB")
    values = tuple(v * (1 / factor if lower_better else factor) * rng.uniform(0.97, 1.03) for v in figure.values)
    return replace(figure, values=values, summary=summarize(values))


def fill(store: Store, runs: int, template: dict[str, Any], seed: int = 7) -> float:
    """Write `runs` succeeded runs (those not there yet) through Store.submit/claim_job/complete."""
    from farm.bench.records import figure_from_json

    have = store_runs(store)
    if have >= runs:
        return 0.0
    rng = random.Random(seed + have)
    figures = [figure_from_json(f) for f in template["figures"]]
    samples = template["samples"]
    base_provenance = dict(template["provenance"])
    start = time.monotonic()
    when0 = datetime(2026, 1, 1, tzinfo=UTC)
    recipes: dict[tuple[int, int, int], Recipe] = {}
    for index in range(have, runs):
        r, h, v = index % RECIPES, (index // RECIPES) % len(HARDWARE), (index // (RECIPES * len(HARDWARE))) % 3
        rec = recipes.get((r, h, v)) or recipes.setdefault((r, h, v), recipe(r, HARDWARE[h], ENGINE_VERSIONS[v]))
        simulated = index % 10 == 9
        endpoint = index % 50 == 7
        when = when0 + timedelta(minutes=index)
        [job_id] = store.submit(
            rec,
            "scale",
            {"repeats": 3},
            "ab" * 32,
            3,
            simulated=simulated,
            hardware_class=f"sim:{rec.hardware_class}" if simulated else None,
            now=when,
        )
        worker = f"host-{index % 12}-w1"
        claimed = store.claim_job(
            job_id, worker, [f"sim:{rec.hardware_class}" if simulated else rec.hardware_class], 3600, now=when
        )
        assert claimed is not None
        speed = 1.0 + 0.05 * r - 0.1 * h + 0.04 * v
        provenance = {
            **base_provenance,
            "engine": {
                "name": "sim" if simulated else "vllm",
                "version": ENGINE_VERSIONS[v],
                "image_digest": "sha256:" + f"{v:02x}" * 32,
                **({"kind": "endpoint"} if endpoint and not simulated else {}),
            },
            "host": {**(base_provenance.get("host") or {}), "name": f"host-{index % 12}"},
            "worker_id": worker,
            "simulated": simulated,
        }
        result = RunResult(
            figures=tuple(_scaled(f, speed, rng) for f in figures),
            samples=samples,
            provenance=provenance,
            total_requests=100,
        )
        store.complete(job_id, claimed.attempt, worker, result, now=when + timedelta(seconds=30))
        if (index + 1) % 1000 == 0:
            rate = (index + 1 - have) / (time.monotonic() - start)
            print(f"  filled {index + 1}/{runs} runs ({rate:.0f} runs/s)", file=sys.stderr, flush=True)
    return time.monotonic() - start


def store_runs(store: Store) -> int:
    with store._read("count runs") as conn:
        return int(conn.execute(text("SELECT count(*) FROM run_summaries")).scalar_one())


def add_queued(store: Store, count: int) -> None:
    """`count` queued jobs (once), on a hardware class no worker here serves."""
    with store._read("count queued") as conn:
        queued = int(conn.execute(text("SELECT count(*) FROM jobs WHERE state = 'queued'")).scalar_one())
    missing = count - queued
    rec = recipe(99, HARDWARE[0], ENGINE_VERSIONS[0])
    while missing > 0:
        batch = min(missing, 1000)
        store.submit(rec, "queued-scale", {"repeats": 3}, "ab" * 32, 3, simulated=False, count=batch)
        missing -= batch


def bytes_on_disk(url: str) -> int:
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1])
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    engine = create_engine(url)
    with engine.connect() as conn:
        size = conn.execute(
            text(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            )
        ).scalar_one()
    engine.dispose()
    return int(size)


def run_measured(
    args: list[str], env: dict[str, str], stdout: Path | None = None, repeats: int = 1
) -> tuple[float, float, int, float]:
    """(seconds, peak MB, exit status, CPU seconds) of a `python -m farm ...` process: the fastest of `repeats`
    runs (a start of a second or less is at the mercy of whatever else the machine does)."""
    return min(
        (_measure([sys.executable, "-m", "farm", *args], env, stdout) for _ in range(repeats)), key=lambda m: m[0]
    )


def run_measured_python(code: str, repeats: int = 3) -> tuple[float, float, int, float]:
    """The same for `python -c CODE`: what a bare import costs on this machine."""
    return min(
        (_measure([sys.executable, "-c", code], dict(os.environ), None) for _ in range(repeats)), key=lambda m: m[0]
    )


def _measure(argv: list[str], env: dict[str, str], stdout: Path | None) -> tuple[float, float, int, float]:
    out = stdout.open("wb") if stdout else open(os.devnull, "wb")  # noqa: SIM115 - closed below
    start = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - start
    out.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 and process.stderr is not None:
        print(f"  {' '.join(argv[1:])} failed: {process.stderr.read().decode()[-500:]}", file=sys.stderr)
    if process.stderr is not None:
        process.stderr.close()
    return elapsed, usage.ru_maxrss / 1024, process.returncode, usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def measure_api(env: dict[str, str], repeats: int = 5) -> tuple[float, float, float]:
    """(first GET s, best of `repeats` GET s, server peak MB) of /v1/leaderboard against `farm serve`."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "farm", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2):  # noqa: S310 - a URL built here
                break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("farm serve did not start") from None
            time.sleep(0.1)
    times = []
    for _ in range(repeats):
        start = time.monotonic()
        with urllib.request.urlopen(base + "/v1/leaderboard", timeout=READER_TIMEOUT_S) as response:  # noqa: S310
            response.read()
        times.append(time.monotonic() - start)
    process.terminate()
    _, _, usage = os.wait4(process.pid, 0)
    return times[0], min(times), usage.ru_maxrss / 1024


def two_jobs(store: Store) -> tuple[str, str, str, str]:
    """Two jobs of one recipe on two engine versions, and two recipes, for `farm compare`."""
    with store._read("pick") as conn:
        rows = conn.execute(
            text(
                "SELECT job_id, recipe_id, engine_version FROM run_summaries WHERE origin = 'launched' "
                "ORDER BY run_id LIMIT 400"
            )
        ).all()
    first = rows[0]
    other = next(r for r in rows if r.recipe_id == first.recipe_id and r.engine_version != first.engine_version)
    recipe_b = next(r.recipe_id for r in rows if r.recipe_id != first.recipe_id)
    return first.job_id, other.job_id, first.recipe_id, recipe_b


def analyze(store: Store) -> None:
    """Refresh PostgreSQL's planner statistics, as autovacuum does on a default server after a bulk load.

    Without them (a server run with autovacuum off, as the test service here is) the planner guesses how many
    measurements a list of run ids selects and scans the whole table for each sweep group: an export at 10,000
    runs took 34 s instead of a few."""
    import sqlalchemy as sa

    engine = sa.create_engine(store.url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("ANALYZE"))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    parser.add_argument("--queued", type=int, default=QUEUED_JOBS)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--fill-only", action="store_true", help="fill the store and stop")
    args = parser.parse_args()
    configure("json", "warning")

    template = load_template(args.template)
    store = Store.open(args.database_url, auto_upgrade=True)
    fill_s = fill(store, args.runs, template)
    add_queued(store, args.queued)
    runs = store_runs(store)
    if store.url.startswith("postgres"):
        analyze(store)
    if args.fill_only:
        print(f"{runs} runs after {fill_s:.0f} s of filling", file=sys.stderr)
        store.close()
        return
    a_job, b_job, a_recipe, b_recipe = two_jobs(store)
    store.close()
    size = bytes_on_disk(args.database_url)

    # The readers run as an installed farm does: with its bytecode compiled (`make setup` compiles it; without it
    # every start here would compile the farm afresh wherever PYTHONDONTWRITEBYTECODE is set).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "farm")], check=True, capture_output=True)
    floor = run_measured_python("import sqlalchemy, typer, typer.main")
    work = Path(tempfile.mkdtemp(prefix="store-scale-"))
    env = {**os.environ, "FARM_DATABASE_URL": args.database_url, "FARM_DATA_DIR": str(work / "data")}
    results: list[dict[str, Any]] = []

    def record(name: str, seconds: float, peak_mb: float, status: int, cpu_s: float | None, note: str = "") -> None:
        results.append(
            {"reader": name, "seconds": seconds, "cpu_s": cpu_s, "peak_mb": peak_mb, "status": status, "note": note}
        )
        cpu = f"{cpu_s:6.2f}" if cpu_s is not None else "     -"
        print(f"  {name:<34} {seconds:8.2f} s (cpu {cpu}) {peak_mb:6.0f} MB  {note}", file=sys.stderr, flush=True)

    print(f"{runs} runs, {size / runs / 1024:.1f} KB per run on disk; timing readers", file=sys.stderr)
    record("python: import sqlalchemy, typer", *floor, "this machine's floor for a command that reads the store")
    record("farm --help", *run_measured(["--help"], env, repeats=3))
    record("farm leaderboard --json", *run_measured(["leaderboard", "--json"], env, repeats=3))
    record("farm leaderboard (table)", *run_measured(["leaderboard"], env, repeats=3))
    record(f"farm status --json ({args.queued:,} queued)", *run_measured(["status", "--json"], env, repeats=3))
    record("farm status (table)", *run_measured(["status"], env, repeats=3))
    first, best, server_mb = measure_api(env)
    record("GET /v1/leaderboard", best, server_mb, 0, None, f"first {first:.3f} s, best of 5")
    csv_out = work / "export.csv"
    measured = run_measured(["export", "csv", "-o", str(csv_out)], env)
    record("farm export csv", *measured, f"{csv_out.stat().st_size / 1e6:.1f} MB")
    measured = run_measured(["export", "registry", "-o", str(work / "registry") + "/"], env)
    files = list((work / "registry").glob("*.json"))
    record("farm export registry -o DIR/", *measured, f"{len(files)} sweeps")
    submissions_out = work / "localmaxxing.json"
    measured = run_measured(["export", "localmaxxing", "-o", str(submissions_out)], env)
    count = len(json.loads(submissions_out.read_text(encoding="utf-8"))) if measured[2] == 0 else 0
    record("farm export localmaxxing", *measured, f"{count} submissions")
    page = work / "report.html"
    measured = run_measured(["report", "-o", str(page)], env)
    record("farm report -o", *measured, f"page {page.stat().st_size / 1e6:.2f} MB")
    aggregate_out = work / "aggregate.json"
    measured = run_measured(["aggregate", "--json"], env, stdout=aggregate_out)
    record("farm aggregate --json", *measured, f"{aggregate_out.stat().st_size / 1e6:.0f} MB out")
    aggregate_out = work / "aggregate.txt"
    measured = run_measured(["aggregate"], env, stdout=aggregate_out)
    rows = sum(1 for line in aggregate_out.open(encoding="utf-8") if line.startswith("│"))
    record("farm aggregate (table)", *measured, f"{rows} rows")
    record("farm compare JOB_A JOB_B", *run_measured(["compare", a_job, b_job, "--json"], env, repeats=3))
    record(
        "farm compare RECIPE_A RECIPE_B",
        *run_measured(["compare", a_recipe, b_recipe, "--json"], env, repeats=3),
    )

    summary = {
        "runs": runs,
        "database": args.database_url.split(":", 1)[0],
        "bytes_per_run": size / runs,
        "fill_s": fill_s,
        "readers": results,
    }
    print(json.dumps(summary, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
