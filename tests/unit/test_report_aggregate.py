"""Aggregation and filters as pure functions over hand-made runs (no database)."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from farm.bench.records import Figure, Summary
from farm.errors import InputError
from farm.report.aggregate import entries_from_runs
from farm.report.filters import build_filter, engine_matches
from farm.store.records import RunMeasurements

T0 = datetime(2026, 8, 30, 9, 0, tzinfo=UTC)


def fig(key: str, values: tuple[float, ...], unit: str = "tok/s", requested: int | None = None) -> Figure:
    """A figure from its key and values."""
    kind, point, metric = key.split("/")
    mean = statistics.fmean(values)
    return Figure(
        kind=kind,
        key=key,
        metric=metric,
        unit=unit,
        values=values,
        summary=Summary(len(values), mean, statistics.median(values), min(values), max(values), 0.0, 0.0),
        workload=point if kind == "decode" else None,
        requested_repeats=requested,
    )


def run(job_id: str, figures: tuple[Figure, ...], **overrides: Any) -> RunMeasurements:
    """A succeeded run of the seed's recipe on 2x RTX PRO 6000, engine vllm 0.11.0, real hardware."""
    fields: dict[str, Any] = {
        "job_id": job_id,
        "attempt": 1,
        "worker_id": "w1",
        "sweep_name": "seed",
        "recipe_id": "seed",
        "recipe_sha256": "a" * 64,
        "model_id": "deepseek-ai/DeepSeek-V4-Flash-0731",
        "hardware_id": "rtx-pro-6000-blackwell-96gb",
        "hardware_count": 2,
        "hardware_class": "rtx-pro-6000-blackwell-96gb x 2",
        "engine_name": "vllm",
        "engine_version": "0.11.0",
        "simulated": False,
        "measured_at": T0,
        "requested_repeats": 3,
        "recipe_argv": ("vllm", "serve", "m", "--tensor-parallel-size", "2"),
        "tensor_parallel": 2,
        "max_context_tokens": 262144,
        "provenance": {"host": {"name": "turin"}, "gpus": {"names": ["RTX PRO 6000"] * 2, "count": 2}},
        "figures": figures,
    }
    fields.update(overrides)
    return RunMeasurements(**fields)


def test_entries_pool_the_repeats_of_every_run_in_a_group() -> None:
    """Two runs of one recipe × hardware × engine version pool into one entry per figure key."""
    entries = entries_from_runs(
        [
            run("j-1", (fig("decode/code/decode_tok_s", (270.0, 280.0, 290.0)),)),
            run("j-2", (fig("decode/code/decode_tok_s", (300.0, 310.0, 320.0)),), measured_at=T0 + timedelta(hours=1)),
        ]
    )
    (entry,) = entries
    assert (entry.n, entry.runs, entry.requested, entry.incomplete) == (6, 2, 6, False)
    assert entry.mean == pytest.approx(295.0)
    assert entry.median == pytest.approx(295.0)
    assert (entry.min, entry.max) == (270.0, 320.0)
    assert entry.spread == pytest.approx(50.0 / 295.0)
    assert entry.job_ids == ("j-1", "j-2")
    assert (entry.first_measured_at, entry.measured_at) == (T0, T0 + timedelta(hours=1))
    assert (entry.kind, entry.point, entry.metric, entry.workload) == ("decode", "code", "decode_tok_s", "code")
    assert [p.host for p in entry.provenance] == ["turin", "turin"]


def test_an_entry_with_fewer_samples_than_asked_says_so() -> None:
    """requested comes from the figure's requested_repeats, else the plan's repeats; got < requested is
    incomplete."""
    entries = entries_from_runs(
        [
            run("j-1", (fig("decode/code/decode_tok_s", (270.0, 280.0)),)),
            run("j-2", (fig("decode/prose/decode_tok_s", (150.0, 151.0), requested=5),)),
            run("j-3", (fig("memory/gpu0/peak_memory_gib", (94.5,), unit="GiB", requested=1),)),
        ]
    )
    by_key = {e.key: e for e in entries}
    code = by_key["decode/code/decode_tok_s"]
    assert (code.incomplete, code.requested, code.n) == (True, 3, 2)
    prose = by_key["decode/prose/decode_tok_s"]
    assert (prose.incomplete, prose.requested, prose.n) == (True, 5, 2)
    assert not by_key["memory/gpu0/peak_memory_gib"].incomplete


def test_simulated_entries_are_kept_apart_and_never_ranked_with_real_ones() -> None:
    """A simulated run never pools with a real one, and ranks only among simulated entries."""
    entries = entries_from_runs(
        [
            run("real-slow", (fig("decode/code/decode_tok_s", (200.0, 200.0, 200.0)),), recipe_sha256="b" * 64),
            run("real-fast", (fig("decode/code/decode_tok_s", (250.0, 250.0, 250.0)),)),
            run(
                "sim",
                (fig("decode/code/decode_tok_s", (999.0, 999.0, 999.0)),),
                simulated=True,
                engine_name="sim",
                hardware_class="sim:rtx-pro-6000-blackwell-96gb x 2",
            ),
        ]
    )
    ranks = {e.job_ids[0]: (e.rank, e.simulated, e.status) for e in entries}
    assert ranks == {
        "real-fast": (1, False, "measured"),
        "real-slow": (2, False, "measured"),
        "sim": (1, True, "simulated"),
    }
    assert entries[-1].simulated  # real entries come first


def test_lower_latency_ranks_first() -> None:
    """For ms (and GiB), the smaller mean is rank 1."""
    entries = entries_from_runs(
        [
            run("fast", (fig("short_ttft/32/ttft_ms", (60.0,), unit="ms"),)),
            run("slow", (fig("short_ttft/32/ttft_ms", (90.0,), unit="ms"),), recipe_sha256="c" * 64),
        ]
    )
    assert {e.job_ids[0]: e.rank for e in entries} == {"fast": 1, "slow": 2}


def test_engine_versions_and_hardware_make_separate_entries() -> None:
    """The same recipe on another engine version or another hardware class is another entry."""
    entries = entries_from_runs(
        [
            run("a", (fig("decode/code/decode_tok_s", (1.0,)),)),
            run("b", (fig("decode/code/decode_tok_s", (2.0,)),), engine_version="0.12.0"),
            run("c", (fig("decode/code/decode_tok_s", (3.0,)),), hardware_class="rtx-5090-32gb x 2"),
        ]
    )
    assert sorted(e.job_ids for e in entries) == [("a",), ("b",), ("c",)]


RUNS = [
    run("real", (fig("decode/code/decode_tok_s", (1.0, 1.0, 1.0)),)),
    run(
        "sim",
        (fig("decode/code/decode_tok_s", (1.0, 1.0)),),
        simulated=True,
        engine_name="sim",
        engine_version="0.11.2.dev279+eldritch",
        hardware_class="sim:rtx-pro-6000-blackwell-96gb x 2",
    ),
    run(
        "other",
        (fig("decode/code/decode_tok_s", (1.0, 1.0, 1.0)),),
        model_id="Qwen/Qwen3-8B",
        recipe_id="qwen3-8b",
        hardware_id="rtx-5090-32gb",
        hardware_class="rtx-5090-32gb x 1",
        engine_version="0.12.0",
    ),
]


@pytest.mark.parametrize(
    ("filters", "jobs"),
    [
        ({}, {"real", "sim", "other"}),
        ({"models": ["Qwen/Qwen3-8B"]}, {"other"}),
        ({"models": ["deepseek-v4-flash-0731"]}, {"real", "sim"}),
        ({"models": ["qwen3-8b"]}, {"other"}),
        ({"hardware": ["rtx-pro-6000-blackwell-96gb"]}, {"real", "sim"}),
        ({"hardware": ["rtx-pro-6000-blackwell-96gb x 2"]}, {"real", "sim"}),
        ({"hardware": ["rtx-5090-32gb x 1"]}, {"other"}),
        ({"engines": ["vllm"]}, {"real", "other"}),
        ({"engines": ["sim"]}, {"sim"}),
        ({"engines": ["0.12.0"]}, {"other"}),
        ({"engines": ["0.11.2.dev279"]}, {"sim"}),
        ({"engines": ["vllm@0.11.0"]}, {"real"}),
        ({"engines": ["vllm@0.12.0", "sim"]}, {"other", "sim"}),
        ({"real_only": True}, {"real", "other"}),
        ({"statuses": ["simulated"]}, {"sim"}),
        ({"statuses": ["measured"]}, {"real", "other"}),
        ({"statuses": ["incomplete"]}, {"sim"}),
        ({"statuses": ["complete"]}, {"real", "other"}),
        ({"statuses": ["measured,incomplete"]}, {"real", "sim", "other"}),
    ],
)
def test_filters(filters: dict[str, Any], jobs: set[str]) -> None:
    """Model, hardware, engine, real-only and status filters select the hand-picked runs."""
    entries = entries_from_runs(RUNS, build_filter(**filters))
    assert {job for e in entries for job in e.job_ids} == jobs


@pytest.mark.parametrize(
    ("wanted", "name", "version", "matches"),
    [
        ("vllm", "vllm", "0.11.0", True),
        ("0.11.0", "vllm", "0.11.0", True),
        ("0.11", "vllm", "0.11.0", False),
        ("0.11.2.dev279", "vllm", "0.11.2.dev279+local.b12x", True),
        ("vllm@0.11.0", "vllm", "0.11.0", True),
        ("vllm@0.11.0", "sim", "0.11.0", False),
        ("sglang", "vllm", "0.11.0", False),
        ("0.11.0", "vllm", None, False),
    ],
)
def test_engine_matches(wanted: str, name: str, version: str | None, matches: bool) -> None:
    """Engine name, exact version (or version before a local `+` suffix), or name@version."""
    assert engine_matches(wanted, name, version) is matches


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-40"}, "until"),
        ({"since": "2026-09-01", "until": "2026-08-01"}, "since"),
        ({"statuses": ["finished"]}, "status"),
    ],
)
def test_bad_filters_name_the_parameter(kwargs: dict[str, Any], parameter: str) -> None:
    """A bad filter value is an InputError whose field is the parameter's name."""
    with pytest.raises(InputError) as caught:
        build_filter(**kwargs)
    assert caught.value.field == parameter


def test_dates_are_utc_and_a_bare_until_covers_the_day() -> None:
    """since 2026-08-30 starts at midnight UTC; until 2026-08-30 ends at the last microsecond of that day."""
    filters = build_filter(since="2026-08-30", until="2026-08-30")
    assert filters.since == datetime(2026, 8, 30, tzinfo=UTC)
    assert filters.until == datetime(2026, 8, 30, 23, 59, 59, 999999, tzinfo=UTC)
    assert build_filter(since="2026-08-30T09:00:00+02:00").since == datetime(2026, 8, 30, 7, tzinfo=UTC)
