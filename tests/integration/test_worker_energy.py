"""Energy, power and cost through the worker: a job on the simulator (two cards, the test profile's power model:
100 W idle, 300 W in prefill, 200 W for one decoding stream) with prices in the profile, then the readers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_worker import submit, write_profile, write_spec
from typer.testing import CliRunner

from farm.cli.app import app
from farm.domain import JobState
from farm.hardware.probe import SIM_POWER_SOURCE
from farm.store import Store
from farm.worker.daemon import Worker
from farm.worker.profile import load_profile

pytestmark = pytest.mark.slow


def test_a_simulated_job_stores_energy_power_and_cost_and_the_readers_show_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decode windows get every GPU-only figure (J/tok between the model's decode and prefill power per token),
    the cost at the profile's prices, and the short-prompt TTFT window (20 ms) is absent with its reason; the
    provenance says how power was read; `farm results` and `farm leaderboard` show them."""
    url = f"sqlite:///{tmp_path / 'farm.db'}"
    store = Store.open(url, auto_upgrade=True)
    job_id = submit(store, write_spec(tmp_path, long_tokens=400))
    profile_path = write_profile(tmp_path, overrides={"gpu_count": "2"})
    with profile_path.open("a") as profile:
        profile.write('[cost]\nper_hour = 3.6\nelectricity_per_kwh = 0.5\ncurrency = "EUR"\n')
    worker = Worker(store, load_profile(profile_path), data_dir=tmp_path / "data")
    assert worker.run(max_jobs=1, idle_exit_s=5) == 1
    assert store.get_job(job_id).state == JobState.SUCCEEDED

    figures = {f.key: f for f in store.results(job_id)}
    per_token = figures["energy/decode.code/j_per_output_token"]
    decode_rate = figures["decode/code/decode_tok_s"].summary.mean
    # Two cards at 200 W while decoding, 300 W in prefill: between 400 and 600 W over the decode rate per token.
    assert all(400 / decode_rate <= v <= 600 / decode_rate for v in per_token.values)
    assert per_token.summary.n == 2
    assert per_token.params["gpu_only"] is True
    assert per_token.params["simulated"] is True
    for card in (0, 1):
        assert 200.0 <= figures[f"power/decode.code.gpu{card}/peak_power_w"].summary.max <= 300.0
    cost = figures["cost/decode.code/per_m_output_tokens"]
    assert cost.unit == "EUR/Mtok"
    assert cost.params["prices"] == {"cost_per_hour": 3.6, "electricity_per_kwh": 0.5, "currency": "EUR"}
    assert "energy/short_ttft.16/energy_j" not in figures

    (run,) = store.runs(job_id)
    assert run.provenance is not None
    assert "too short to measure" in run.provenance["absent_figures"]["energy/short_ttft.16/energy_j"]
    energy = run.provenance["extra"]["energy"]
    assert energy["source"] == SIM_POWER_SOURCE
    assert energy["prices"]["currency"] == "EUR"
    assert min(energy["readings"]) > 20
    store.close()

    monkeypatch.setenv("FARM_DATABASE_URL", url)
    runner = CliRunner()
    shown = runner.invoke(app, ["results", job_id])
    assert shown.exit_code == 0, shown.stderr
    assert "energy/decode.code/j_per_output_token" in shown.stdout
    assert "not measured: energy/short_ttft.16/energy_j" in shown.stdout
    board = runner.invoke(app, ["leaderboard", "--json"])
    assert board.exit_code == 0, board.stderr
    (row,) = json.loads(board.stdout)
    assert row["j_per_output_token"] == pytest.approx(per_token.summary.mean)
    assert row["cost_unit"] == "EUR/Mtok"
    assert 200.0 <= row["peak_power_w"] <= 300.0
