"""`farm bench URL` against a server the farm did not launch: the simulator, started here on its own.

The simulator's timing is known (farm.sim.timing, with the profile it reports at /sim/profile), so the figures
that `farm bench` stores can be checked against it: decode within 2% and TTFT p50 within 5 ms, at 1 and 16
streams. The simulator runs on the second quietest CPU when the module starts and `farm bench` (a child of this
test) on the quietest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.bench.multiproc import timed_placement
from farm.engines.process import EngineProcess
from farm.sim import timing
from farm.sim.launch import running_sim
from farm.store import Store

pytestmark = pytest.mark.slow

MODEL = "sim-test"
PROMPT_TOKENS = 256
SPEC = """
name = "endpoint-check"

[plan]
repeats = 3
warmup_requests = 1
time_budget_s = 120.0
request_timeout_s = 30.0

[plan.decode]
workloads = ["code"]
short_output_tokens = 16
long_output_tokens = 144

[plan.concurrency]
levels = [1, 16]
prompt_tokens = 256
output_tokens = 64
workload = "code"
"""


@pytest.fixture(scope="module")
def placement() -> tuple[int, int] | None:
    """The client's CPU and the simulator's, the two quietest when the module starts (None: nothing pinned)."""
    return timed_placement()


@pytest.fixture(scope="module")
def sim(placement: tuple[int, int] | None) -> Iterator[EngineProcess]:
    """The simulator, started as a separate server on the second quietest CPU (farm bench does not launch it)."""
    with running_sim(
        model=MODEL, faults=("--fault-startup-delay", "0"), cpus={placement[1]} if placement else None
    ) as process:
        yield process


def sim_lateness(base_url: str) -> dict[str, Any]:
    """The simulator's own lateness (write time minus due time), so a failure says who was late."""
    import urllib.request

    with urllib.request.urlopen(base_url + "/sim/stats", timeout=10) as response:  # noqa: S310 - loopback
        stats: dict[str, Any] = json.loads(response.read())["lateness"]
    return stats


def sim_profile(base_url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(base_url + "/sim/profile", timeout=10) as response:  # noqa: S310 - loopback
        answer: dict[str, Any] = json.loads(response.read())
    profile: dict[str, Any] = answer["profile"]
    return profile


@pytest.fixture(scope="module")
def benched(
    sim: EngineProcess, placement: tuple[int, int] | None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    """`python -m farm bench` with credentials in the URL, on the quietest CPU, its store in a fresh data dir."""
    data_dir = tmp_path_factory.mktemp("bench-data")
    spec = data_dir / "spec.toml"
    spec.write_text(SPEC)
    url = sim.base_url.replace("http://", "http://someone:hunter2@")
    env = {**os.environ, "FARM_DATA_DIR": str(data_dir), "FARM_LOG_FORMAT": "json"}
    env.pop("FARM_DATABASE_URL", None)
    argv = [sys.executable, "-m", "farm", "bench", url, "--model", MODEL, "--spec", str(spec), "--json"]
    argv += ["--hardware", "rtx-pro-6000-blackwell-96gb", "--hardware-count", "2"]
    if placement:
        argv = ["taskset", "-c", str(placement[0]), *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), data_dir


def figure(answer: dict[str, Any], key: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [item for item in answer["figures"] if item["key"] == key]
    assert found, f"no figure {key}; have {[item['key'] for item in answer['figures']]}"
    return found[0]


def test_decode_within_two_percent_of_the_simulators_rate(
    benched: tuple[dict[str, Any], Path], sim: EngineProcess
) -> None:
    """Two-point decode and the per-stream rate at 1 and 16 streams are within 2% of the configured rate."""
    answer, _ = benched
    profile = sim_profile(sim.base_url)
    truth = profile["decode_tok_s"]["code"]
    measured = figure(answer, "decode/code/decode_tok_s")["mean"]
    assert abs(measured - truth) / truth < 0.02, (measured, truth)
    for level in (1, 16):
        expected = timing.per_stream_rate(truth, profile["contention"], level)
        per_stream = figure(answer, f"concurrency/{level}/per_stream_tok_s")["mean"]
        assert abs(per_stream - expected) / expected < 0.02, (level, per_stream, expected)


def test_ttft_p50_within_5_ms_at_1_and_16_streams(benched: tuple[dict[str, Any], Path], sim: EngineProcess) -> None:
    """TTFT p50 at 1 and 16 streams (median of the repeats) is within 5 ms of the timing model's TTFT for the
    sized prompt."""
    answer, _ = benched
    p = sim_profile(sim.base_url)
    truth_ms = 1000 * timing.ttft_s(
        PROMPT_TOKENS,
        0,
        base_latency_s=p["base_latency_s"],
        linear_s_per_token=p["prefill_linear_s_per_token"],
        quadratic_s_per_token2=p["prefill_quadratic_s_per_token2"],
        cached_s_per_token=p["cached_s_per_token"],
    )
    for level in (1, 16):
        # The median of the 3 repeats: one stall of this shared VM is one repeat's outlier, not the figure.
        measured = figure(answer, f"concurrency/{level}/ttft_ms_p50")["median"]
        assert abs(measured - truth_ms) < 5.0, (level, measured, truth_ms, sim_lateness(sim.base_url))


def test_the_run_is_stored_as_an_endpoint_without_credentials(benched: tuple[dict[str, Any], Path]) -> None:
    """The stored run says engine kind "endpoint", not launched by the farm, the URL without its password,
    the declared hardware, and that the server was the simulator (so it is marked simulated)."""
    answer, data_dir = benched
    store = Store.open(f"sqlite:///{data_dir / 'farm.db'}")
    try:
        job = store.get_job(answer["job"])
        assert job.state == "succeeded"
        (run,) = store.runs(answer["job"])
        provenance = run.provenance
        assert provenance is not None
        engine = provenance["engine"]
        assert engine["kind"] == "endpoint"
        assert engine["launched_by_farm"] is False
        assert "hunter2" not in json.dumps(provenance)
        assert "someone" not in engine["url"]
        assert engine["url"].startswith("http://127.0.0.1:")
        assert provenance["gpus"]["hardware_id"] == "rtx-pro-6000-blackwell-96gb"
        assert provenance["simulated"] is True
        stored = {figure.key for figure in store.results(answer["job"])}
        assert "decode/code/decode_tok_s" in stored
    finally:
        store.close()


OPEN_LOOP_SPEC = """
name = "endpoint-open-loop"

[plan]
repeats = 2
warmup_requests = 1
time_budget_s = 60.0
request_timeout_s = 30.0
api = "completions"

[open_loop]
process = "poisson"
rates_rps = [20.0]
requests = 20
seed = 5
prompt_tokens = 64
output_tokens = 16

[open_loop.slo]
ttft_ms = 500.0
tpot_ms = 50.0
"""


def test_an_open_loop_spec_is_measured_and_stored(sim: EngineProcess, tmp_path: Path) -> None:
    """A spec with only [open_loop]: goodput, throughput and latency per rate, one value per repeat, are
    stored with the arrival process, the seed and the SLO in their parameters."""
    spec = tmp_path / "open.toml"
    spec.write_text(OPEN_LOOP_SPEC)
    env = {**os.environ, "FARM_DATA_DIR": str(tmp_path), "FARM_LOG_FORMAT": "json"}
    env.pop("FARM_DATABASE_URL", None)
    argv = [sys.executable, "-m", "farm", "bench", sim.base_url, "--model", MODEL, "--spec", str(spec), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    goodput = figure(answer, "open_loop/20rps/goodput_rps")
    assert len(goodput["values"]) == 2
    assert goodput["params"]["process"] == "poisson"
    assert goodput["params"]["seed"] == 5
    assert goodput["params"]["slo"]["ttft_ms"] == 500.0
    assert figure(answer, "open_loop/20rps/good_fraction")["mean"] == 1.0
    throughput = figure(answer, "open_loop/20rps/throughput_tok_s")["values"]
    achieved = figure(answer, "open_loop/20rps/achieved_rps")["values"]
    assert all(abs(tok / req - 16) < 1e-6 for tok, req in zip(throughput, achieved, strict=True))  # 16 tokens each
    assert answer["total_requests"] == 1 + 2 * 20
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}")
    try:
        assert "open_loop/20rps/goodput_rps" in {f.key for f in store.results(answer["job"])}
    finally:
        store.close()


SHARDED_SPEC = """
name = "endpoint-sharded"

[plan]
repeats = 2
warmup_requests = 1
time_budget_s = 60.0
request_timeout_s = 30.0

[plan.concurrency]
levels = [8]
prompt_tokens = 64
output_tokens = 40

[client]
processes = 2
engine_cpus = [{sim_cpu}]
"""


def test_concurrency_measured_by_two_client_processes(
    sim: EngineProcess, placement: tuple[int, int] | None, tmp_path: Path
) -> None:
    """With [client] processes = 2 the concurrency figures come from two processes on one clock: every stream
    succeeds, per-stream decode is the simulator's rate within 2%, and the parameters carry each shard's lag and
    CPU and the client-bound verdict."""
    spec = tmp_path / "sharded.toml"
    sim_cpu = placement[1] if placement else 0  # with one CPU, the clients share it whatever engine_cpus says
    spec.write_text(SHARDED_SPEC.format(sim_cpu=sim_cpu))  # the clients keep off the simulator's CPU
    env = {**os.environ, "FARM_DATA_DIR": str(tmp_path), "FARM_LOG_FORMAT": "json"}
    env.pop("FARM_DATABASE_URL", None)
    argv = [sys.executable, "-m", "farm", "bench", sim.base_url, "--model", MODEL, "--spec", str(spec), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["failed_requests"] == 0
    per_stream = figure(answer, "concurrency/8/per_stream_tok_s")
    truth = sim_profile(sim.base_url)["decode_tok_s"]["code"]
    assert abs(per_stream["mean"] - truth) / truth < 0.02, per_stream["values"]
    params = per_stream["params"]
    assert params["client_processes"] == 2
    assert [len(shards) for shards in params["client_shards"]] == [2, 2]
    assert sum(shard["requests"] for shard in params["client_shards"][0]) == 8
    assert params["client_bound"] == bool(params["client_bound_reasons"])
