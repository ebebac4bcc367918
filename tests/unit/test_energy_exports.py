"""Energy, power and cost in the exports: the registry's rows (its schema admits them there) and LocalMaxxing's
submission, at the workload's decode and per concurrency level."""

from __future__ import annotations

from test_report_aggregate import fig, run
from test_report_exports import SWEEP_FIGURES, board

from farm.report.aggregate import entries_from_runs
from farm.report.filters import ALL
from farm.report.html import ReportData, energy_series, render_report
from farm.report.localmaxxing import SUBMISSION_FIELDS, submissions
from farm.report.registry import speed_sweeps
from farm.report.registry_schema import check_speed_sweep

ENERGY_FIGURES = (
    fig("energy/decode.code/j_per_output_token", (2.4, 2.6), unit="J/tok"),
    fig("energy/decode.code/j_per_total_token", (2.0, 2.2), unit="J/tok"),
    fig("energy/decode.code/avg_power_w", (680.0, 700.0), unit="W"),
    fig("power/decode.code.gpu0/peak_power_w", (590.0, 600.0), unit="W"),
    fig("power/decode.code.gpu1/peak_power_w", (595.0,), unit="W"),
    fig("cost/decode.code/per_m_output_tokens", (2.0, 3.0), unit="USD/Mtok"),
    fig("energy/concurrency.8/j_per_output_token", (0.5,), unit="J/tok"),
    fig("energy/concurrency.8/avg_power_w", (900.0,), unit="W"),
)


def test_registry_rows_carry_the_gpu_only_figures_and_pass_the_schema() -> None:
    """The code decode row and the concurrency-8 row get the means (the peak: the highest card); the prose row,
    unmeasured, gets none; the document still passes the registry's schema."""
    (document,) = speed_sweeps(entries_from_runs([run("j-1", SWEEP_FIGURES + ENERGY_FIGURES)]))
    check_speed_sweep(document)
    rows = {row["measurement"]: row for row in document["rows"]}
    code = rows["decode/code/decode_tok_s"]
    assert code["gpu_j_per_output_token"] == 2.5
    assert code["gpu_j_per_total_token"] == 2.1
    assert code["gpu_avg_power_w"] == 690.0
    assert code["gpu_peak_power_w"] == 600.0
    assert (code["cost_per_m_output_tokens"], code["cost_unit"]) == (2.5, "USD/Mtok")
    assert "gpu_j_per_output_token" not in rows["decode/prose/decode_tok_s"]
    level = rows["concurrency/8/aggregate_tok_s"]
    assert (level["gpu_j_per_output_token"], level["gpu_avg_power_w"]) == (0.5, 900.0)
    assert "energy" not in str(document["metrics"])


def test_localmaxxing_submission_names_the_headline_decode_energy() -> None:
    """At the code workload (the page's headline); null without energy figures."""
    measured_runs = [run("j-1", SWEEP_FIGURES + ENERGY_FIGURES)]
    (measured,) = submissions(entries_from_runs(measured_runs), measured_runs)
    assert list(measured) == list(SUBMISSION_FIELDS)
    assert measured["gpuJoulesPerOutputToken"] == 2.5
    assert (measured["gpuAvgPowerW"], measured["gpuPeakPowerW"]) == (690.0, 600.0)
    assert (measured["costPerMOutputTokens"], measured["costUnit"]) == (2.5, "USD/Mtok")
    plain_runs = [run("j-1", SWEEP_FIGURES)]
    (plain,) = submissions(entries_from_runs(plain_runs), plain_runs)
    assert plain["gpuJoulesPerOutputToken"] is None
    assert plain["costUnit"] is None


def test_report_draws_joules_per_token_against_tok_s_per_user_and_lists_them() -> None:
    """The energy chart has one point per concurrency level with both figures: (per-stream tok/s, J/tok); the
    leaderboard rows carry J/tok and power in data attributes."""
    figures = (
        *SWEEP_FIGURES,
        *ENERGY_FIGURES,
        fig("concurrency/1/aggregate_tok_s", (270.0,)),
        fig("concurrency/1/per_stream_tok_s", (270.0,)),
        fig("energy/concurrency.1/j_per_output_token", (2.5,), unit="J/tok"),
    )
    runs = (run("j-1", figures),)
    entries = tuple(entries_from_runs(runs))
    (series,) = energy_series(entries)
    assert sorted(series.points) == [(190.0, 0.5, "concurrency 8"), (270.0, 2.5, "concurrency 1")]
    page = render_report(
        ReportData(
            board=tuple(board(runs)),
            entries=entries,
            run_count=1,
            filters=ALL,
            groups_total=1,
            groups_shown=1,
        )
    )
    assert 'id="chart-energy"' in page
    assert 'data-x="190.0" data-y="0.5"' in page
    assert 'data-j-per-output-token="2.5"' in page
    assert "J/tok (GPU)" in page
