"""`farm report` in headless Chromium (Debian's, driven by playwright): the page loads with no console error and
no request beyond itself, the charts draw data points of non-zero size, and its numbers match
`farm leaderboard --json`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from results_store import build_results_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHARED_SCREENSHOT = Path("/tmp/farm-report.png")
"""A copy of the screenshot where the lead can look at it."""


def chromium() -> Path:
    """Debian's chromium, installed by deploy/ensure-browser.sh when missing; skip (saying why) when it can't be."""
    if not CHROMIUM.exists():
        done = subprocess.run(
            ["bash", str(ROOT / "deploy" / "ensure-browser.sh")], capture_output=True, text=True, check=False
        )
        if not CHROMIUM.exists():
            pytest.skip(f"chromium cannot be installed here: {done.stderr.strip() or 'ensure-browser.sh failed'}")
    return CHROMIUM


def farm(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.timeout(180)
def test_report_renders_in_chromium_and_matches_the_leaderboard(tmp_path: Path) -> None:
    """Load the report, check errors, requests, charts and numbers; save a screenshot and print its path."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    filled = build_results_store(tmp_path / "store")
    env = {**os.environ, "FARM_DATABASE_URL": filled.url}
    page_path = tmp_path / "report.html"
    farm(env, "report", "-o", str(page_path))
    board: list[dict[str, Any]] = json.loads(farm(env, "leaderboard", "--json"))

    console_errors: list[str] = []
    failed: list[str] = []
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.on("request", lambda r: requested.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")

            for chart_id, mark in (
                ("chart-decode", "rect.bar"),
                ("chart-pareto", "circle.point"),
                ("chart-ttft", "circle.point"),
            ):
                marks = page.locator(f"svg#{chart_id} {mark}")
                assert marks.count() > 0, chart_id
                for index in range(marks.count()):
                    box = marks.nth(index).bounding_box()
                    assert box is not None, (chart_id, index)
                    assert box["width"] > 0, (chart_id, index, box)
                    assert box["height"] > 0, (chart_id, index, box)

            pareto = page.locator("svg#chart-pareto circle.point")
            assert pareto.count() == 3 + 2  # simulated: concurrency 1, 2, 4; real: 1 and 8
            rows = page.locator("tr.board-row")
            shown = [rows.nth(i).evaluate("row => ({...row.dataset})") for i in range(rows.count())]
            texts = [rows.nth(i).locator("td.decode-mean").inner_text() for i in range(rows.count())]
            screenshot = tmp_path / "farm-report.png"
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()

    assert console_errors == []
    assert failed == []
    assert requested == [page_path.as_uri()]

    print(f"screenshot: {screenshot}")
    shutil.copyfile(screenshot, SHARED_SCREENSHOT)
    print(f"copied to {SHARED_SCREENSHOT}")

    def key(row: dict[str, Any]) -> tuple[str, str, str, str, bool]:
        return (
            row["recipe_sha256"],
            row["hardware_class"],
            row["engine_version"] or "",
            row["workload"],
            row["simulated"],
        )

    expected = {key(row): row for row in board}
    assert len(shown) == len(board)
    for data, text in zip(shown, texts, strict=True):
        row = expected[
            (
                data["recipeSha256"],
                data["hardwareClass"],
                data["engineVersion"],
                data["workload"],
                data["simulated"] == "true",
            )
        ]
        assert float(data["decodeMean"]) == pytest.approx(row["decode_tok_s"]["mean"], rel=1e-12)
        assert int(data["decodeN"]) == row["decode_tok_s"]["n"]
        assert float(data["decodeSpread"]) == pytest.approx(row["decode_tok_s"]["spread"], rel=1e-9, abs=1e-12)
        assert text.startswith(f"{row['decode_tok_s']['mean']:,.1f}")
        for attribute, field in (
            ("prefillTokS", "prefill_tok_s"),
            ("shortTtftMs", "short_ttft_ms"),
            ("peakMemoryGib", "peak_memory_gib"),
            ("specAcceptanceRate", "spec_acceptance_rate"),
        ):
            if row[field] is None:
                assert data[attribute] == "", attribute
            else:
                assert float(data[attribute]) == pytest.approx(row[field], rel=1e-12), attribute
        assert data["jobIds"].split() == row["job_ids"]
    simulated_rows = [data for data in shown if data["simulated"] == "true"]
    assert simulated_rows
    assert shown.index(simulated_rows[0]) == len(shown) - len(simulated_rows)
