"""Comparisons as pure math: the bootstrap interval, and when a difference is real rather than noise."""

from __future__ import annotations

import pytest

from farm.report.compare import bootstrap_mean_difference, compare, compare_values, spread, verdict


def around(mean: float, spread_fraction: float) -> tuple[float, float, float]:
    """Three values with this mean and a (max - min) / mean of exactly `spread_fraction`."""
    half = mean * spread_fraction / 2
    return (mean - half, mean, mean + half)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((99.5, 100.0, 100.5), 0.01),
        ((96.5, 100.0, 103.5), 0.07),
        ((5.0,), 0.0),
        ((0.0, 0.0), 0.0),
    ],
)
def test_spread(values: tuple[float, ...], expected: float) -> None:
    """(max - min) / mean, hand-computed."""
    assert spread(values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "real"),
    [
        (around(100.0, 0.01), around(105.0, 0.01), True),  # 5% apart, 1% spread: real
        (around(100.0, 0.07), around(105.0, 0.07), False),  # 5% apart, 7% spread: noise
        (around(100.0, 0.01), around(95.0, 0.01), True),  # 5% slower, 1% spread: real
        (around(100.0, 0.07), around(95.0, 0.07), False),  # 5% slower, 7% spread: noise
        (around(100.0, 0.01), around(100.5, 0.01), False),  # 0.5% apart: within the spread
        (around(100.0, 0.02), around(110.0, 0.07), True),  # 10% beats the larger spread, 7%
        (around(100.0, 0.02), around(106.0, 0.07), False),  # 6% does not beat the larger spread, 7%
        ((100.0,), (105.0,), False),  # one value each: nothing known about the noise
    ],
)
def test_real_or_noise(a: tuple[float, ...], b: tuple[float, ...], real: bool) -> None:
    """A difference is real only when the interval excludes 0 and it beats both run-to-run spreads."""
    result = compare_values("decode/code/decode_tok_s", "tok/s", a, b)
    assert result.real is real, result.reason
    assert result.diff == pytest.approx(sum(b) / len(b) - sum(a) / len(a))


def test_five_percent_at_one_percent_spread_has_an_interval_that_excludes_zero() -> None:
    """The reason a 5% difference at 1% spread is real: its interval lies wholly above 0, around +5."""
    result = compare_values("k", "tok/s", around(100.0, 0.01), around(105.0, 0.01))
    assert 0 < result.ci_low <= 5.0 <= result.ci_high
    assert result.diff_pct == pytest.approx(0.05)
    assert result.threshold == pytest.approx(0.01)


def test_seed_vs_predecessor_is_a_wash() -> None:
    """The seed's VS PREDECESSOR (3 runs each, spread ~7%): code 276.0 vs 262.6, prose 149.8 vs 155.0, math
    285.8 vs 274.9. The page called it "net a wash"; none of the three differences is real."""
    predecessor = {
        "decode/code/decode_tok_s": around(262.6, 0.07),
        "decode/prose/decode_tok_s": around(155.0, 0.07),
        "decode/math/decode_tok_s": around(274.9, 0.07),
    }
    flash_0731 = {
        "decode/code/decode_tok_s": around(276.0, 0.07),
        "decode/prose/decode_tok_s": around(149.8, 0.07),
        "decode/math/decode_tok_s": around(285.8, 0.07),
    }
    units = dict.fromkeys(predecessor, "tok/s")
    differences = {d.key: d for d in compare(predecessor, flash_0731, units)}
    assert differences["decode/code/decode_tok_s"].diff_pct == pytest.approx(276.0 / 262.6 - 1)  # ~ +5.1%
    assert differences["decode/prose/decode_tok_s"].diff_pct == pytest.approx(149.8 / 155.0 - 1)  # ~ -3.4%
    assert differences["decode/math/decode_tok_s"].diff_pct == pytest.approx(285.8 / 274.9 - 1)  # ~ +4.0%
    assert not any(d.real for d in differences.values())
    assert verdict(list(differences.values())).startswith("a wash")


def test_seed_differences_would_be_real_at_a_tight_spread() -> None:
    """The same means at a 1% spread: code (+5.1%), prose (-3.4%) and math (+4.0%) all differ for real."""
    predecessor = {"code": around(262.6, 0.01), "prose": around(155.0, 0.01), "math": around(274.9, 0.01)}
    flash_0731 = {"code": around(276.0, 0.01), "prose": around(149.8, 0.01), "math": around(285.8, 0.01)}
    differences = compare(predecessor, flash_0731, {})
    assert [d.real for d in differences] == [True, True, True]
    assert verdict(differences) == "3 of 3 measurements differ for real"


def test_bootstrap_is_seeded_and_covers_the_observed_difference() -> None:
    """The same inputs and seed give the same interval; the observed difference lies inside it."""
    a, b = (270.0, 276.0, 282.0, 279.0), (262.0, 266.0, 259.0, 263.0)
    first = bootstrap_mean_difference(a, b)
    assert first == bootstrap_mean_difference(a, b)
    observed = sum(b) / 4 - sum(a) / 4
    assert first[0] <= observed <= first[1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"confidence": 1.0}, "confidence"), ({"resamples": 0}, "resamples")],
)
def test_bootstrap_refuses_bad_settings(kwargs: dict[str, float], message: str) -> None:
    """A confidence outside (0, 1) or no resamples is a ValueError naming the setting."""
    with pytest.raises(ValueError, match=message):
        bootstrap_mean_difference((1.0, 2.0), (3.0, 4.0), **kwargs)  # type: ignore[arg-type]  # bad on purpose


def test_compare_covers_only_shared_measurements() -> None:
    """A measurement only one side has is left out; the verdict says when nothing is shared."""
    differences = compare({"x": (1.0, 2.0), "y": (1.0, 1.1)}, {"y": (2.0, 2.1), "z": (5.0, 6.0)}, {"y": "ms"})
    assert [(d.key, d.unit) for d in differences] == [("y", "ms")]
    assert verdict([]).startswith("nothing to compare")


def test_large_sides_use_the_bootstraps_normal_limit_and_agree_with_it() -> None:
    """From NORMAL_LIMIT_N values a side, the interval is computed; it matches a bootstrap drawn here by hand
    (4 000 resamples of the same values) within 10% of its width, and both exclude 0 for a 3% shift."""
    import random
    from statistics import fmean

    from farm.report.compare import NORMAL_LIMIT_N

    rng = random.Random(1)
    a = [rng.gauss(100.0, 5.0) for _ in range(NORMAL_LIMIT_N * 4)]
    b = [rng.gauss(103.0, 5.0) for _ in range(NORMAL_LIMIT_N * 4)]
    low, high = bootstrap_mean_difference(a, b)
    draws = sorted(fmean(rng.choices(b, k=len(b))) - fmean(rng.choices(a, k=len(a))) for _ in range(4000))
    drawn_low, drawn_high = draws[100], draws[3899]
    assert 0 < low < high
    assert 0 < drawn_low < drawn_high
    assert abs((high - low) - (drawn_high - drawn_low)) < 0.1 * (drawn_high - drawn_low)
    assert abs((low + high) / 2 - (drawn_low + drawn_high) / 2) < 0.1 * (drawn_high - drawn_low)


def test_small_sides_get_the_exact_bootstrap_which_drawing_approaches() -> None:
    """For three values a side the interval is the exact bootstrap distribution's; 40 000 draws done here by hand
    land within a few percent of its width, and the interval is the same whatever the seed."""
    import random
    from statistics import fmean

    a, b = [268.0, 276.0, 284.0], [295.0, 300.0, 309.0]
    low, high = bootstrap_mean_difference(a, b)
    assert (low, high) == bootstrap_mean_difference(a, b, seed=7)
    rng = random.Random(3)
    draws = sorted(fmean(rng.choices(b, k=3)) - fmean(rng.choices(a, k=3)) for _ in range(40_000))
    width = draws[38_999] - draws[1_000]
    assert abs(low - draws[1_000]) < 0.05 * width
    assert abs(high - draws[38_999]) < 0.05 * width
    assert low <= 300.0 + 1e-9 - 276.0 <= high
