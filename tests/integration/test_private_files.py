"""Files that can hold what an engine printed before the scrubber saw it are the worker's own: an engine log
(written by the real engine process, the simulator here, and by the recording fake through the worker) and a
spooled result are 0600 in a 0700 directory, an older, looser file too once it is opened again."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path

import pytest

from farm.domain import Artifact, FailureClass, RunResult
from farm.engines.process import EngineProcess
from farm.private_files import open_private
from farm.store import Store
from farm.worker.spool import Spool


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.timeout(30)
def test_an_engine_log_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The engine's own output goes to a 0600 file in a 0700 directory, whatever the umask; a log left 0644 by an
    older worker is tightened when the next engine appends to it."""
    log = tmp_path / "runs" / "j-1" / "engine.log"
    argv = (sys.executable, "-c", "print('HF_TOKEN=hf_abcdefghijklmnop from the engine')")
    engine = EngineProcess(
        argv, env={}, log_path=log, base_url="http://127.0.0.1:1", served_model="m", simulated=True, stop_grace_s=1
    )
    engine.start()
    try:
        deadline = time.monotonic() + 20
        while "from the engine" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        engine.stop()
    assert "hf_abcdefghijklmnop" in log.read_text()  # the raw log on the worker's disk ...
    assert _mode(log) == 0o600  # ... which only the worker's user reads
    assert _mode(log.parent) == 0o700
    log.chmod(0o644)
    with open_private(log) as handle:
        handle.write(b"more\n")
    assert _mode(log) == 0o600


def test_a_spooled_result_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The spool holds results (artifacts, provenance) until the store takes them: 0600 too."""
    result = RunResult(figures=(), samples={}, artifacts=(Artifact("engine.log", "x"),), provenance={})
    path = Spool(tmp_path / "spool").put("j-1", 1, "w", result)
    assert path is not None, "the disk took the result: it is a file, not held in memory"
    assert _mode(path) == 0o600


LEAKY = Path(__file__).resolve().parents[1] / "fixtures" / "fake_engines" / "leaky.py"
LEAKED = (
    "p@ss@w0rd-leak",
    "hf_LeakLeakLeakLeakLeakLeakLeak0123",
    "MHcCAQEEIleakedPrivateKeyBody",
    "LeakedCookieValue42",
    "leakedsignature0123456789",
    "leaked-yaml-api-key",
    "leaked-json-password",
    "sk_live_LeakLeakLeakLeakLeakLeak",
)


@pytest.mark.timeout(60)
def test_secrets_an_engine_prints_never_reach_the_store(tmp_path: Path, store: Store) -> None:
    """A worker whose engine prints a secret of every class and dies at start: the job's failure message and the
    stored engine log hold none of them; the raw log on the worker's disk has them, readable by its owner only."""
    from farm.recipes.model import Engine, Recipe, RecipeProvenance
    from farm.settings import Settings
    from farm.worker.daemon import Worker
    from farm.worker.profile import load_profile

    profile = tmp_path / "leaky.toml"
    profile.write_text(
        "\n".join(
            [
                'name = "leaky"',
                "[hardware]",
                'hardware_id = "cpu"',
                "count = 1",
                "[engine]",
                'kind = "vllm"',
                "ready_timeout_s = 20.0",
                "[engine.vllm]",
                f'executable = ["{sys.executable}", "{LEAKY}"]',
                "gpu_free_deadline_s = 0.0",
            ]
        )
        + "\n"
    )
    recipe = Recipe(
        id="leaky",
        model_id="farm/tiny-llama",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="vllm"),
        argv=("vllm", "serve", "farm/tiny-llama"),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )
    [job_id] = store.submit(recipe, "leaky", {"repeats": 1}, "cd" * 32, 1, simulated=False)
    worker = Worker(store, load_profile(profile), data_dir=tmp_path / "data", settings=Settings(poll_interval_s=0.1))
    worker.run(idle_exit_s=2)
    job = store.get_job(job_id)
    assert [run.failure_class for run in store.runs(job_id)][:1] == [FailureClass.ENGINE_START_FAILED]
    stored = [artifact.content for run in store.runs(job_id) for artifact in store.artifacts(job_id, run.attempt)]
    assert stored, "the engine log is kept as an artifact"
    text = " ".join([job.failure_message or "", *stored])
    assert "Engine core initialization failed" in text
    assert [secret for secret in LEAKED if secret in text] == []
    [log] = (tmp_path / "data").rglob("engine.log")
    assert "hf_LeakLeakLeakLeakLeakLeakLeak0123" in log.read_text()
    assert _mode(log) == 0o600
