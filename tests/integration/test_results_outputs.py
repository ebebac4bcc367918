"""Outputs that cannot escape or crash, through the CLI: exported names from hostile ids, CSV formulas, `-o`
failures, out-of-range dates, and `farm serve` beyond loopback (issue: nothing leaks, nothing crashes)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from results_store import HARDWARE_CLASS, NEW_FIGURES, figure, provenance, recipe
from typer.testing import CliRunner

from farm.cli.app import app
from farm.domain import RunResult
from farm.store import Store

runner = CliRunner()
HOSTILE_IDS = ("../../escaped-sweep", '=HYPERLINK("http://evil")')
START_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with one succeeded run of each recipe whose id is hostile (a path, a formula)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'farm.db'}"
    with Store.open(url, auto_upgrade=True) as store:
        when = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)
        for index, recipe_id in enumerate(HOSTILE_IDS):
            rec = recipe(recipe_id, "0.11.0")
            [job_id] = store.submit(rec, "hostile", {"repeats": 3}, "cd" * 32, 1, simulated=False, now=when)
            job = store.claim_job(job_id, "w1", [HARDWARE_CLASS], lease_s=600, now=when)
            assert job is not None
            result = RunResult(
                figures=tuple(figure(key, values, requested=3) for key, values in NEW_FIGURES.items()),
                samples={},
                provenance=provenance("0.11.0", "w1"),
            )
            store.complete(job_id, job.attempt, "w1", result, now=when + timedelta(minutes=5 + index))
    return url


@pytest.fixture(autouse=True)
def _use_store(hostile_store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command here reads the hostile store."""
    monkeypatch.setenv("FARM_DATABASE_URL", hostile_store)


def farm(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_registry_export_never_writes_outside_the_directory(tmp_path: Path) -> None:
    """A recipe id with `../` gets a safe file name inside -o DIR/; nothing appears above DIR."""
    out = tmp_path / "deep" / "out"
    code, _out, err = farm("export", "registry", "-o", f"{out}/")
    assert code == 0, err
    written = sorted(p.name for p in out.iterdir())
    assert len(written) == 2
    assert all(not name.startswith(".") and "/" not in name for name in written)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and p.parent != out) == []
    assert not (tmp_path / "escaped-sweep.json").exists()


def test_csv_export_escapes_formulas(tmp_path: Path) -> None:
    """The formula recipe id is written with a leading quote; no cell starts with = + - @."""
    code, out, err = farm("export", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {row["recipe_id"] for row in rows} == {"../../escaped-sweep", '\'=HYPERLINK("http://evil")'}
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell


@pytest.mark.parametrize("command", [("export", "csv"), ("report",), ("export", "json")])
def test_output_to_a_directory_or_an_unwritable_place_is_a_clear_error(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """-o naming a directory, or a file under a path that is a file, exits 1 naming it, with no traceback."""
    code, _out, err = farm(*command, "-o", str(tmp_path))
    assert code == 1
    assert "is a directory" in err
    assert "Traceback" not in err
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, _out, err = farm(*command, "-o", str(blocker / "below" / "out.txt"))
    assert code == 1
    assert "cannot write" in err
    assert str(blocker) in err.replace("\n", "")


@pytest.mark.parametrize(
    ("args", "parameter"),
    [
        (("--until", "9999-12-31"), "until"),
        (("--since", "0001-01-01"), "since"),
        (("--since", "yesterday"), "since"),
    ],
)
def test_out_of_range_dates_are_a_clear_error(args: tuple[str, ...], parameter: str) -> None:
    """Every results command refuses a date a run cannot have with exit 2 naming the option, no traceback."""
    for command in (("export", "csv"), ("aggregate", "--json"), ("report", "-o", "/dev/null")):
        code, _out, err = farm(*command, *args)
        assert code == 2, (command, err)
        assert parameter in err
        assert "Traceback" not in err


def test_serve_refuses_a_public_address_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """`farm serve --host 0.0.0.0` without FARM_API_TOKEN or --insecure exits 2 and says what to do."""
    monkeypatch.delenv("FARM_API_TOKEN", raising=False)
    code, _out, err = farm("serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 2
    assert "FARM_API_TOKEN" in err
    assert "--insecure" in err


def test_serve_insecure_warns_and_serves(hostile_store: str, tmp_path: Path) -> None:
    """With --insecure it serves beyond loopback, after a warning on stderr."""
    env = {**os.environ, "FARM_DATABASE_URL": hostile_store, "FARM_DATA_DIR": str(tmp_path)}
    env.pop("FARM_API_TOKEN", None)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "farm", "serve", "--host", "0.0.0.0", "--port", "0", "--insecure"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "serving" not in log.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "warning" in log.read_text()
    finally:
        process.terminate()
        process.wait(timeout=10)
