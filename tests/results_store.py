"""A store with results to read, built once per test module: the integration and e2e tests of farm.report share it.

It holds one simulated job measured by a real Worker on the `test` simulator profile (a tiny sweep: decode on
two workloads, two prefill lengths, a short TTFT, three concurrency levels), hand-made "real hardware" runs
written through Store.complete (two recipes, two engine versions, one run with fewer repeats than asked), a
failed job and a cancelled job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from farm.bench.metrics import summarize
from farm.bench.records import Figure
from farm.domain import FailureClass, RunResult
from farm.logs import configure
from farm.recipes.model import Engine, Recipe, RecipeProvenance, ServingLimits
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
SEED_RECIPE = ROOT / "examples" / "deepseek-v4-flash-0731-registry.json"
HARDWARE_ID = "rtx-pro-6000-blackwell-96gb"
HARDWARE_CLASS = f"{HARDWARE_ID} x 2"
NEW_RECIPE = "deepseek-v4-flash-0731-fp8-rtx-pro-6000-tp2"
OLD_RECIPE = "deepseek-v4-flash-dspark-fp8-rtx-pro-6000-tp2"
MEASURED_AT = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)

NEW_FIGURES = {
    "decode/code/decode_tok_s": (268.0, 276.0, 284.0),
    "decode/prose/decode_tok_s": (146.0, 149.8, 153.6),
    "prefill/107016/prefill_tok_s": (10_400.0, 10_450.0, 10_350.0),
    "prefill/107016/ttft_ms": (10_290.0, 10_240.0, 10_340.0),
    "prefill/32768/ttft_ms": (2_900.0, 2_950.0, 3_000.0),
    "prefill/32768/prefill_tok_s": (11_300.0, 11_100.0, 10_920.0),
    "short_ttft/32/ttft_ms": (62.0, 63.0, 64.0),
    "memory/gpu0/peak_memory_gib": (94.5,),
    "memory/gpu1/peak_memory_gib": (94.6,),
    "spec_decode/code/acceptance_rate": (0.48, 0.486, 0.492),
    "spec_decode/code/mean_acceptance_length": (2.41, 2.43, 2.45),
    "concurrency/1/aggregate_tok_s": (270.0, 272.0, 274.0),
    "concurrency/1/per_stream_tok_s": (270.0, 272.0, 274.0),
    "concurrency/1/ttft_ms_p50": (70.0, 71.0, 72.0),
    "concurrency/8/aggregate_tok_s": (1_500.0, 1_520.0, 1_540.0),
    "concurrency/8/per_stream_tok_s": (187.0, 190.0, 193.0),
    "concurrency/8/ttft_ms_p50": (160.0, 165.0, 170.0),
}
"""The seed's own figures (decode 276.0 / 149.8, prefill ~10.4k at 107k, TTFT 63 ms, 48.6% acceptance)."""

OLD_FIGURES = {
    "decode/code/decode_tok_s": (255.0, 262.6, 270.2),
    "decode/prose/decode_tok_s": (150.0, 155.0, 160.0),
    "short_ttft/32/ttft_ms": (61.0, 62.0, 63.0),
}
"""The seed's "VS PREDECESSOR" figures (code 262.6, prose 155.0) with a ~6% spread."""

UNIT = {"ttft_ms": "ms", "peak_memory_gib": "GiB", "acceptance_rate": "fraction", "mean_acceptance_length": "tokens"}


@dataclass(frozen=True)
class ResultsStore:
    """What was put in the store, by role."""

    url: str
    simulated_job: str
    new_jobs: tuple[str, ...]
    """Two runs of the new recipe on engine 0.11.0 (the second has 2 of 3 decode repeats: incomplete)."""
    newer_engine_job: str
    old_job: str
    failed_job: str
    cancelled_job: str


def recipe(recipe_id: str, engine_version: str) -> Recipe:
    """A recipe of the seed's model on the seed's hardware, launched with tensor parallel 2."""
    return Recipe(
        id=recipe_id,
        model_id="deepseek-ai/DeepSeek-V4-Flash-0731",
        hardware_id=HARDWARE_ID,
        hardware_count=2,
        engine=Engine(name="vllm", version=engine_version),
        argv=(
            "vllm",
            "serve",
            "deepseek-ai/DeepSeek-V4-Flash-0731",
            "--tensor-parallel-size",
            "2",
            "--max-model-len",
            "262144",
        ),
        serving=ServingLimits(max_context_tokens=262144, tensor_parallel=2),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="ab" * 32),
    )


def figure(key: str, values: tuple[float, ...], requested: int) -> Figure:
    """A figure named by its key, summarised from its values."""
    kind, point, metric = key.split("/")
    unit = UNIT.get(metric, "ms" if metric.startswith("ttft") else "tok/s")
    return Figure(
        kind=kind,
        key=key,
        metric=metric,
        unit=unit,
        values=values,
        summary=summarize(values),
        workload=point if kind in ("decode", "spec_decode") else ("code" if kind == "concurrency" else None),
        params={"output_tokens": 128, "prompt_tokens": 256} if kind == "concurrency" else {"long_output_tokens": 896},
        requested_repeats=1 if kind == "memory" else requested,
    )


def provenance(engine_version: str, worker: str) -> dict[str, Any]:
    """A real host's provenance, as the worker writes it (farm.provenance.Provenance.to_json)."""
    return {
        "captured_at": "2026-08-30T09:10:02Z",
        "host": {"name": "turin", "cpu": "AMD EPYC Turin ES", "cpu_count": 128, "memory_gib": 125.0, "os": "Debian 13"},
        "gpus": {
            "hardware_id": HARDWARE_ID,
            "count": 2,
            "names": ["NVIDIA RTX PRO 6000 Blackwell Workstation Edition"] * 2,
            "driver_version": "590.48.01",
            "cuda_version": "13.2",
        },
        "engine": {"name": "vllm", "version": engine_version, "image_digest": "sha256:" + "0a" * 32},
        "argv": ["vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash-0731"],
        "farm_version": "0.1.0",
        "farm_commit": "c0ffee" * 6 + "c0ff",
        "method": {"repeats": 3, "temperature": 0.0},
        "prompt_sha256": {"decode/code": "11" * 32},
        "output_sha256": {"decode/code/long": "22" * 32},
        "cache_state": "prefix cache warmed per workload",
        "worker_id": worker,
        "attempt": 1,
        "simulated": False,
    }


def _complete(
    store: Store, rec: Recipe, figures: Mapping[str, Sequence[float]], when: datetime, *, version: str
) -> str:
    [job_id] = store.submit(rec, "real", {"repeats": 3}, "cd" * 32, 3, simulated=False)
    job = store.claim_job(job_id, "turin-w1", [HARDWARE_CLASS], lease_s=600, now=when)
    assert job is not None
    result = RunResult(
        figures=tuple(figure(key, tuple(values), requested=3) for key, values in figures.items()),
        samples={},
        provenance=provenance(version, "turin-w1"),
        total_requests=10,
    )
    store.complete(job_id, job.attempt, "turin-w1", result, now=when + timedelta(minutes=5))
    return job_id


def _sweep_spec(tmp: Path) -> Path:
    path = tmp / "sweep.toml"
    path.write_text(
        f"""
name = "results-test"
recipe = "{SEED_RECIPE}"
max_attempts = 1
[plan]
repeats = 2
warmup_requests = 1
time_budget_s = 120
request_timeout_s = 30
[plan.decode]
workloads = ["code", "prose"]
short_output_tokens = 16
long_output_tokens = 96
[plan.short_ttft]
prompt_tokens = 16
[plan.prefill]
prompt_tokens = [500, 2000]
[plan.concurrency]
levels = [1, 2, 4]
prompt_tokens = 64
output_tokens = 32
workload = "code"
"""
    )
    return path


def _worker_profile(tmp: Path) -> Path:
    path = tmp / "worker.toml"
    path.write_text(
        "\n".join(
            [
                'name = "results-sim"',
                "[worker]",
                "lease_s = 10.0",
                "poll_interval_s = 0.1",
                "[hardware]",
                f'hardware_id = "{HARDWARE_ID}"',
                "count = 2",
                "[engine]",
                'kind = "sim"',
                "ready_timeout_s = 30.0",
                "stop_grace_s = 2.0",
                "[engine.sim]",
                'profile = "test"',
                f"faults = {json.dumps([])}",
            ]
        )
        + "\n"
    )
    return path


def build_results_store(tmp: Path) -> ResultsStore:
    """Fill a fresh SQLite store in `tmp` (a few seconds: the simulated job is a real sweep).

    Logging is pointed at this moment's stderr first: a CLI test run earlier (Typer's runner) may have left it
    on a captured stream that is closed by now.
    """
    configure("json", "warning")
    url = f"sqlite:///{tmp / 'farm.db'}"
    store = Store.open(url, auto_upgrade=True)
    try:
        (simulated_job,) = submit_sweep(store, load_sweep(_sweep_spec(tmp)), simulate=True)
        worker = Worker(store, load_profile(_worker_profile(tmp)), data_dir=tmp / "worker-data")
        assert worker.run(max_jobs=1, idle_exit_s=5) == 1
        state = store.get_job(simulated_job)
        assert state.state == "succeeded", state.failure_message

        new = recipe(NEW_RECIPE, "0.11.0")
        first = _complete(store, new, NEW_FIGURES, MEASURED_AT, version="0.11.0")
        short = {**NEW_FIGURES, "decode/code/decode_tok_s": (275.0, 279.0)}
        second = _complete(store, new, short, MEASURED_AT + timedelta(hours=1), version="0.11.0")
        newer = _complete(
            store,
            recipe(NEW_RECIPE, "0.12.0"),
            {"decode/code/decode_tok_s": (300.0, 303.0, 306.0)},
            MEASURED_AT + timedelta(days=1),
            version="0.12.0",
        )
        old = _complete(
            store, recipe(OLD_RECIPE, "0.11.0"), OLD_FIGURES, MEASURED_AT - timedelta(days=1), version="0.11.0"
        )

        [failed] = store.submit(new, "real", {"repeats": 3}, "cd" * 32, 1, simulated=False)
        claimed = store.claim_job(failed, "turin-w1", [HARDWARE_CLASS], lease_s=600)
        assert claimed is not None
        store.fail(failed, claimed.attempt, "turin-w1", FailureClass.ENGINE_CRASHED, "engine crashed")
        [cancelled] = store.submit(new, "real", {"repeats": 3}, "cd" * 32, 1, simulated=False)
        store.cancel(cancelled)
    finally:
        store.close()
    return ResultsStore(
        url=url,
        simulated_job=simulated_job,
        new_jobs=(first, second),
        newer_engine_job=newer,
        old_job=old,
        failed_job=failed,
        cancelled_job=cancelled,
    )
