"""Leaderboard aggregation as a pure function: hand-computed cases, no database."""

from __future__ import annotations

import pytest

from farm.store.leaderboard import leaderboard_from_runs, pooled_stat
from farm.store.records import MeasuredRun, Stat


def _run(job_id: str, values: dict[str, tuple[float, ...]], **overrides: object) -> MeasuredRun:
    fields: dict[str, object] = {
        "job_id": job_id,
        "recipe_id": "seed",
        "recipe_sha256": "a" * 64,
        "model_id": "deepseek-ai/DeepSeek-V4-Flash-0731",
        "hardware_class": "rtx-pro-6000-blackwell-96gb x 2",
        "engine_name": "vllm",
        "engine_version": "0.11.0",
        "simulated": False,
        "values": values,
    }
    fields.update(overrides)
    return MeasuredRun(**fields)  # type: ignore[arg-type]  # test builder: fields are checked by the asserts


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((276.0,), Stat(n=1, mean=276.0, min=276.0, max=276.0, spread=0.0)),
        ((270.0, 280.0, 290.0), Stat(n=3, mean=280.0, min=270.0, max=290.0, spread=20.0 / 280.0)),
        ((0.0, 0.0), Stat(n=2, mean=0.0, min=0.0, max=0.0, spread=0.0)),
    ],
)
def test_pooled_stat(values: tuple[float, ...], expected: Stat) -> None:
    """Mean, range, count and spread ((max - min) / mean) of pooled values."""
    assert pooled_stat(len(values), sum(values), min(values), max(values)) == pytest.approx(expected)


def test_pooled_stat_refuses_nothing() -> None:
    """There is no summary of no values."""
    with pytest.raises(ValueError, match="no values"):
        pooled_stat(0, 0.0, 0.0, 0.0)


def test_one_row_per_workload_and_engine_version() -> None:
    """Runs of the same recipe pool per workload; another engine version or the simulator is another row."""
    rows = leaderboard_from_runs(
        [
            _run("j1", {"decode/code/decode_tok_s": (270.0, 280.0), "decode/math/decode_tok_s": (285.0,)}),
            _run("j2", {"decode/code/decode_tok_s": (290.0,)}),
            _run("j3", {"decode/code/decode_tok_s": (300.0,)}, engine_version="0.12.0"),
            _run("j4", {"decode/code/decode_tok_s": (500.0,)}, simulated=True),
        ]
    )
    summary = [(row.workload, row.engine_version, row.simulated, row.runs, row.decode_tok_s.mean) for row in rows]
    assert summary == [
        ("code", "0.12.0", False, 1, 300.0),
        ("code", "0.11.0", False, 2, 280.0),
        ("math", "0.11.0", False, 1, 285.0),
        ("code", "0.11.0", True, 1, 500.0),
    ]
    assert [
        row.simulated
        for row in leaderboard_from_runs([_run("j4", {"decode/code/decode_tok_s": (1.0,)}, simulated=True)])
    ]
    assert (
        leaderboard_from_runs(
            [_run("j4", {"decode/code/decode_tok_s": (1.0,)}, simulated=True)], include_simulated=False
        )
        == []
    )


def test_secondary_figures() -> None:
    """Prefill at the largest prompt, short TTFT, peak memory over cards and runs, and acceptance rate."""
    [row] = leaderboard_from_runs(
        [
            _run(
                "j1",
                {
                    "decode/code/decode_tok_s": (276.0,),
                    "prefill/2048/prefill_tok_s": (3000.0,),
                    "prefill/107016/prefill_tok_s": (10_400.0,),
                    "prefill/107016/ttft_ms": (10_290.0,),
                    "short_ttft/32/ttft_ms": (62.0, 64.0),
                    "memory/gpu0/peak_memory_gib": (88.0,),
                    "memory/gpu1/peak_memory_gib": (91.5,),
                    "spec_decode/code/acceptance_rate": (0.48, 0.49),
                    "spec_decode/prose/acceptance_rate": (0.9,),
                },
            ),
            _run("j2", {"decode/code/decode_tok_s": (270.0,), "prefill/107016/prefill_tok_s": (10_200.0,)}),
        ]
    )
    assert row.prefill_prompt_tokens == 107_016
    assert row.prefill_tok_s == pytest.approx(10_300.0)
    assert row.short_ttft_ms == pytest.approx(63.0)
    assert row.peak_memory_gib == 91.5
    assert row.spec_acceptance_rate == pytest.approx(0.485)
    assert row.job_ids == ("j1", "j2")


def test_a_run_without_optional_figures_leaves_them_empty() -> None:
    """Figures a sweep did not measure are None in the row, and keys of other shapes are ignored."""
    [row] = leaderboard_from_runs([_run("j1", {"decode/prose/decode_tok_s": (149.8,), "odd-key": (1.0,)})])
    assert (row.prefill_tok_s, row.short_ttft_ms, row.peak_memory_gib, row.spec_acceptance_rate) == (
        None,
        None,
        None,
        None,
    )


def test_endpoint_rows_are_apart_from_launched_and_ranked_among_themselves() -> None:
    """An endpoint run of the same recipe is its own row, marked `endpoint`, after launched rows, ranked 1."""
    launched = MeasuredRun(
        job_id="j-l",
        recipe_id="r",
        recipe_sha256="s",
        model_id="org/m",
        hardware_class="hw x 2",
        engine_name="vllm",
        engine_version="0.11.0",
        simulated=False,
        values={"decode/code/decode_tok_s": (100.0, 110.0)},
    )
    endpoint = MeasuredRun(
        job_id="j-e",
        recipe_id="r",
        recipe_sha256="s",
        model_id="org/m",
        hardware_class="hw x 2",
        engine_name="vllm",
        engine_version="0.11.0",
        simulated=False,
        values={"decode/code/decode_tok_s": (300.0,)},
        origin="endpoint",
    )
    rows = leaderboard_from_runs([endpoint, launched])
    assert [(r.origin, r.job_ids, r.rank) for r in rows] == [("launched", ("j-l",), 1), ("endpoint", ("j-e",), 1)]


def test_energy_columns_come_from_the_workloads_decode() -> None:
    """J per output token and average power are the means at `decode.<workload>` over the runs; the peak is the
    highest of any card; the cost is the mean at the stated prices, with its unit. A workload without energy
    figures (math) has none."""
    rows = leaderboard_from_runs(
        [
            _run(
                "j1",
                {
                    "decode/code/decode_tok_s": (276.0,),
                    "decode/math/decode_tok_s": (285.0,),
                    "energy/decode.code/j_per_output_token": (2.4, 2.6),
                    "energy/decode.code/avg_power_w": (680.0, 700.0),
                    "power/decode.code.gpu0/peak_power_w": (590.0, 600.0),
                    "power/decode.code.gpu1/peak_power_w": (598.0,),
                    "power/concurrency.64.gpu0/peak_power_w": (650.0,),
                    "cost/decode.code/per_m_output_tokens": (2.0, 3.0),
                },
                units={"cost/decode.code/per_m_output_tokens": "EUR/Mtok"},
            ),
            _run("j2", {"decode/code/decode_tok_s": (275.0,), "energy/decode.code/j_per_output_token": (2.9,)}),
        ]
    )
    code = next(row for row in rows if row.workload == "code")
    math_row = next(row for row in rows if row.workload == "math")
    assert code.j_per_output_token == pytest.approx((2.4 + 2.6 + 2.9) / 3)
    assert code.avg_power_w == pytest.approx(690.0)
    assert code.peak_power_w == 600.0  # the concurrency point's 650 W is another measurement
    assert code.cost_per_m_output_tokens == pytest.approx(2.5)
    assert code.cost_unit == "EUR/Mtok"
    assert (math_row.j_per_output_token, math_row.avg_power_w, math_row.peak_power_w) == (None, None, None)
    assert math_row.cost_per_m_output_tokens is None
