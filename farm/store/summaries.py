"""What a run summary holds, computed from a run's own records (pure, no I/O).

`run_summary_values` is used twice: by `Store.complete`, in the same transaction as the results, and by the
migration that adds the table (0002), which backfills it for the runs already stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from farm.domain import run_origin
from farm.store.records import ProvenanceSummary


def short_provenance(provenance: Mapping[str, Any] | None, worker_id: str) -> dict[str, Any]:
    """The provenance in short: enough to tell where and how a figure was measured (what exports show)."""
    p = dict(provenance or {})
    host = p.get("host") or {}
    gpus = p.get("gpus") or {}
    engine = p.get("engine") or {}
    return {
        "worker_id": str(p.get("worker_id") or worker_id),
        "host": host.get("name"),
        "cpu": host.get("cpu"),
        "os": host.get("os"),
        "gpu_names": [str(name) for name in gpus.get("names") or ()],
        "gpu_count": gpus.get("count"),
        "driver_version": gpus.get("driver_version"),
        "cuda_version": gpus.get("cuda_version"),
        "image_digest": engine.get("image_digest"),
        "farm_version": p.get("farm_version"),
        "farm_commit": p.get("farm_commit"),
        "cache_state": p.get("cache_state"),
    }


def provenance_record(
    short: Mapping[str, Any],
    *,
    job_id: str,
    attempt: int,
    measured_at: datetime,
    engine: str,
    engine_version: str | None,
    simulated: bool,
) -> ProvenanceSummary:
    """The ProvenanceSummary record of a run, from its short provenance (`short_provenance`) and its identity."""
    return ProvenanceSummary(
        job_id=job_id,
        attempt=attempt,
        worker_id=str(short.get("worker_id")),
        measured_at=measured_at.isoformat(),
        host=short.get("host"),
        cpu=short.get("cpu"),
        os=short.get("os"),
        gpu_names=tuple(str(name) for name in short.get("gpu_names") or ()),
        gpu_count=short.get("gpu_count"),
        driver_version=short.get("driver_version"),
        cuda_version=short.get("cuda_version"),
        engine=engine,
        engine_version=engine_version,
        image_digest=short.get("image_digest"),
        farm_version=short.get("farm_version"),
        farm_commit=short.get("farm_commit"),
        cache_state=short.get("cache_state"),
        simulated=simulated,
    )


def run_summary_values(
    *,
    run_id: int,
    job_id: str,
    attempt: int,
    worker_id: str,
    sweep_name: str,
    finished_at: datetime,
    simulated_job: bool,
    plan: Mapping[str, Any] | None,
    provenance: Mapping[str, Any] | None,
    recipe_id: str,
    recipe_sha256: str,
    model_id: str,
    hardware_id: str,
    hardware_count: int,
    hardware_class: str,
    recipe_engine_name: str,
    recipe_engine_version: str | None,
) -> dict[str, Any]:
    """The row of `run_summaries` for one succeeded run.

    The engine is what the run's provenance read from the server (the simulator says `sim`), else the recipe's.
    """
    prov = dict(provenance or {})
    engine = prov.get("engine") or {}
    origin = run_origin(prov, simulated_job)
    repeats = (plan or {}).get("repeats")
    short = short_provenance(prov, worker_id)
    return {
        "run_id": run_id,
        "job_id": job_id,
        "attempt": attempt,
        "worker_id": worker_id,
        "sweep_name": sweep_name,
        "finished_at": finished_at,
        "recipe_id": recipe_id,
        "recipe_sha256": recipe_sha256,
        "model_id": model_id,
        "model_name": model_id.split("/")[-1].casefold(),
        "hardware_id": hardware_id,
        "hardware_count": hardware_count,
        "hardware_class": hardware_class,
        "engine_name": str(engine.get("name") or recipe_engine_name),
        "engine_version": engine.get("version") or recipe_engine_version,
        "origin": origin.value,
        "simulated": origin == "simulated",
        "requested_repeats": repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else None,
        "host": short["host"],
        "provenance_summary": short,
    }
