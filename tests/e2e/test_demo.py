"""`farm demo` as a newcomer runs it: a subprocess on a fresh data directory, nothing started beforehand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SEED_DECODE_TOK_S = {"code": 276.0, "prose": 149.8, "math": 285.8}
"""The seed's published decode figures, which the simulator's seed profile is calibrated to."""


@pytest.mark.timeout(300)
def test_demo_runs_the_sweep_and_its_leaderboard_matches_the_simulators_truth(tmp_path: Path) -> None:
    """The demo finishes, prints a leaderboard, and its decode figures are within 1% of the calibrated truth."""
    env = {**os.environ, "FARM_DATA_DIR": str(tmp_path / "data")}
    started = time.monotonic()
    demo = subprocess.run(
        [sys.executable, "-m", "farm", "demo"], env=env, capture_output=True, text=True, timeout=280, check=False
    )
    elapsed = time.monotonic() - started
    print(f"farm demo took {elapsed:.1f} s")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "leaderboard" in demo.stdout
    assert "simulated" in demo.stdout

    board = subprocess.run(
        [sys.executable, "-m", "farm", "leaderboard", "--json"], env=env, capture_output=True, text=True, check=True
    )
    rows = json.loads(board.stdout)
    by_workload = {r["workload"]: r for r in rows}
    assert set(by_workload) == set(SEED_DECODE_TOK_S)
    for workload, truth in SEED_DECODE_TOK_S.items():
        row = by_workload[workload]
        assert row["simulated"] is True
        assert row["decode_tok_s"]["n"] == 3
        assert row["decode_tok_s"]["mean"] == pytest.approx(truth, rel=0.01)
        assert row["short_ttft_ms"] == pytest.approx(63.0, abs=5.0)
        assert row["peak_memory_gib"] == pytest.approx(96799 / 1024, rel=0.001)
    assert (tmp_path / "data" / "farm.db").exists()

    # Energy and power, from the simulator's power model (330 W a card for one stream decoding, 600 W in prefill,
    # the cards' limit), GPU-only and marked simulated; the demo profile states prices, so cost too.
    for row in rows:
        assert (
            2 * 330 / row["decode_tok_s"]["mean"] <= row["j_per_output_token"] <= 2 * 600 / row["decode_tok_s"]["mean"]
        )
        assert 2 * 330 <= row["avg_power_w"] <= 2 * 600
        assert 330 <= row["peak_power_w"] <= 600
        assert row["cost_per_m_output_tokens"] > 0
        assert row["cost_unit"] == "USD/Mtok"
    job = re.search(r"job (j-[0-9a-f]+)", demo.stdout)
    assert job is not None, demo.stdout[-2000:]
    shown = subprocess.run(
        [sys.executable, "-m", "farm", "results", job.group(1)], env=env, capture_output=True, text=True, check=True
    )
    assert "energy/decode.code/j_per_output_token" in shown.stdout
    assert "power/decode.code.gpu1/peak_power_w" in shown.stdout
    assert "GPU-only" in shown.stdout
    assert "simulator's power model" in shown.stdout
    # A 60 ms short-prompt window holds too few readings: absent, and `farm results` says why.
    assert "not measured: energy/short_ttft.32/energy_j" in shown.stdout
    assert "too short to measure" in shown.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "farm", "results", job.group(1), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures = {f["key"]: f for f in json.loads(listed.stdout)["figures"]}
    energy = figures["energy/decode.code/energy_j"]
    assert energy["params"]["gpu_only"] is True
    assert energy["params"]["simulated"] is True
    assert figures["cost/decode.code/per_m_output_tokens"]["params"]["prices"]["cost_per_hour"] == 2.40
    board_text = subprocess.run(
        [sys.executable, "-m", "farm", "leaderboard"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "J/tok GPU" in board_text
    assert "W GPU" in board_text
    # The cache state, from the simulator's prefix-cache counters: the repeat is served from the cache (all its
    # full 256-token blocks: 7936 of 8192 tokens), the cold measurements after a reset are not.
    job_id = demo.stdout.split("every figure: farm results ", 1)[1].split()[0]
    shown = subprocess.run(
        [sys.executable, "-m", "farm", "results", job_id, "--json"], env=env, capture_output=True, text=True, check=True
    )
    figures = {f["key"]: f for f in json.loads(shown.stdout)["figures"]}
    warm = figures["prefix_cache/8192/prefix_cache_hit_rate"]
    assert warm["summary"]["mean"] == pytest.approx(7936 / 8192)
    for key in ("prefill/8192", "prefill/32768", "short_ttft/32"):
        cold = figures[f"{key}/prefix_cache_hit_rate"]
        assert cold["summary"]["mean"] == 0.0
        assert cold["params"]["cache_reset"] == "POST /reset_prefix_cache"
        assert cold["params"]["cold_but_warm"] is False
