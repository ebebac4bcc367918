"""What the database refuses does not stop a worker: NUL characters are stored as U+FFFD on both databases, and
results the store answers with a refusal are set aside on the worker's disk while their attempt fails.

PostgreSQL refuses NUL in text and JSONB ("PostgreSQL text fields cannot contain NUL (0x00) bytes"), and an
engine's log can hold one. Before, such results went to the spool as if the store were down, the spool offered
them again at every pass, and the worker, which claims nothing while its results wait, never claimed again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from test_store import HW, _submit
from test_worker import submit, write_profile, write_small_spec

from farm.domain import Artifact, FailureClass, JobState, RunResult
from farm.errors import StoreRefused
from farm.recipes.model import Recipe
from farm.settings import Settings
from farm.store import Store
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile
from farm.worker.spool import REFUSED

NUL_LOG = "INFO loading\x00\x00 weights\nINFO ready\n"


def test_nul_characters_are_stored_as_replacement_characters_on_both_databases(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """An engine log, a provenance string and a failure message holding NUL are stored, each NUL made U+FFFD;
    a backslash followed by `u0000` in text is text and stays as written."""
    submitted = _submit(store, make_recipe(), count=2)
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    first = job.id
    result = make_result(artifacts=(Artifact(name="engine\x00.log", content=NUL_LOG),))
    provenance = {
        **result.provenance,
        "engine": {"name": "vllm", "version": "0.11\x00dev"},  # also kept in the run's summary and its group
        "engine_banner": "vLLM\x00 0.11",
        "note": "a literal \\u0000 stays",
    }
    store.complete(first, job.attempt, "w1", dataclasses.replace(result, provenance=provenance))

    (log,) = store.artifacts(first, job.attempt)
    assert log.name == "engine\ufffd.log"
    assert log.content == "INFO loading\ufffd\ufffd weights\nINFO ready\n"
    (run,) = store.runs(first)
    assert run.provenance is not None
    assert run.provenance["engine"]["version"] == "0.11\ufffddev"
    assert run.provenance["engine_banner"] == "vLLM\ufffd 0.11"
    assert run.provenance["note"] == "a literal \\u0000 stays"

    other = store.claim("w1", [HW], lease_s=60)
    assert other is not None
    second = other.id
    assert sorted((first, second)) == sorted(submitted)
    store.fail(
        second, other.attempt, "w1", FailureClass.ENGINE_CRASHED, "died\x00 here", (Artifact("engine.log", "x\x00"),)
    )
    view = store.get_job(second)
    assert view.failure_message == "died\ufffd here"
    assert [a.content for a in store.artifacts(second, other.attempt)] == ["x\ufffd"]


def refused_result(make_result: Callable[..., RunResult]) -> RunResult:
    """Results every database refuses: two artifacts under one name."""
    return make_result(
        artifacts=(Artifact(name="engine.log", content="one"), Artifact(name="engine.log", content="two"))
    )


def test_a_worker_sets_refused_results_aside_fails_their_attempt_and_claims_again(
    tmp_path: Path, make_result: Callable[..., RunResult]
) -> None:
    """Spooled results the store refuses, and a spool file that cannot be read, move to `refused/` (kept); the
    refused attempt fails with a message naming where its results are; nothing waits, so the worker claims the
    job's next attempt and runs it to success."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    job_id = submit(store, write_small_spec(tmp_path, max_attempts=2))
    settings = Settings(retry_backoff_s=0.0)
    worker = Worker(store, load_profile(write_profile(tmp_path)), data_dir=tmp_path / "data", settings=settings)
    store.register_worker(worker.worker_id, host="here", hardware_classes=list(worker.hardware_classes))
    claimed = store.claim(worker.worker_id, list(worker.hardware_classes), lease_s=60)
    assert claimed is not None
    assert claimed.id == job_id
    worker.spool.put(job_id, claimed.attempt, worker.worker_id, refused_result(make_result))
    (worker.spool.directory / "torn.json").write_text('{"job_id": "j-1", "attem')

    assert worker.deliver_spooled() == frozenset()  # nothing waits: the worker may claim
    assert worker.spool.pending() == []
    kept = sorted(path.name for path in (worker.spool.directory / REFUSED).iterdir())
    assert kept == [f"{job_id}.{claimed.attempt}.json", "torn.json"]
    job = store.get_job(job_id)
    assert job.state is JobState.QUEUED
    assert job.failure_class == FailureClass.MEASUREMENT_ERROR
    assert job.failure_message is not None
    assert "the store refused this attempt's results" in job.failure_message
    assert str(worker.spool.directory / REFUSED / f"{job_id}.{claimed.attempt}.json") in job.failure_message

    assert worker.run(max_jobs=1, idle_exit_s=10) == 1
    done = store.get_job(job_id)
    assert done.state is JobState.SUCCEEDED, done.failure_message
    assert [run.attempt for run in store.runs(job_id)] == [1, 2]


class RefusingStore(Store):
    """The real store, except that it refuses the first results it is given (the seam for the delivery path)."""

    refusals = 1

    def complete(self, job_id: str, attempt: int, worker_id: str, result: RunResult, **kwargs: object) -> None:
        if self.refusals:
            self.refusals -= 1
            raise StoreRefused(f"cannot store the results of job {job_id!r}: value too long")
        super().complete(job_id, attempt, worker_id, result, **kwargs)  # type: ignore[arg-type]


def test_results_refused_at_delivery_are_kept_aside_and_the_next_attempt_succeeds(tmp_path: Path) -> None:
    """A job whose results the store refuses when the worker delivers them is not spooled for delivery (it would
    block the worker): the results are kept in `refused/`, the attempt fails and is retried, and succeeds."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    Store.open(url, auto_upgrade=True).close()
    store = RefusingStore.open(url)
    assert isinstance(store, RefusingStore)
    job_id = submit(store, write_small_spec(tmp_path, max_attempts=2))
    worker = Worker(
        store,
        load_profile(write_profile(tmp_path)),
        data_dir=tmp_path / "data",
        settings=Settings(retry_backoff_s=0.0),
    )
    assert worker.run(max_jobs=2, idle_exit_s=10) == 2
    job = store.get_job(job_id)
    assert job.state is JobState.SUCCEEDED, job.failure_message
    assert [run.attempt for run in store.runs(job_id)] == [1, 2]
    first = next(run for run in store.runs(job_id) if run.attempt == 1)
    assert first.failure_message is not None
    assert "value too long" in first.failure_message
    assert worker.spool.pending() == []
    assert [path.name for path in (worker.spool.directory / REFUSED).iterdir()] == [f"{job_id}.1.json"]


def test_refused_results_of_a_reaped_attempt_are_set_aside_and_the_job_runs_again(
    tmp_path: Path, make_result: Callable[..., RunResult]
) -> None:
    """Results spooled through an outage longer than the lease: a reaper took the job back (host_lost, queued).
    The store refuses their content: they are set aside all the same, the reap's record stands (this worker no
    longer holds the attempt), nothing waits, and the job runs again."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    job_id = submit(store, write_small_spec(tmp_path, max_attempts=2))
    worker = Worker(
        store, load_profile(write_profile(tmp_path)), data_dir=tmp_path / "data", settings=Settings(retry_backoff_s=0.0)
    )
    store.register_worker(worker.worker_id, host="here", hardware_classes=list(worker.hardware_classes))
    claimed = store.claim(worker.worker_id, list(worker.hardware_classes), lease_s=0.05)
    assert claimed is not None
    worker.spool.put(job_id, claimed.attempt, worker.worker_id, refused_result(make_result))
    time.sleep(0.2)
    assert store.reap() == [job_id]

    assert worker.deliver_spooled() == frozenset()
    assert worker.spool.pending() == []
    assert [path.name for path in (worker.spool.directory / REFUSED).iterdir()] == [f"{job_id}.{claimed.attempt}.json"]
    job = store.get_job(job_id)
    assert job.state is JobState.QUEUED
    assert job.failure_class == FailureClass.HOST_LOST

    assert worker.run(max_jobs=1, idle_exit_s=10) == 1
    assert store.get_job(job_id).state is JobState.SUCCEEDED
