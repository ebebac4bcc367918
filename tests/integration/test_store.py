"""The store on real SQLite and PostgreSQL: migrations, submission, results, cancel, failures, queries."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import farm
from farm.domain import NOT_RETRIED, Artifact, FailureClass, JobState, RunResult
from farm.errors import InvalidTransition, JobNotFound, LeaseLost, StoreError, StoreRefused
from farm.recipes.model import Recipe
from farm.store import RunState, Store, recipe_sha256
from farm.store import store as store_module
from farm.store.db import POSTGRES_WORK_MEM
from farm.store.migrate import head_revision
from farm.store.models import Base

HW = "rtx-pro-6000-blackwell-96gb x 2"
PLAN = {"repeats": 3, "decode": {"workloads": ["code"]}}
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _submit(store: Store, recipe: Recipe, count: int = 1, max_attempts: int = 3) -> list[str]:
    return store.submit(recipe, "seed", PLAN, "cd" * 32, max_attempts, simulated=False, count=count, now=T0)


# --- migrations ---------------------------------------------------------------------------------------------


def test_fresh_database_is_refused_until_upgraded(store_url: str) -> None:
    """A database never migrated is refused with a hint to run `farm db upgrade`; after upgrade() it opens."""
    raw = Store(store_url)
    try:
        assert raw.schema_revision() is None
        with pytest.raises(StoreError, match="farm db upgrade"):
            Store.open(store_url, auto_upgrade=False)
        raw.upgrade()
        assert raw.schema_revision() == head_revision()
    finally:
        raw.close()
    with Store.open(store_url, auto_upgrade=False) as opened:
        assert opened.list_jobs() == []


def test_open_without_schema_check_then_upgrade(store_url: str) -> None:
    """`farm db upgrade` opens without the schema check and upgrades; the URL it shows hides the password."""
    with Store.open(store_url, auto_upgrade=False, check_schema=False) as opened:
        opened.upgrade()
        assert opened.schema_revision() == head_revision()
    shown = Store("postgresql://farm:s3cret@db.example/farm")
    try:
        assert "s3cret" not in shown.url_for_display
    finally:
        shown.close()


def test_default_auto_upgrade_is_for_sqlite_only(store_url: str, backend: str) -> None:
    """Store.open without auto_upgrade migrates the embedded SQLite store but refuses a shared PostgreSQL."""
    if backend == "sqlite":
        with Store.open(store_url) as opened:
            assert opened.schema_revision() == head_revision()
    else:
        with pytest.raises(StoreError, match="not initialised: run `farm db upgrade`"):
            Store.open(store_url)


def test_models_match_the_migration(store: Store, store_url: str) -> None:
    """Autogenerate (what `alembic check` runs) finds no difference between migration 0001 and the models."""
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_upgrade_twice_is_harmless(store: Store) -> None:
    """Upgrading a database already at head changes nothing."""
    store.upgrade()
    assert store.schema_revision() == head_revision()


def test_unknown_revision_is_refused(store: Store, store_url: str) -> None:
    """A database migrated by a newer farm (a revision unknown here) is refused, even with auto_upgrade."""
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = 'zzzz'"))
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="newer farm"):
        Store.open(store_url, auto_upgrade=True)


def test_sqlite_file_directory_and_pragmas(tmp_path: Path) -> None:
    """The SQLite file's directory is created and the database is in WAL mode."""
    path = tmp_path / "a" / "b" / "farm.db"
    with Store.open(f"sqlite:///{path}") as opened:
        opened.list_jobs()
    assert path.exists()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_postgres_upgrade_leaves_planner_statistics(store_url: str) -> None:
    """A PostgreSQL upgrade that migrates ends with ANALYZE of the farm's tables (a migration may backfill whole
    tables, and without statistics the readers' plans scan every measurement); one at head analyzes nothing."""

    def analyzed() -> dict[str, object]:
        engine = sa.create_engine(store_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.text("SELECT relname, last_analyze FROM pg_stat_user_tables WHERE schemaname = current_schema()")
                ).all()
        finally:
            engine.dispose()
        return dict(rows)

    with Store.open(store_url, auto_upgrade=False, check_schema=False) as fresh:
        assert analyzed() == {}  # a fresh schema: no tables yet
        fresh.upgrade()
        after = analyzed()
        assert {"jobs", "runs", "measurements", "run_summaries", "group_stats"} <= after.keys()
        assert all(after[name] is not None for name in ("measurements", "run_summaries", "group_stats")), after
        fresh.upgrade()  # already at head: no second ANALYZE
        assert analyzed() == after


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_postgres_storage_settings_and_their_downgrade(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """On PostgreSQL, `group_stats` leaves half of each page for its updates (HOT, pruned without a VACUUM)
    and a run's provenance is TOAST-compressed with LZ4 where the server has it, smaller than pglz stores it
    (which gives up on JSONB); it reads back whole. Downgrading 0004 restores the defaults."""
    from alembic import command

    from farm.store import migrate

    def settings(conn: sa.Connection) -> tuple[object, object]:
        options = conn.execute(sa.text("SELECT reloptions FROM pg_class WHERE oid = 'group_stats'::regclass"))
        compression = conn.execute(
            sa.text(
                "SELECT attcompression FROM pg_attribute WHERE attrelid = 'runs'::regclass AND attname = 'provenance'"
            )
        )
        return options.scalar(), compression.scalar()

    with store._read("lz4?") as conn:
        lz4 = "lz4" in (
            conn.execute(sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")).scalar()
            or []
        )
        assert settings(conn) == (["fillfactor=50"], "l" if lz4 else "")
    recipe = make_recipe()
    [job_id] = store.submit(recipe, "s", {"repeats": 3}, "ab" * 32, 1, simulated=False)
    claimed = store.claim_job(job_id, "w1", [recipe.hardware_class], lease_s=60)
    assert claimed is not None
    result = make_result({"decode/code/decode_tok_s": (270.0, 276.0, 282.0)})
    provenance = {**result.provenance, "prompt_sha256": {f"p{i}": f"{i:064x}" for i in range(40)}}  # > 2 KB: TOASTed
    store.complete(job_id, claimed.attempt, "w1", dataclasses.replace(result, provenance=provenance))
    if lz4:
        with store._read("stored size") as conn:
            stored, plain = conn.execute(
                sa.text(
                    "SELECT pg_column_size(provenance), pg_column_size(provenance::text::jsonb) FROM runs "
                    "WHERE job_id = :j"
                ),
                {"j": job_id},
            ).one()
        assert stored < plain, (stored, plain)  # the cast's value is never compressed: the whole JSONB
    stored_provenance = store.runs(job_id)[0].provenance
    assert stored_provenance is not None
    assert stored_provenance["prompt_sha256"] == provenance["prompt_sha256"]

    config = migrate.alembic_config()
    with store._engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0003_host_retries")
        assert settings(conn) == (None, "")

    """Every PostgreSQL session of the store has POSTGRES_WORK_MEM for its sorts, kept across the pool's resets
    (a reader's GROUP BY over every measurement spills to disk at PostgreSQL's default of 4 MB)."""
    for _ in range(2):  # the second read gets the pooled connection back, after its rollback
        with store._read("show work_mem") as conn:
            assert conn.execute(sa.text("SHOW work_mem")).scalar_one() == POSTGRES_WORK_MEM


def test_concurrent_auto_upgrades_of_one_sqlite_file(tmp_path: Path) -> None:
    """Concurrent first opens of the embedded store migrate it once, without tripping over each other."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    barrier = threading.Barrier(4)
    errors: list[Exception] = []

    def first_open() -> None:
        barrier.wait()
        try:
            with Store.open(url) as opened:
                opened.list_jobs()
        except Exception as error:  # the assertion below reports it
            errors.append(error)

    threads = [threading.Thread(target=first_open) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with Store(url) as opened:
        assert opened.schema_revision() == head_revision()


def test_unreachable_database_is_a_store_error() -> None:
    """A database that cannot be reached raises StoreError, not a driver error."""
    with pytest.raises(StoreError, match="cannot read the schema revision"):
        Store.open("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", auto_upgrade=False)


def test_unsupported_url_is_a_store_error() -> None:
    """A URL of a database the farm does not support is refused by name."""
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        Store("mysql://root@localhost/farm")


# --- submission and recipes ---------------------------------------------------------------------------------


def test_submit_writes_queued_jobs(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """submit writes `count` queued jobs with the recipe's hardware class and returns their ids."""
    ids = _submit(store, make_recipe(), count=3)
    assert len(set(ids)) == 3
    assert all(job_id.startswith("j-") and len(job_id) == 12 for job_id in ids)
    jobs = store.list_jobs()
    assert sorted(job.id for job in jobs) == sorted(ids)
    for job in jobs:
        assert job.state is JobState.QUEUED
        assert job.hardware_class == HW
        assert job.recipe_id == "deepseek-v4-flash-fp8-2x-rtx-pro-6000"
        assert job.attempt == 0
        assert job.max_attempts == 3
        assert job.owner is None
    assert store.queue_depth() == {HW: 3}


def test_submit_to_another_hardware_class(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A job can need a hardware class other than the recipe's (the simulator playing that hardware)."""
    [job_id] = store.submit(make_recipe(), "seed", PLAN, "cd" * 32, 3, simulated=True, hardware_class=f"sim {HW}")
    assert store.claim("w1", [HW], lease_s=60) is None
    job = store.claim("sim-1", [f"sim {HW}"], lease_s=60)
    assert job is not None
    assert job.id == job_id
    assert store.get_job(job_id).simulated


def test_times_round_trip_as_utc(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A timezone-aware time in any zone comes back as the same instant in UTC."""
    plus_two = T0.astimezone(timezone(timedelta(hours=2)))
    [job_id] = store.submit(make_recipe(), "seed", PLAN, "cd" * 32, 3, simulated=False, now=plus_two)
    job = store.get_job(job_id)
    assert job.created_at == T0
    assert job.created_at.tzinfo == UTC


def test_recipe_stored_once_per_content(
    store: Store, make_recipe: Callable[..., Recipe], count_rows: Callable[[str], int]
) -> None:
    """The same recipe content is stored once; a changed content under the same id gets a new row."""
    first = store.add_recipe(make_recipe())
    assert store.add_recipe(make_recipe()) == first == recipe_sha256(make_recipe())
    _submit(store, make_recipe(), count=2)
    assert count_rows("recipes") == 1
    changed = store.add_recipe(make_recipe(notes="a second run of the seed"))
    assert changed != first
    assert count_rows("recipes") == 2


def test_submit_is_one_transaction(
    store: Store,
    make_recipe: Callable[..., Recipe],
    count_rows: Callable[[str], int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When one job row cannot be written, neither the other jobs nor the new recipe are."""
    monkeypatch.setattr(store_module, "new_job_id", lambda: "j-duplicate0")
    with pytest.raises(StoreError, match="cannot submit"):
        _submit(store, make_recipe(), count=3)
    assert count_rows("jobs") == 0
    assert count_rows("recipes") == 0


# --- results ------------------------------------------------------------------------------------------------


def test_complete_writes_figures_samples_artifacts_and_provenance(
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """complete stores every figure, sample and artifact of the run and marks the job succeeded."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    result = make_result(
        {"decode/code/decode_tok_s": (270.0, 276.0, 282.0), "short_ttft/32/ttft_ms": (62.0, 63.0, 64.0)}
    )
    store.complete(job_id, job.attempt, "w1", result)

    view = store.get_job(job_id)
    assert view.state is JobState.SUCCEEDED
    assert {figure.key: figure for figure in store.results(job_id)} == {figure.key: figure for figure in result.figures}
    assert store.samples(job_id) == result.samples
    assert store.artifacts(job_id, job.attempt) == list(result.artifacts)
    [run] = store.runs(job_id)
    assert run.state is RunState.SUCCEEDED
    assert run.provenance == result.provenance
    assert run.artifacts == ("engine.log",)
    assert (count_rows("measurements"), count_rows("samples"), count_rows("artifacts")) == (2, 4, 1)


def test_complete_is_one_transaction(
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """A write failing after the figures and samples (two artifacts with one name) leaves nothing written; the
    database refused the content, so the error is StoreRefused (the same write gets the same answer)."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    clash = (Artifact(name="engine.log", content="one"), Artifact(name="engine.log", content="two"))
    with pytest.raises(StoreRefused, match="cannot store the results"):
        store.complete(job_id, job.attempt, "w1", make_result(artifacts=clash))
    assert (count_rows("measurements"), count_rows("samples"), count_rows("artifacts")) == (0, 0, 0)
    assert store.get_job(job_id).state is JobState.RUNNING
    assert [run.state for run in store.runs(job_id)] == [RunState.RUNNING]
    store.complete(job_id, job.attempt, "w1", make_result())
    assert store.get_job(job_id).state is JobState.SUCCEEDED


def test_second_delivery_writes_nothing_more(
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """Results delivered twice for the same (job, attempt) by their owner are stored once."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    store.complete(job_id, job.attempt, "w1", make_result())
    store.complete(job_id, job.attempt, "w1", make_result())
    assert (count_rows("measurements"), count_rows("samples"), count_rows("artifacts")) == (1, 2, 1)


@pytest.mark.parametrize("late", ["expired lease", "reaped, not claimed again", "reaped, budget spent"])
def test_late_results_of_the_current_attempt_are_accepted(
    late: str,
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """Fencing by attempt, not by clock: results of the current attempt are taken whenever they arrive while no
    later attempt exists: after the lease expired, and even after a reaper took the job back."""
    [job_id] = _submit(store, make_recipe(), max_attempts=1 if late == "reaped, budget spent" else 3)
    first = store.claim("w1", [HW], lease_s=60, now=T0)
    assert first is not None
    if late != "expired lease":
        assert store.reap(now=T0 + timedelta(seconds=61)) == [job_id]
    store.complete(job_id, first.attempt, "w1", make_result(), now=T0 + timedelta(seconds=3600))
    job = store.get_job(job_id)
    assert (job.state, job.failure_class, job.owner) == (JobState.SUCCEEDED, None, "w1")
    (run,) = store.runs(job_id)
    assert (run.state, run.failure_class) == (RunState.SUCCEEDED, None)
    assert [f.key for f in store.results(job_id)] == ["decode/code/decode_tok_s"]


@pytest.mark.parametrize("stale", ["other worker", "older attempt", "cancelled job"])
def test_results_from_a_stale_owner_are_refused(
    stale: str,
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """complete from anyone but the owner of the current attempt raises LeaseLost and writes nothing."""
    [job_id] = _submit(store, make_recipe())
    first = store.claim("w1", [HW], lease_s=60, now=T0)
    assert first is not None
    worker, attempt, when = "w1", first.attempt, T0 + timedelta(seconds=1)
    if stale == "other worker":
        worker = "w2"
    elif stale == "older attempt":
        assert store.reap(now=T0 + timedelta(seconds=61)) == [job_id]
        second = store.claim("w1", [HW], lease_s=60, now=T0 + timedelta(seconds=62))
        assert second is not None
        assert second.attempt == first.attempt + 1
        when = T0 + timedelta(seconds=63)
    else:
        store.cancel(job_id)
    state_before = store.get_job(job_id).state
    with pytest.raises(LeaseLost):
        store.complete(job_id, attempt, worker, make_result(), now=when)
    assert (count_rows("measurements"), count_rows("samples"), count_rows("artifacts")) == (0, 0, 0)
    assert store.get_job(job_id).state is state_before
    assert store.results(job_id) == []


# --- cancel -------------------------------------------------------------------------------------------------


def test_cancel_a_queued_job(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A queued job is cancelled at once and can no longer be claimed."""
    [job_id] = _submit(store, make_recipe())
    assert store.cancel(job_id) is JobState.CANCELLED
    assert store.get_job(job_id).state is JobState.CANCELLED
    assert store.claim("w1", [HW], lease_s=60) is None
    assert store.claim_job(job_id, "w1", [HW], lease_s=60) is None


def test_cancel_a_running_job_stops_its_owner(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The owner of a cancelled running job gets LeaseLost saying so at its next heartbeat and completion."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    assert store.cancel(job_id) is JobState.CANCELLED
    with pytest.raises(LeaseLost, match="cancelled"):
        store.heartbeat(job_id, job.attempt, "w1", "measuring", 0.5, lease_s=60)
    with pytest.raises(LeaseLost, match="cancelled"):
        store.complete(job_id, job.attempt, "w1", make_result())
    with pytest.raises(LeaseLost, match="cancelled"):
        store.fail(job_id, job.attempt, "w1", FailureClass.ENGINE_CRASHED, "crashed")
    assert [run.state for run in store.runs(job_id)] == [RunState.CANCELLED]
    assert store.reap(now=T0 + timedelta(days=365)) == []


@pytest.mark.parametrize("ending", ["succeeded", "failed", "cancelled"])
def test_cancel_a_finished_job_is_refused(
    ending: str, store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A finished job cannot be cancelled."""
    [job_id] = _submit(store, make_recipe())
    if ending == "cancelled":
        store.cancel(job_id)
    else:
        job = store.claim("w1", [HW], lease_s=60)
        assert job is not None
        if ending == "succeeded":
            store.complete(job_id, job.attempt, "w1", make_result())
        else:
            store.fail(job_id, job.attempt, "w1", FailureClass.BAD_RECIPE, "no such flag")
    with pytest.raises(InvalidTransition, match=f"already {ending}"):
        store.cancel(job_id)


def test_unknown_job_is_not_found(store: Store) -> None:
    """Reads and cancel of a job id that does not exist raise JobNotFound."""
    with pytest.raises(JobNotFound):
        store.cancel("j-0000000000")
    with pytest.raises(JobNotFound):
        store.get_job("j-0000000000")
    with pytest.raises(JobNotFound):
        store.runs("j-0000000000")
    with pytest.raises(JobNotFound):
        store.results("j-0000000000")


# --- failures and release -----------------------------------------------------------------------------------


def test_retriable_failure_requeues_until_the_budget_is_spent(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A retriable failure requeues the job (owner cleared) until max_attempts is reached, then it fails."""
    [job_id] = _submit(store, make_recipe(), max_attempts=2)
    first = store.claim("w1", [HW], lease_s=60)
    assert first is not None
    assert store.fail(job_id, 1, "w1", FailureClass.ENGINE_CRASHED, "exit 1") is JobState.QUEUED
    view = store.get_job(job_id)
    assert (view.state, view.owner, view.failure_class) == (JobState.QUEUED, None, "engine_crashed")
    second = store.claim("w2", [HW], lease_s=60)
    assert second is not None
    assert second.attempt == 2
    log = (Artifact(name="engine.log", content="Traceback ..."),)
    assert store.fail(job_id, 2, "w2", "measurement_error", "every request failed", log) is JobState.FAILED
    view = store.get_job(job_id)
    assert (view.state, view.failure_class, view.failure_message) == (
        JobState.FAILED,
        "measurement_error",
        "every request failed",
    )
    runs = store.runs(job_id)
    assert [(run.attempt, run.worker_id, run.state, run.failure_class) for run in runs] == [
        (1, "w1", RunState.FAILED, "engine_crashed"),
        (2, "w2", RunState.FAILED, "measurement_error"),
    ]
    assert store.artifacts(job_id, 2) == list(log)


@pytest.mark.parametrize("failure", sorted(NOT_RETRIED))
def test_not_retried_classes_fail_at_once(
    failure: FailureClass, store: Store, make_recipe: Callable[..., Recipe]
) -> None:
    """A failure that would repeat (bad recipe, bad argument, OOM) fails the job with attempts left."""
    [job_id] = _submit(store, make_recipe(), max_attempts=5)
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    assert store.fail(job_id, job.attempt, "w1", failure, "will repeat") is JobState.FAILED
    assert store.get_job(job_id).state is JobState.FAILED
    assert store.claim("w1", [HW], lease_s=60) is None


def test_fail_from_a_stale_owner_is_refused(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """Only the owner of the current attempt can fail a job."""
    [job_id] = _submit(store, make_recipe())
    job = store.claim("w1", [HW], lease_s=60)
    assert job is not None
    with pytest.raises(LeaseLost, match="held by w1"):
        store.fail(job_id, job.attempt, "w2", FailureClass.ENGINE_CRASHED, "not mine")
    assert store.get_job(job_id).state is JobState.RUNNING


def test_release_does_not_spend_the_budget(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """A released job goes back to the queue; the release is not charged against max_attempts."""
    [job_id] = _submit(store, make_recipe(), max_attempts=2)
    first = store.claim("w1", [HW], lease_s=60)
    assert first is not None
    assert store.release(job_id, first.attempt, "w1", "worker shutting down") is JobState.QUEUED
    assert store.get_job(job_id).owner is None
    second = store.claim("w2", [HW], lease_s=60)
    assert second is not None
    assert second.attempt == 2
    # Without the release this second attempt would have spent the budget of two.
    assert store.fail(job_id, 2, "w2", FailureClass.ENGINE_CRASHED, "exit 1") is JobState.QUEUED
    assert [run.state for run in store.runs(job_id)] == [RunState.RELEASED, RunState.FAILED]


# --- queries ------------------------------------------------------------------------------------------------


def test_list_jobs_filters(store: Store, make_recipe: Callable[..., Recipe]) -> None:
    """list_jobs filters by state and sweep and honours the limit."""
    ids = _submit(store, make_recipe(), count=3)
    store.cancel(ids[0])
    assert {job.id for job in store.list_jobs([JobState.QUEUED])} == set(ids[1:])
    assert [job.id for job in store.list_jobs(["cancelled"])] == [ids[0]]
    assert store.list_jobs(sweep_name="other") == []
    assert len(store.list_jobs(limit=2)) == 2


def test_workers_register_and_heartbeat(store: Store) -> None:
    """Workers appear in the hosts table and their heartbeat records what they do."""
    store.register_worker("w1", host="gpu-box", hardware_classes=[HW], now=T0)
    assert store.list_workers()[0].version == farm.__version__
    store.worker_heartbeat("w1", job_id="j-0123456789", phase="measuring", now=T0 + timedelta(seconds=5))
    [worker] = store.list_workers()
    assert (worker.worker_id, worker.host_name, worker.hardware_classes) == ("w1", "gpu-box", (HW,))
    assert (worker.current_job_id, worker.phase) == ("j-0123456789", "measuring")
    assert worker.last_heartbeat == T0 + timedelta(seconds=5)
    store.register_worker("w1", "gpu-box", [HW, "cpu x 1"], "0.2.0", now=T0 + timedelta(seconds=9))
    [worker] = store.list_workers()
    assert (worker.version, worker.hardware_classes, worker.phase) == ("0.2.0", (HW, "cpu x 1"), None)
    with pytest.raises(StoreError, match="not registered"):
        store.worker_heartbeat("nobody")


def _run_job(store: Store, recipe: Recipe, result: RunResult, *, simulated: bool = False, hardware: str = HW) -> str:
    [job_id] = store.submit(recipe, "seed", PLAN, "cd" * 32, 3, simulated=simulated)
    job = store.claim_job(job_id, "w1", [hardware], lease_s=60)
    assert job is not None
    store.complete(job_id, job.attempt, "w1", result)
    return job_id


def test_leaderboard_aggregates_succeeded_runs(
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """Rows per recipe × hardware × engine version × workload; simulated runs kept apart and optional."""
    recipe = make_recipe()
    figures = {
        "decode/code/decode_tok_s": (270.0, 280.0),
        "decode/prose/decode_tok_s": (150.0,),
        "prefill/1024/prefill_tok_s": (5000.0,),
        "prefill/107016/prefill_tok_s": (10_400.0, 10_200.0),
        "short_ttft/32/ttft_ms": (63.0,),
        "memory/gpu0/peak_memory_gib": (88.5,),
        "memory/gpu1/peak_memory_gib": (90.25,),
        "spec_decode/code/acceptance_rate": (0.5,),
        "concurrency/16/aggregate_tok_s": (2000.0,),
    }
    first = _run_job(store, recipe, make_result(figures))
    second = _run_job(store, recipe, make_result({"decode/code/decode_tok_s": (290.0,)}))
    _run_job(store, recipe, make_result({"decode/code/decode_tok_s": (999.0,)}, engine_version="0.12.0"))
    _run_job(store, recipe, make_result({"decode/code/decode_tok_s": (276.0,)}, simulated=True), simulated=True)
    [unfinished] = _submit(store, recipe)
    assert store.claim_job(unfinished, "w2", [HW], lease_s=60) is not None

    rows = store.leaderboard()
    keyed = {(row.engine_version, row.workload, row.simulated): row for row in rows}
    assert set(keyed) == {
        ("0.11.0", "code", False),
        ("0.11.0", "prose", False),
        ("0.12.0", "code", False),
        ("0.11.0", "code", True),
    }
    code = keyed[("0.11.0", "code", False)]
    assert code.runs == 2
    assert code.job_ids == tuple(sorted((first, second)))
    assert (code.decode_tok_s.n, code.decode_tok_s.min, code.decode_tok_s.max) == (3, 270.0, 290.0)
    assert code.decode_tok_s.mean == pytest.approx(280.0)
    assert code.decode_tok_s.spread == pytest.approx(20.0 / 280.0)
    assert code.prefill_prompt_tokens == 107_016
    assert code.prefill_tok_s == pytest.approx(10_300.0)
    assert code.short_ttft_ms == pytest.approx(63.0)
    assert code.peak_memory_gib == pytest.approx(90.25)
    assert code.spec_acceptance_rate == pytest.approx(0.5)
    assert (code.recipe_id, code.hardware_class, code.engine_name) == (recipe.id, HW, "vllm")
    assert keyed[("0.11.0", "prose", False)].spec_acceptance_rate is None
    assert rows[-1].simulated
    assert all(not row.simulated for row in store.leaderboard(include_simulated=False))
    assert len(store.leaderboard(include_simulated=False)) == 3


def test_a_store_from_before_revision_0002_is_backfilled_and_still_read(
    store_url: str, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A store at revision 0001 holding results (raw samples as JSON) upgrades: every succeeded run gets its
    summary and pooled stats, the leaderboard is the same as if written today, old samples still read."""
    from alembic import command

    from farm.store import migrate

    figures = {"decode/code/decode_tok_s": (270.0, 276.0, 282.0), "prefill/4096/prefill_tok_s": (9000.0, 9100.0)}
    with Store.open(store_url, auto_upgrade=True) as fresh:
        recipe = make_recipe()
        job_ids = []
        for version in ("0.11.0", "0.12.0"):
            [job_id] = fresh.submit(recipe, "s", {"repeats": 3}, "ab" * 32, 1, simulated=False)
            claimed = fresh.claim_job(job_id, "w1", [recipe.hardware_class], lease_s=60)
            assert claimed is not None
            fresh.complete(job_id, claimed.attempt, "w1", make_result(figures, engine_version=version))
            job_ids.append(job_id)
        board_now = fresh.leaderboard()
        samples_now = fresh.samples(job_ids[0])
        config = migrate.alembic_config()
        with fresh._engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0001")
        with fresh._engine.begin() as conn:
            # What a 0001 store holds: the raw samples as JSON (the downgrade dropped the compact ones).
            run_id = conn.execute(sa.text("SELECT id FROM runs WHERE job_id = :j"), {"j": job_ids[0]}).scalar_one()
            for key, repeats in samples_now.items():
                for index, repeat in enumerate(repeats):
                    conn.execute(
                        sa.text(
                            "INSERT INTO samples (run_id, figure_key, repeat_index, samples) VALUES (:r, :k, :i, :s)"
                        ),
                        {"r": run_id, "k": key, "i": index, "s": json.dumps(repeat)},
                    )
    with Store.open(store_url, auto_upgrade=True) as upgraded:
        assert upgraded.schema_revision() == head_revision()
        assert upgraded.leaderboard() == board_now
        assert [r.runs for r in board_now] == [1, 1]
        assert upgraded.samples(job_ids[0]) == samples_now


def test_entries_pool_runs_in_the_database_on_both_backends(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """Two runs of one group pool into one entry per key, values in time order, with ranks, job ids and
    provenance, also when the group is pooled in several chunks; a time filter selects runs; params come back
    whole (compact in the store)."""
    from farm.filters import ALL, build_filter
    from farm.store import reads

    recipe = make_recipe()
    start = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)
    jobs = []
    for index, values in enumerate(((270.0, 276.0), (280.0, 290.0))):
        [job_id] = store.submit(recipe, "s", {"repeats": 2}, "ab" * 32, 1, simulated=False, now=start)
        claimed = store.claim_job(job_id, "w1", [recipe.hardware_class], lease_s=600, now=start)
        assert claimed is not None
        result = make_result({"decode/code/decode_tok_s": values})
        store.complete(job_id, claimed.attempt, "w1", result, now=start + timedelta(minutes=1 + index))
        jobs.append(job_id)
    [entry] = list(reads.iter_entries(store, ALL))
    assert entry.values == (270.0, 276.0, 280.0, 290.0)
    assert (entry.n, entry.runs, entry.requested, entry.rank) == (4, 2, 4, 1)
    assert entry.median == 278.0
    assert entry.job_ids == tuple(sorted(jobs))
    assert [p.job_id for p in entry.provenance] == jobs
    assert entry.params == {"point": "code"}
    with pytest.MonkeyPatch.context() as patch:  # a group larger than one query's run ids: pooled in chunks
        patch.setattr(reads, "POOL_CHUNK", 1)
        assert list(reads.iter_entries(store, ALL)) == [entry]
    [unranked] = list(reads.iter_entries(store, ALL, ranked=False))  # what compare reads: no ranks to compute
    assert unranked.rank is None
    assert dataclasses.replace(unranked, rank=entry.rank) == entry
    [late] = list(reads.iter_entries(store, build_filter(since=(start + timedelta(seconds=90)).isoformat())))
    assert (late.values, late.job_ids) == ((280.0, 290.0), (jobs[1],))
    assert store.results(jobs[0])[0].params == {"point": "code"}
    # Figures stored before they carried their requested repeats count their run's plan, else their own n (2).
    with store._engine.begin() as conn:
        conn.execute(sa.text("UPDATE measurements SET requested_repeats = NULL"))
        conn.execute(sa.text("UPDATE run_summaries SET requested_repeats = 5 WHERE job_id = :j"), {"j": jobs[0]})
        conn.execute(sa.text("UPDATE run_summaries SET requested_repeats = NULL WHERE job_id = :j"), {"j": jobs[1]})
    [old_rows] = list(reads.iter_entries(store, ALL))
    assert old_rows.requested == 5 + 2
    assert dataclasses.replace(old_rows, requested=entry.requested) == entry


def test_entries_pool_values_in_finish_order_not_claim_order(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """Runs claimed A then B but finished B then A: the pooled values and the provenance follow the finish times
    (the database concatenates them in its own order; the reader puts them in time order)."""
    from farm.filters import ALL
    from farm.store import reads

    recipe = make_recipe()
    start = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)
    claims = []
    for _ in range(2):
        [job_id] = store.submit(recipe, "s", {"repeats": 2}, "ab" * 32, 1, simulated=False, now=start)
        claimed = store.claim_job(job_id, "w1", [recipe.hardware_class], lease_s=600, now=start)
        assert claimed is not None
        claims.append((job_id, claimed.attempt))
    (first_claimed, attempt_a), (second_claimed, attempt_b) = claims
    store.complete(second_claimed, attempt_b, "w1", make_result({"decode/code/decode_tok_s": (10.0, 11.0)}), now=start)
    store.complete(
        first_claimed,
        attempt_a,
        "w1",
        make_result({"decode/code/decode_tok_s": (20.0, 21.0)}),
        now=start + timedelta(minutes=5),
    )
    [entry] = list(reads.iter_entries(store, ALL))
    assert entry.values == (10.0, 11.0, 20.0, 21.0)
    assert [p.job_id for p in entry.provenance] == [second_claimed, first_claimed]
    assert (entry.first_measured_at, entry.measured_at) == (start, start + timedelta(minutes=5))


def test_localmaxxing_submissions_take_the_latest_finished_runs_provenance(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The LocalMaxxing export reads one provenance per group, the run that finished last (not the one claimed
    last), and submits the same as the in-memory path over whole runs; a simulated group is its own submission."""
    from farm.report import service
    from farm.report.aggregate import entries_from_runs
    from farm.report.localmaxxing import submissions
    from farm.store.records import RunMeasurements

    recipe = make_recipe()
    start = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)
    claimed = []
    for simulated in (False, False, True):
        hardware_class = f"sim:{recipe.hardware_class}" if simulated else recipe.hardware_class
        [job_id] = store.submit(
            recipe, "s", {"repeats": 2}, "ab" * 32, 1, simulated=simulated, hardware_class=hardware_class, now=start
        )
        claim = store.claim_job(job_id, "w1", [hardware_class], lease_s=600, now=start)
        assert claim is not None
        claimed.append((job_id, claim.attempt, simulated))
    for (job_id, attempt, simulated), minutes, tag in zip(claimed, (9, 5, 7), ("late", "early", "sim"), strict=True):
        result = make_result({"decode/code/decode_tok_s": (10.0 + minutes, 11.0)}, simulated=simulated)
        hashes = {"decode/code": f"{tag}-hash"}
        result = dataclasses.replace(result, provenance={**result.provenance, "prompt_sha256": hashes})
        store.complete(job_id, attempt, "w1", result, now=start + timedelta(minutes=minutes))

    from_store = service.localmaxxing_submissions(store)
    assert sorted((s["simulated"], s["promptHashes"]["decode/code"]) for s in from_store) == [
        (False, "late-hash"),
        (True, "sim-hash"),
    ]
    whole_runs: list[RunMeasurements] = []
    for job_id, _, _ in claimed:
        view = store.get_job(job_id)
        [run] = store.runs(job_id)
        assert run.provenance is not None
        assert run.finished_at is not None
        whole_runs.append(
            RunMeasurements(
                job_id=job_id,
                attempt=run.attempt,
                worker_id=run.worker_id,
                sweep_name=view.sweep_name,
                recipe_id=recipe.id,
                recipe_sha256=recipe_sha256(recipe),
                model_id=recipe.model_id,
                hardware_id=recipe.hardware_id,
                hardware_count=recipe.hardware_count,
                hardware_class=view.hardware_class,
                engine_name=run.provenance["engine"]["name"],
                engine_version=run.provenance["engine"]["version"],
                simulated=view.simulated,
                measured_at=run.finished_at,
                requested_repeats=2,
                recipe_argv=recipe.argv,
                tensor_parallel=None,
                max_context_tokens=None,
                provenance=run.provenance,
                figures=tuple(store.results(job_id)),
                origin="simulated" if view.simulated else "launched",
            )
        )
    in_memory = submissions(entries_from_runs(whole_runs), whole_runs)
    key = lambda s: s["simulated"]  # noqa: E731 - one sort key
    assert sorted(from_store, key=key) == sorted(in_memory, key=key)


def test_the_head_read_from_the_files_is_alembics_head() -> None:
    """The fast check of `Store.open` (the head read from the migration files) names the head Alembic computes."""
    from farm.store.migrate import head_from_files

    assert head_from_files() == head_revision()
