"""`farm bench URL` runs are signed where they were measured, by this host's key, and verify like worker runs:
a sweep against the simulator (a server the farm did not launch) stored on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from farm.bench.endpoint_run import bench_endpoint, load_endpoint_spec
from farm.engines.process import EngineProcess
from farm.signing.keys import HostKey
from farm.signing.runs import Verdict
from farm.sim.launch import running_sim
from farm.store import Store
from farm.store.models import MeasurementRow, Run

pytestmark = pytest.mark.slow

MODEL = "sim-test"
SPEC = """
name = "endpoint-signed"

[plan]
repeats = 2
warmup_requests = 1
time_budget_s = 60.0
request_timeout_s = 30.0

[plan.decode]
workloads = ["code"]
short_output_tokens = 8
long_output_tokens = 40
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[EngineProcess]:
    """The simulator, started on its own: `farm bench` measures it as any OpenAI-compatible server."""
    with running_sim(model=MODEL, faults=("--fault-startup-delay", "0")) as process:
        yield process


def test_an_endpoint_run_is_signed_by_this_hosts_key_and_verifies(
    store: Store, store_url: str, sim: EngineProcess, tmp_path: Path
) -> None:
    """The run is signed with the host key given (the CLI gives this host's), which the store then knows but
    does not trust: `untrusted` until `farm keys trust`, then `verified`; a figure of it changed in the store
    afterwards is caught by verify, naming its figures."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    key = HostKey.load_or_create(tmp_path / "data")
    run = bench_endpoint(
        store, sim.base_url, MODEL, load_endpoint_spec(spec), hardware_id="rtx-pro-6000-blackwell-96gb", host_key=key
    )
    [known] = store.keys()
    assert (known.key_id, known.trusted, known.source) == (key.key_id, False, "bench")
    assert {c.job_id: c.verdict for c in store.verify()} == {run.job_id: Verdict.UNTRUSTED}
    signature = store.signature(run.job_id)
    assert signature.key_id == key.key_id
    assert signature.artifacts_sha256 is not None
    store.trust_key(key.key_id)
    assert [(c.job_id, c.verdict) for c in store.verify()] == [(run.job_id, Verdict.VERIFIED)]

    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            run_id = conn.execute(sa.select(Run.id).where(Run.job_id == run.job_id)).scalar_one()
            row = conn.execute(
                sa.select(MeasurementRow.id, MeasurementRow.values).where(MeasurementRow.run_id == run_id).limit(1)
            ).one()
            conn.execute(
                sa.update(MeasurementRow)
                .where(MeasurementRow.id == row.id)
                .values(values=[row.values[0] + 1.0, *row.values[1:]])
            )
    finally:
        engine.dispose()
    [check] = store.verify()
    assert check.verdict is Verdict.CHANGED
    assert "its figures changed" in check.reason


def test_an_endpoint_run_without_a_key_is_stored_unsigned(store: Store, sim: EngineProcess, tmp_path: Path) -> None:
    """Without a host key (a caller of the library that passes none) the run is stored as before, unsigned."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    run = bench_endpoint(
        store, sim.base_url, MODEL, load_endpoint_spec(spec), hardware_id="rtx-pro-6000-blackwell-96gb"
    )
    assert [(c.job_id, c.verdict) for c in store.verify()] == [(run.job_id, Verdict.UNSIGNED)]
