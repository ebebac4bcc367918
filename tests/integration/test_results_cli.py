"""`farm aggregate|export|report|compare` as a user types them, on a store filled once per module (a real
Worker on the simulator, hand-made real runs, a failed and a cancelled job)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from results_store import NEW_RECIPE, OLD_RECIPE, ResultsStore, build_results_store
from typer.testing import CliRunner

from farm.cli.app import app
from farm.report.registry_schema import speed_sweep_errors

pytestmark = pytest.mark.slow

runner = CliRunner()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> ResultsStore:
    """The shared store (about 10 s to build)."""
    return build_results_store(tmp_path_factory.mktemp("results"))


@pytest.fixture(autouse=True)
def _use_store(filled: ResultsStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command in this module reads the shared store."""
    monkeypatch.setenv("FARM_DATABASE_URL", filled.url)


def farm(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def farm_json(*args: str) -> Any:
    code, out, err = farm(*args)
    assert code == 0, err
    return json.loads(out)


def test_failed_and_cancelled_jobs_never_count(filled: ResultsStore) -> None:
    """Entries come from the five succeeded jobs only."""
    entries = farm_json("aggregate", "--json")
    jobs = {job for e in entries for job in e["job_ids"]}
    assert jobs == {filled.simulated_job, *filled.new_jobs, filled.newer_engine_job, filled.old_job}
    assert filled.failed_job not in jobs
    assert filled.cancelled_job not in jobs


def test_aggregate_pools_runs_and_marks_the_short_one_incomplete(filled: ResultsStore) -> None:
    """The two runs of the new recipe pool into one entry: 3 + 2 decode values of 6 asked."""
    entries = farm_json("aggregate", "--json", "--model", NEW_RECIPE, "--engine", "0.11.0")
    code = next(e for e in entries if e["key"] == "decode/code/decode_tok_s")
    assert (code["n"], code["requested"], code["got"], code["incomplete"]) == (5, 6, 5, True)
    assert code["runs"] == 2
    assert code["mean"] == pytest.approx((268 + 276 + 284 + 275 + 279) / 5)
    assert code["status"] == "measured"
    assert {p["host"] for p in code["provenance"]} == {"turin"}


def test_simulated_entries_are_marked_and_ranked_apart(filled: ResultsStore) -> None:
    """The simulated job's decode entry says simulated and ranks among simulated entries only."""
    entries = farm_json("aggregate", "--json", "--status", "simulated")
    assert entries
    assert all(e["simulated"] and e["ranked_among"] == "simulated" for e in entries)
    assert {job for e in entries for job in e["job_ids"]} == {filled.simulated_job}
    real = farm_json("aggregate", "--json", "--real-only")
    assert real
    assert not any(e["simulated"] for e in real)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--since", "2026-08-30", "--until", "2026-08-30", "--real-only"), "new"),
        (("--until", "2026-08-29", "--real-only"), "old"),
        (("--engine", "vllm@0.12.0"), "newer"),
        (("--hardware", "sim:rtx-pro-6000-blackwell-96gb x 2"), "sim"),
    ],
)
def test_date_engine_and_hardware_filters(filled: ResultsStore, args: tuple[str, ...], expected: str) -> None:
    """Dates bound measured_at (a bare until date covers the day); engine and hardware select their runs."""
    jobs = {job for e in farm_json("aggregate", "--json", *args) for job in e["job_ids"]}
    wanted = {
        "new": set(filled.new_jobs),
        "old": {filled.old_job},
        "newer": {filled.newer_engine_job},
        "sim": {filled.simulated_job},
    }[expected]
    assert jobs == wanted


def test_bad_filter_exits_2_naming_the_parameter() -> None:
    """A date that is not a date is refused before anything is read."""
    code, _out, err = farm("export", "json", "--since", "last tuesday")
    assert code == 2
    assert "since" in err


def test_registry_export_of_a_job_passes_the_schema(filled: ResultsStore, tmp_path: Path) -> None:
    """One job's sweep is one valid speed-sweep document whose rows carry the store's figures."""
    out = tmp_path / "sweep.json"
    code, _out, err = farm("export", "registry", "--job", filled.simulated_job, "-o", str(out))
    assert code == 0, err
    document = json.loads(out.read_text())
    assert speed_sweep_errors(document) == []
    figures = farm_json("results", filled.simulated_job, "--json")["figures"]
    decode = next(f for f in figures if f["key"] == "decode/code/decode_tok_s")
    row = next(r for r in document["rows"] if r["measurement"] == "decode/code/decode_tok_s")
    assert row["decode_tok_s"] == pytest.approx(decode["summary"]["mean"])
    assert row["samples"] == decode["summary"]["n"]
    assert row["status"] == "simulated"
    assert {r["concurrency"] for r in document["rows"]} >= {1, 2, 4}


def test_registry_export_of_several_sweeps_needs_a_directory(tmp_path: Path) -> None:
    """Several groups to stdout are refused (exit 2, naming the sweeps); to a directory, one valid file each."""
    code, _out, err = farm("export", "registry")
    assert code == 2
    assert "speed sweeps match" in err
    code, _out, err = farm("export", "registry", "-o", str(tmp_path / "sweeps") + "/")
    assert code == 0, err
    files = sorted((tmp_path / "sweeps").glob("*.json"))
    assert len(files) == 4  # simulated, new recipe on 0.11.0 and 0.12.0, old recipe
    for path in files:
        document = json.loads(path.read_text())
        assert speed_sweep_errors(document) == []
        assert path.name == document["id"] + ".json"


def test_localmaxxing_export(filled: ResultsStore) -> None:
    """The real 0.11.0 run of the new recipe as a submission: code decode, longest prefill, short TTFT."""
    (submission,) = farm_json("export", "localmaxxing", "--model", NEW_RECIPE, "--engine", "0.11.0")
    assert submission["tokSOut"] == pytest.approx((268 + 276 + 284 + 275 + 279) / 5)
    assert submission["tokSPrefill"] == pytest.approx(10_400.0)
    assert submission["prefillPromptTokens"] == 107016
    assert submission["TTFT"] == pytest.approx(63.0)
    assert submission["peakVramGb"] == 94.6
    assert submission["tensorParallel"] == 2
    assert submission["specAcceptanceRate"] == pytest.approx(0.486)
    assert submission["command"].startswith("vllm serve deepseek-ai/DeepSeek-V4-Flash-0731")
    assert submission["promptHashes"]
    assert submission["outputHashes"]
    assert sorted(submission["jobIds"]) == sorted(filled.new_jobs)


def test_csv_and_json_exports_agree(tmp_path: Path) -> None:
    """The CSV has one line per JSON entry, with the same means."""
    document = farm_json("export", "json")
    code, out, err = farm("export", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(document["entries"])
    means = {(e["recipe_id"], e["engine_version"], e["key"]): e["mean"] for e in document["entries"]}
    for row in rows:
        assert float(row["mean"]) == pytest.approx(means[(row["recipe_id"], row["engine_version"], row["key"])])


def test_report_writes_one_self_contained_page(tmp_path: Path) -> None:
    """The page holds both leaderboards, three charts and the provenance, and loads nothing from elsewhere."""
    out = tmp_path / "report.html"
    code, _out, err = farm("report", "-o", str(out))
    assert code == 0, err
    page = out.read_text()
    for marker in (
        'id="board-real"',
        'id="board-simulated"',
        'id="chart-decode"',
        'id="chart-pareto"',
        'id="chart-ttft"',
    ):
        assert marker in page
    assert "turin" in page
    assert "<script" not in page
    assert "<link" not in page
    assert "src=" not in page


def test_compare_two_jobs_and_two_recipes(filled: ResultsStore) -> None:
    """Job against job and recipe against recipe; the seed-like predecessor comparison is a wash."""
    by_job = farm_json("compare", filled.old_job, filled.new_jobs[0], "--json", "--resamples", "2000")
    assert by_job["kind"] == "job"
    code = next(d for d in by_job["differences"] if d["key"] == "decode/code/decode_tok_s")
    assert code["diff"] == pytest.approx(276.0 - 262.6)
    assert code["ci_low"] <= code["diff"] <= code["ci_high"]
    by_recipe = farm_json("compare", OLD_RECIPE, NEW_RECIPE, "--json", "--real-only", "--resamples", "2000")
    assert by_recipe["kind"] == "recipe"
    assert {d["key"] for d in by_recipe["differences"]} == {
        "decode/code/decode_tok_s",
        "decode/prose/decode_tok_s",
        "short_ttft/32/ttft_ms",
    }
    assert not any(d["real"] for d in by_recipe["differences"])
    assert by_recipe["verdict"].startswith("a wash")


def test_compare_two_engine_versions_finds_the_real_difference() -> None:
    """vllm 0.11.0 against 0.12.0 of the new recipe: about +9% decode at a ~6% spread is real."""
    result = farm_json(
        "compare",
        "vllm@0.11.0",
        "vllm@0.12.0",
        "--by",
        "engine",
        "--model",
        NEW_RECIPE,
        "--json",
        "--resamples",
        "2000",
    )
    (code,) = result["differences"]
    assert code["key"] == "decode/code/decode_tok_s"
    assert code["real"], code["reason"]


def test_compare_refuses_what_it_cannot_resolve(filled: ResultsStore) -> None:
    """Names that are neither jobs, recipes nor engine versions are an input error."""
    code, _out, err = farm("compare", "nothing-a", "nothing-b")
    assert code == 2
    assert "nothing-a" in err


def test_leaderboard_from_pooled_stats_equals_the_one_pooled_from_runs(filled: ResultsStore) -> None:
    """The leaderboard kept pooled as runs are stored (no run filter) equals the one pooled from the runs' own
    measurements (a `since` filter selects runs), row for row; and `farm leaderboard --json` gives the same."""
    from dataclasses import asdict

    from farm.filters import build_filter
    from farm.report import service
    from farm.store import LeaderboardRow, Store

    with Store.open(filled.url) as store:
        kept = service.leaderboard(store, build_filter())
        pooled = service.leaderboard(store, build_filter(since="2000-01-01"))

    def identity(r: LeaderboardRow) -> tuple[object, ...]:
        return (r.recipe_sha256, r.hardware_class, r.engine_version, r.workload, r.origin, r.runs, r.job_ids, r.rank)

    assert [identity(r) for r in kept] == [identity(r) for r in pooled]
    for a, b in zip(kept, pooled, strict=True):
        assert a.decode_tok_s.mean == pytest.approx(b.decode_tok_s.mean)
        assert (a.decode_tok_s.n, a.decode_tok_s.min, a.decode_tok_s.max) == (
            b.decode_tok_s.n,
            b.decode_tok_s.min,
            b.decode_tok_s.max,
        )
        assert a.prefill_tok_s == pytest.approx(b.prefill_tok_s)
        assert a.requested == b.requested
    assert len(kept) >= 4
    assert {r.origin for r in kept} == {"launched", "simulated"}
    assert farm_json("leaderboard", "--json") == json.loads(json.dumps([asdict(r) for r in kept], default=str))
