"""The spool's promise through the real worker and a real SQLite store: results that neither the store (away)
nor the disk (full) takes are held in memory, reported in the worker's heartbeat, and delivered once the store
answers again; nothing is left on disk, not even a temporary file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from farm_harness import make_recipe, write_profile

from farm.domain import JobState, RunResult
from farm.errors import StoreError
from farm.settings import Settings
from farm.store import Store
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile, simulated_class

RESULT = RunResult(figures=(), samples={}, provenance={"worker_id": "spooler"}, total_requests=1)


def test_results_the_store_and_the_disk_refuse_are_held_reported_and_delivered_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store does not answer at delivery (its `complete` raises StoreError, as an outage does) and every
    fsync fails with ENOSPC: the result is held in memory, the spool directory holds no file, the heartbeat says
    one result is held. With the disk and the store back, the next delivery stores it and the count is 0."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}")
    profile = load_profile(write_profile(tmp_path, "spooler"))
    worker = Worker(store, profile, data_dir=tmp_path / "data", worker_id="spooler", settings=Settings())
    store.register_worker("spooler", host="h", hardware_classes=list(worker.hardware_classes))
    recipe = make_recipe()
    (job_id,) = store.submit(
        recipe,
        "spool",
        {"repeats": 1},
        "cd" * 32,
        2,
        simulated=True,
        hardware_class=simulated_class(recipe.hardware_class),
    )
    spool = tmp_path / "data" / "spool"
    job = store.claim("spooler", worker.hardware_classes, 60)
    assert job is not None
    assert job.id == job_id

    def store_away(*_args: object, **_kwargs: object) -> None:
        raise StoreError("cannot store the results: connection refused")

    def disk_full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as outage:
        outage.setattr(store, "complete", store_away)
        outage.setattr(os, "fsync", disk_full)
        worker._deliver(job, RESULT)  # the delivery at the end of a run, without an engine
        assert worker.spool.held == 1
        assert [p for p in spool.rglob("*") if p.is_file()] == []  # no .json, no 0-byte .tmp
        assert worker.deliver_spooled() == frozenset({job_id})  # still waiting: claims nothing meanwhile
    worker.report_alive()
    (seen,) = store.list_workers()
    assert seen.spool_held == 1

    assert worker.deliver_spooled() == frozenset()
    assert store.get_job(job_id).state == JobState.SUCCEEDED
    assert worker.spool.held == 0
    worker.report_alive()
    (seen,) = store.list_workers()
    assert seen.spool_held == 0
    assert [p.name for p in spool.rglob("*") if p.is_file()] == []
    store.close()
