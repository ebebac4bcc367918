"""The simulator's timing model against hand-computed truth, and the seed profile against the seed's page."""

from __future__ import annotations

import random

import pytest

from farm.bench.prompts import CODE_PROMPT, MATH_PROMPT, PROSE_PROMPT, WORKLOAD_MARKERS
from farm.sim import timing
from farm.sim.profile import SimProfile, load_profile

SEED_PROFILE = "seed-rtx-pro-6000-tp2"


def seed_ttft(profile: SimProfile, prompt_tokens: int, cached_tokens: int = 0) -> float:
    return timing.ttft_s(
        prompt_tokens,
        cached_tokens,
        base_latency_s=profile.base_latency_s,
        linear_s_per_token=profile.prefill_linear_s_per_token,
        quadratic_s_per_token2=profile.prefill_quadratic_s_per_token2,
        cached_s_per_token=profile.cached_s_per_token,
    )


@pytest.mark.parametrize(
    ("tokens", "a", "b", "expected"),
    [
        (0, 1e-3, 1e-6, 0.0),
        (10, 1e-3, 0.0, 0.01),
        (10, 0.0, 1e-3, 0.1),  # 1e-3 * 100
        (1000, 2e-5, 1e-9, 0.021),  # 0.02 + 0.001
        (100_000, 2e-5, 1e-9, 12.0),  # 2 + 10
    ],
)
def test_prefill_is_linear_plus_quadratic(tokens: int, a: float, b: float, expected: float) -> None:
    """prefill(n) = a*n + b*n²."""
    assert timing.prefill_s(tokens, a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prompt", "cached", "expected"),
    [
        (0, 0, 0.020),  # base only
        (1000, 0, 0.020 + 0.001 + 0.001),  # base + a*1000 + b*1000²
        (1000, 512, 0.020 + 488e-6 + 488**2 * 1e-9 + 512 * 1e-7),
        (1000, 1000, 0.020 + 1000 * 1e-7),
    ],
)
def test_ttft_charges_uncached_prefill_and_cached_tokens(prompt: int, cached: int, expected: float) -> None:
    """TTFT = base + prefill(uncached) + cached * cached_s_per_token."""
    got = timing.ttft_s(
        prompt,
        cached,
        base_latency_s=0.020,
        linear_s_per_token=1e-6,
        quadratic_s_per_token2=1e-9,
        cached_s_per_token=1e-7,
    )
    assert got == pytest.approx(expected)


def test_ttft_refuses_more_cached_than_prompt() -> None:
    """A cache hit cannot exceed the prompt."""
    with pytest.raises(ValueError, match="cached_tokens"):
        timing.ttft_s(10, 11, base_latency_s=0, linear_s_per_token=0, quadratic_s_per_token2=0, cached_s_per_token=0)


def test_fit_ttft_recovers_a_known_quadratic() -> None:
    """Three points of base + a n + b n² give back base, a and b."""
    base, a, b = 0.05, 3e-5, 7e-10
    points = [(n, base + a * n + b * n * n) for n in (16, 50_000, 200_000)]
    assert timing.fit_ttft(points) == pytest.approx((base, a, b), rel=1e-9)


@pytest.mark.parametrize(
    ("prompt_tokens", "published_s"),
    [(107_016, 10.24), (211_722, 34.6), (32, 0.063)],
)
def test_seed_profile_reproduces_published_ttft(prompt_tokens: int, published_s: float) -> None:
    """The seed profile's fit passes through the seed's two prefill points and its 63 ms short TTFT."""
    profile = load_profile(SEED_PROFILE)
    assert seed_ttft(profile, prompt_tokens) == pytest.approx(published_s, rel=1e-3)


def test_seed_profile_numbers_are_the_exact_fit() -> None:
    """The numbers written in the TOML are what fit_ttft computes from the three published points."""
    profile = load_profile(SEED_PROFILE)
    base, a, b = timing.fit_ttft([(32, 0.063), (107_016, 10.24), (211_722, 34.6)])
    assert profile.base_latency_s == pytest.approx(base, rel=1e-12)
    assert profile.prefill_linear_s_per_token == pytest.approx(a, rel=1e-12)
    assert profile.prefill_quadratic_s_per_token2 == pytest.approx(b, rel=1e-12)


def test_seed_profile_prefill_rate_near_the_published_10_4k() -> None:
    """About 10.4k tok/s of prefill at 107k tokens, as the design quotes."""
    profile = load_profile(SEED_PROFILE)
    assert 107_016 / seed_ttft(profile, 107_016) == pytest.approx(10_450, rel=0.01)


def test_seed_profile_prefix_cache_repeat_is_0_9_s() -> None:
    """211,722 tokens again: 827 full 256-token blocks hit, 10 tokens computed, 0.9 s."""
    profile = load_profile(SEED_PROFILE)
    cached = (211_722 - 1) // 256 * 256
    assert cached == 211_712
    assert seed_ttft(profile, 211_722, cached) == pytest.approx(0.9, rel=1e-3)


@pytest.mark.parametrize(
    ("prompt", "workload", "rate"),
    [(CODE_PROMPT, "code", 276.0), (PROSE_PROMPT, "prose", 149.8), (MATH_PROMPT, "math", 285.8)],
)
def test_seed_profile_decode_rate_per_workload(prompt: str, workload: str, rate: float) -> None:
    """Each workload prompt is recognised by its marker and decodes at the seed's one-stream rate."""
    profile = load_profile(SEED_PROFILE)
    assert timing.detect_workload(prompt, profile.workload_markers) == workload
    assert profile.decode_tok_s[workload] == rate
    assert timing.per_stream_rate(profile.decode_tok_s[workload], profile.contention, 1) == rate


def test_unknown_prompt_has_no_workload() -> None:
    """A prompt with no marker word is no workload (the profile's default rate applies)."""
    assert timing.detect_workload("Tell me a joke.", WORKLOAD_MARKERS) is None


@pytest.mark.parametrize(
    ("rate", "contention", "streams", "per_stream", "aggregate"),
    [
        (200.0, 0.0, 1, 200.0, 200.0),
        (200.0, 0.0, 64, 200.0, 12_800.0),
        (100.0, 0.1, 1, 100.0, 100.0),
        (100.0, 0.1, 2, 100.0 / 1.1, 200.0 / 1.1),
        (100.0, 0.1, 11, 50.0, 550.0),  # 1 + 0.1*10 = 2
        (276.0, 0.04, 64, 276.0 / 3.52, 64 * 276.0 / 3.52),
    ],
)
def test_contention(rate: float, contention: float, streams: int, per_stream: float, aggregate: float) -> None:
    """r(c) = r1 / (1 + contention (c - 1)); aggregate = c r(c)."""
    assert timing.per_stream_rate(rate, contention, streams) == pytest.approx(per_stream)
    assert timing.aggregate_rate(rate, contention, streams) == pytest.approx(aggregate)


@pytest.mark.parametrize(
    ("max_tokens", "ignore_eos", "min_tokens", "eos_after", "expected"),
    [
        (896, True, 0, 50, 896),
        (896, False, 0, 50, 50),
        (896, False, 100, 50, 100),
        (20, False, 0, 50, 20),
        (20, False, 100, 50, 20),
    ],
)
def test_completion_length(max_tokens: int, ignore_eos: bool, min_tokens: int, eos_after: int, expected: int) -> None:
    """ignore_eos gives max_tokens; else EOS after eos_after (at least min_tokens), capped by max_tokens."""
    got = timing.completion_length(max_tokens, ignore_eos=ignore_eos, min_tokens=min_tokens, eos_after_tokens=eos_after)
    assert got == expected


@pytest.mark.parametrize(
    ("tokens", "per_chunk", "expected"),
    [
        (1, 1, [1]),
        (4, 1, [1, 1, 1, 1]),
        (8, 3, [1, 3, 3, 1]),
        (7, 3, [1, 3, 3]),
        (0, 1, []),
    ],
)
def test_plan_steps_without_spec_decoding(tokens: int, per_chunk: int, expected: list[int]) -> None:
    """Token 0 goes alone; then fixed chunks, the last one cut."""
    steps = timing.plan_steps(
        tokens,
        num_speculative_tokens=0,
        acceptance_rate=0.0,
        tokens_per_chunk=per_chunk,
        rng=random.Random(0),
    )
    assert [s.tokens for s in steps] == expected
    assert all(s.accepted is None for s in steps)


@pytest.mark.parametrize(("k", "p", "expected_steps"), [(5, 1.0, [1, 6, 6, 2]), (5, 0.0, [1, 1, 1, 1, 1])])
def test_plan_steps_spec_decoding_extremes(k: int, p: float, expected_steps: list[int]) -> None:
    """All drafts accepted: steps of K+1; none accepted: steps of 1 (the bonus token)."""
    total = sum(expected_steps)
    steps = timing.plan_steps(
        total, num_speculative_tokens=k, acceptance_rate=p, tokens_per_chunk=1, rng=random.Random(1)
    )
    assert [s.tokens for s in steps] == expected_steps
    assert [s.accepted for s in steps[1:]] == [int(k * p)] * (len(expected_steps) - 1)


def test_spec_decoding_mean_accepted_length_matches_the_seed() -> None:
    """K=5, p=0.486: 2.43 accepted per draft on average, 3.43 tokens per step, within sampling error."""
    steps = timing.plan_steps(
        200_000, num_speculative_tokens=5, acceptance_rate=0.486, tokens_per_chunk=1, rng=random.Random(7)
    )
    drafts = steps[1:-1]  # the first step is the prefill token; the last may be cut
    mean_accepted = sum(s.accepted or 0 for s in drafts) / len(drafts)
    mean_tokens = sum(s.tokens for s in drafts) / len(drafts)
    assert mean_accepted == pytest.approx(2.43, abs=0.02)
    assert mean_tokens == pytest.approx(timing.mean_accepted_length(5, 0.486), abs=0.02)
    assert timing.mean_accepted_length(5, 0.486) == pytest.approx(3.43)
    assert sum(s.tokens for s in steps) == 200_000


def test_plan_steps_is_deterministic_for_a_seed() -> None:
    """The same seed plans the same steps."""

    def plan(seed: int) -> list[int]:
        steps = timing.plan_steps(
            500, num_speculative_tokens=5, acceptance_rate=0.5, tokens_per_chunk=1, rng=random.Random(seed)
        )
        return [s.tokens for s in steps]

    assert plan(3) == plan(3)
    assert plan(3) != plan(4)


@pytest.mark.parametrize(
    ("steps", "rate", "expected_ms"),
    [
        ([1, 1, 1, 1], 200.0, [0, 5, 10, 15]),
        ([1, 3, 3], 200.0, [0, 15, 30]),  # a chunk is due when its last token is: tokens 3 and 6
        ([1, 6, 2], 100.0, [0, 60, 80]),
        ([1], 50.0, [0]),
    ],
)
def test_chunk_schedule(steps: list[int], rate: float, expected_ms: list[int]) -> None:
    """Token i is due at t_first + i / r; a step's chunk at its last token's due time."""
    t_first = 1_000_000_000
    plan = [timing.Step(n) for n in steps]
    assert timing.chunk_schedule(t_first, plan, rate) == [t_first + ms * 1_000_000 for ms in expected_ms]


def test_next_due_at_a_constant_rate_equals_the_absolute_schedule() -> None:
    """Continuing from an anchor never drifts from t_first + i / r (no accumulated rounding)."""
    rate = 3.0  # 333,333,333.3 ns per token: rounding would accumulate if we added step by step
    t_first = 5
    for index in (1, 2, 3, 1000, 999_999):
        assert timing.next_due_ns(t_first, 0, index, rate) == timing.due_ns(t_first, index, rate)


def test_next_due_after_a_rate_change_continues_from_the_anchor() -> None:
    """When concurrency changes, the next token is one new-rate interval after the anchor's due time."""
    anchor_ns, anchor_index = 50_000_000, 10
    assert timing.next_due_ns(anchor_ns, anchor_index, 11, 100.0) == 60_000_000
    assert timing.next_due_ns(anchor_ns, anchor_index, 13, 50.0) == 110_000_000
