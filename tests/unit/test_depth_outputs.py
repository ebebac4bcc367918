"""Decode and TTFT at context depth, in every reader: the leaderboard, the registry export, the report."""

from __future__ import annotations

import pytest
from test_report_aggregate import fig, run
from test_report_exports import board

from farm.report.aggregate import entries_from_runs
from farm.report.filters import ALL
from farm.report.html import ReportData, depth_series, render_report
from farm.report.registry import speed_sweeps
from farm.report.registry_schema import check_speed_sweep

DEPTH_FIGURES = (
    fig("decode/code/decode_tok_s", (200.0, 200.0)),
    fig("depth/0/decode_tok_s", (199.0, 201.0)),
    fig("depth/0/ttft_ms", (22.0, 22.0), unit="ms"),
    fig("depth/8192/decode_tok_s", (164.0, 166.0)),
    fig("depth/8192/ttft_ms", (430.0, 434.0), unit="ms"),
    fig("depth/8192/prefill_tok_s", (19_000.0, 19_100.0)),
    fig("depth/32768/decode_tok_s", (120.0, 122.0)),
    fig("depth/32768/ttft_ms", (1_650.0, 1_660.0), unit="ms"),
    fig("depth/32768/prefill_tok_s", (19_800.0, 19_900.0)),
)


def test_the_leaderboard_carries_decode_at_each_depth() -> None:
    """The row's decode_at_depth_tok_s: the pooled mean per depth, shallowest first ([depth, tok/s] in JSON)."""
    (row,) = board((run("j-1", DEPTH_FIGURES),))
    assert row.decode_at_depth_tok_s == ((0, 200.0), (8192, 165.0), (32768, 121.0))
    assert row.to_json()["decode_at_depth_tok_s"] == [[0, 200.0], [8192, 165.0], [32768, 121.0]]


def test_the_registry_export_has_one_context_tokens_row_per_depth() -> None:
    """One row per depth: context_tokens the depth, decode at depth, the cold TTFT and prefill; still valid, and
    the 32k depth's TTFT fills the registry's ttft32k metric."""
    (document,) = speed_sweeps(entries_from_runs((run("j-1", DEPTH_FIGURES),)))
    check_speed_sweep(document)
    rows = {row["context_tokens"]: row for row in document["rows"] if row.get("depth")}
    assert sorted(rows) == [0, 8192, 32768]
    deep = rows[32768]
    assert (deep["decode_tok_s"], deep["ttft_ms_p50"], deep["prefill_tok_s"]) == (121.0, 1_655.0, 19_850.0)
    assert deep["measurement"] == "depth/32768/decode_tok_s"
    assert document["metrics"]["ttft32k_seconds"] == pytest.approx(1.655)


def test_the_report_charts_decode_and_ttft_against_depth() -> None:
    """Two charts, decode and TTFT against context tokens, one series per entry with a point per depth."""
    entries = entries_from_runs((run("j-1", DEPTH_FIGURES),))
    (decode,) = depth_series(entries, "decode_tok_s")
    assert [(x, y) for x, y, _ in decode.points] == [(0.0, 200.0), (8192.0, 165.0), (32768.0, 121.0)]
    (ttft,) = depth_series(entries, "ttft_ms")
    assert [x for x, _, _ in ttft.points] == [0.0, 8192.0, 32768.0]
    data = ReportData(board=(), entries=tuple(entries), run_count=1, filters=ALL, groups_total=1, groups_shown=1)
    page = render_report(data)
    assert 'id="chart-depth-decode"' in page
    assert 'id="chart-depth-ttft"' in page


def test_the_leaderboard_table_shows_decode_at_the_deepest_context(capsys: pytest.CaptureFixture[str]) -> None:
    """`farm leaderboard` adds the column only when some row measured depth, with the depth named."""
    from farm.cli.jobs import print_leaderboard

    print_leaderboard(board((run("j-1", DEPTH_FIGURES),)))
    out = capsys.readouterr().out
    assert "decode @ deepest" in out
    assert "121.0 @32768" in out
    print_leaderboard(board((run("j-2", DEPTH_FIGURES[:1]),)))
    assert "decode @ deepest" not in capsys.readouterr().out
