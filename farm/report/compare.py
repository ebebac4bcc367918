"""Comparing two sets of results, measurement by measurement (pure math, no I/O).

For each measurement both sides have, a comparison gives both means, the difference B - A (absolute and as a
fraction of A), and a bootstrap confidence interval of the difference of means: each side's values are
resampled with replacement `resamples` times (10 000 by default) from a seeded RNG, so the same inputs always
give the same interval, and the central `confidence` (95%) of the resampled differences is the interval. When
both sides have NORMAL_LIMIT_N values or more (two recipes or engine versions pooled over many runs), the
interval is the bootstrap's normal limit, computed instead of drawn; when both sides are small (a few repeats of
one run each), the bootstrap distribution is computed exactly over every distinct resample.

A difference is **real** when all three hold:
1. both sides have at least two values (one value says nothing about run-to-run noise);
2. the confidence interval excludes 0;
3. |B - A| / A exceeds the run-to-run spread of both sides: max(spread A, spread B), where spread is
   (max - min) / mean, the seed's own measure ("Mean of 3 runs; spread ~7%").
Otherwise it is **noise**. Rule 3 matters because a bootstrap of three values underestimates the variance: a 5%
difference with a 1% spread is real, the same 5% with a 7% spread is noise, as the seed itself judged its
~5% / ~4% / ~3% "VS PREDECESSOR" differences at a ~7% spread: "net a wash".
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean

from farm.domain import spread as domain_spread

DEFAULT_RESAMPLES = 10_000
"""Enough that the 2.5th and 97.5th percentiles move by well under 1% of the difference between seeds."""
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 20260830
"""Fixed, so a comparison printed twice prints the same interval (the seed's capture date)."""
EXACT_LIMIT = 20_000
"""Up to this many pairs of distinct resamples (3 values a side: 100; 5: 15 876), the bootstrap distribution is
computed exactly instead of drawn: the interval infinitely many resamples would give, at no cost."""
NORMAL_LIMIT_N = 30
"""From this many values per side, the bootstrap interval is its normal limit, computed (see
`bootstrap_mean_difference`): a bootstrap of 10 000 resamples of thousands of values costs seconds per key."""
MIN_VALUES = 2
"""Values each side needs before a difference can be called real."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison for one measurement."""

    n: int
    mean: float
    spread: float


@dataclass(frozen=True)
class Difference:
    """B against A for one measurement."""

    key: str
    unit: str
    a: Side
    b: Side
    diff: float
    """mean(B) - mean(A)."""
    diff_pct: float | None
    """diff / mean(A), a fraction (0.05 is 5%); None when mean(A) is 0."""
    ci_low: float
    ci_high: float
    threshold: float
    """max(spread A, spread B): what |diff_pct| must exceed to be real."""
    real: bool
    reason: str


def spread(values: Sequence[float]) -> float:
    """(max - min) / mean; 0 for a zero mean (farm.domain.spread, the one definition)."""
    return domain_spread(min(values), max(values), fmean(values))


def bootstrap_mean_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(B) - mean(A)."""
    if not a or not b:
        raise ValueError("both sides need values")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, not {resamples}")
    a_values, b_values = list(a), list(b)
    n_a, n_b = len(a_values), len(b_values)
    if min(n_a, n_b) >= NORMAL_LIMIT_N:
        # The bootstrap distribution of a difference of means of this many values is normal (its limit), with
        # the variance of the resampled means: pvariance / n per side. Computed, not drawn: same answer, no cost.
        spread_of_mean = math.sqrt(_population_variance(a_values) / n_a + _population_variance(b_values) / n_b)
        centre = fmean(b_values) - fmean(a_values)
        z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
        return centre - z * spread_of_mean, centre + z * spread_of_mean
    if _multisets(n_a) * _multisets(n_b) <= EXACT_LIMIT:
        return _exact_interval(a_values, b_values, confidence)
    rng = random.Random(seed)
    # Every draw at once (one call per side), then the resamples as consecutive slices: the same bootstrap as
    # drawing resample by resample, several times faster in pure Python.
    draws_b = rng.choices(b_values, k=n_b * resamples)
    draws_a = rng.choices(a_values, k=n_a * resamples)
    differences = sorted(
        sum(draws_b[i * n_b : (i + 1) * n_b]) / n_b - sum(draws_a[i * n_a : (i + 1) * n_a]) / n_a
        for i in range(resamples)
    )
    tail = (1 - confidence) / 2
    low_index = max(0, math.floor(tail * resamples))
    high_index = min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)
    return differences[low_index], differences[high_index]


def _population_variance(values: Sequence[float]) -> float:
    """The population variance in floating point, two passes (statistics.pvariance computes it exactly in
    fractions: a tenth of a second per comparison of a few hundred values a side)."""
    mean = fmean(values)
    return math.fsum((x - mean) ** 2 for x in values) / len(values)


def _multisets(n: int) -> int:
    """How many different resamples (multisets of n draws from n values) a side has."""
    return math.comb(2 * n - 1, n)


def _resampled_means(values: Sequence[float]) -> dict[float, float]:
    """Every mean a resample of `values` can have, with its probability (the exact bootstrap distribution)."""
    n = len(values)
    out: dict[float, float] = {}
    for counts in _compositions(n, n):
        probability = math.factorial(n) / math.prod(math.factorial(c) for c in counts) / n**n
        mean = sum(c * v for c, v in zip(counts, values, strict=True)) / n
        out[mean] = out.get(mean, 0.0) + probability
    return out


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write `total` as `parts` counts of zero or more, in order."""
    if parts == 1:
        return [(total,)]
    return [(first, *rest) for first in range(total + 1) for rest in _compositions(total - first, parts - 1)]


def _exact_interval(a: Sequence[float], b: Sequence[float], confidence: float) -> tuple[float, float]:
    """The percentile interval of the exact bootstrap distribution of mean(B*) - mean(A*): what infinitely many
    resamples would give, computed over every pair of resamples with its probability."""
    means_a, means_b = _resampled_means(a), _resampled_means(b)
    distribution = sorted((mb - ma, pb * pa) for mb, pb in means_b.items() for ma, pa in means_a.items())
    tail = (1 - confidence) / 2
    low = high = distribution[-1][0]
    cumulative = 0.0
    found_low = False
    for difference, probability in distribution:
        cumulative += probability
        if not found_low and cumulative > tail:
            low, found_low = difference, True
        if cumulative >= 1 - tail - 1e-12:
            high = difference
            break
    return low, high


def compare_values(
    key: str,
    unit: str,
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> Difference:
    """B against A for one measurement, with the verdict (see the module docstring for what "real" means)."""
    side_a = Side(n=len(a), mean=fmean(a), spread=spread(a))
    side_b = Side(n=len(b), mean=fmean(b), spread=spread(b))
    diff = side_b.mean - side_a.mean
    diff_pct = diff / side_a.mean if side_a.mean else None
    low, high = bootstrap_mean_difference(a, b, resamples=resamples, confidence=confidence, seed=seed)
    threshold = max(side_a.spread, side_b.spread)
    if min(side_a.n, side_b.n) < MIN_VALUES:
        real, reason = False, f"too few values (n={side_a.n} vs {side_b.n}; {MIN_VALUES} each needed)"
    elif low <= 0 <= high:
        real, reason = False, f"the {confidence:.0%} interval includes 0"
    elif diff_pct is None or abs(diff_pct) <= threshold:
        shown = "n/a" if diff_pct is None else f"{abs(diff_pct):.1%}"
        real, reason = False, f"|difference| {shown} is within the run-to-run spread {threshold:.1%}"
    else:
        real, reason = True, f"interval excludes 0 and |difference| {abs(diff_pct):.1%} > spread {threshold:.1%}"
    return Difference(
        key=key,
        unit=unit,
        a=side_a,
        b=side_b,
        diff=diff,
        diff_pct=diff_pct,
        ci_low=low,
        ci_high=high,
        threshold=threshold,
        real=real,
        reason=reason,
    )


def compare(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    units: Mapping[str, str],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> list[Difference]:
    """Every measurement both sides have values for, by key."""
    return [
        compare_values(key, units.get(key, ""), a[key], b[key], resamples=resamples, confidence=confidence, seed=seed)
        for key in sorted(set(a) & set(b))
        if a[key] and b[key]
    ]


def verdict(differences: Sequence[Difference]) -> str:
    """One line: how many measurements differ for real, or that the two are a wash."""
    real = [d for d in differences if d.real]
    if not differences:
        return "nothing to compare: the two sides share no measurement"
    if not real:
        return f"a wash: none of {len(differences)} measurements differs beyond the run-to-run spread"
    return f"{len(real)} of {len(differences)} measurements differ for real"
