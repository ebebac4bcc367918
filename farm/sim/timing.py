"""The simulator's timing model as pure functions: the truth every simulated measurement is checked against.

    TTFT(n, cached)   = base + prefill(n - cached) + cached * cached_s_per_token
    prefill(n)        = a*n + b*n²                      (b: attention, quadratic in the prompt)
    r(workload, c)    = decode_tok_s[workload] / (1 + contention * (c - 1))   c = streams decoding now
    r at depth d      = 1 / (1 / r + k * d)              d = prompt tokens in context, k = s per token per token
    token i due at    t_first + i / r                    (token 0 is the first chunk, at arrival + TTFT)

Tokens leave in steps. The first step is token 0 alone (the prefill step yields one token, as in vLLM). With
speculative decoding (K drafts, acceptance p) every later step is one draft:
`accepted ~ Binomial(K, p)`, so the mean is K*p, and the step emits 1 + accepted tokens; without it, a step is
`tokens_per_chunk` tokens. A step's chunk is due when its LAST token is due, so one chunk can carry several
tokens.

When the number of streams changes mid-stream the stream continues from its last due time at the new rate
(`next_due_ns`); at constant concurrency that is exactly t_first + i / r.
No I/O here; a `random.Random` is passed in.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NS_PER_S = 1_000_000_000


def prefill_s(tokens: int, linear_s_per_token: float, quadratic_s_per_token2: float) -> float:
    """Seconds to prefill `tokens` uncached prompt tokens: a*n + b*n²."""
    return linear_s_per_token * tokens + quadratic_s_per_token2 * tokens * tokens


def ttft_s(
    prompt_tokens: int,
    cached_tokens: int,
    *,
    base_latency_s: float,
    linear_s_per_token: float,
    quadratic_s_per_token2: float,
    cached_s_per_token: float,
) -> float:
    """Time to first token: base + prefill of the uncached part + a small cost per cached token."""
    if not 0 <= cached_tokens <= prompt_tokens:
        raise ValueError(f"cached_tokens {cached_tokens} outside 0..{prompt_tokens}")
    uncached = prompt_tokens - cached_tokens
    return (
        base_latency_s
        + prefill_s(uncached, linear_s_per_token, quadratic_s_per_token2)
        + cached_tokens * cached_s_per_token
    )


def fit_ttft(points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """Solve base + a*n + b*n² = t exactly through three (n, t) points; returns (base, a, b).

    Subtracting the first equation removes `base`, leaving two equations in a and b (Cramer's rule).
    """
    if len(points) != 3:
        raise ValueError("fit_ttft needs exactly three points")
    (n1, t1), (n2, t2), (n3, t3) = points
    a1, b1, c1 = n2 - n1, n2 * n2 - n1 * n1, t2 - t1
    a2, b2, c2 = n3 - n1, n3 * n3 - n1 * n1, t3 - t1
    det = a1 * b2 - a2 * b1
    if det == 0:
        raise ValueError("the three points do not determine a quadratic")
    a = (c1 * b2 - c2 * b1) / det
    b = (a1 * c2 - a2 * c1) / det
    base = t1 - a * n1 - b * n1 * n1
    return base, a, b


def detect_workload(text: str, markers: Mapping[str, str]) -> str | None:
    """The first workload whose marker word occurs in the prompt text, or None."""
    for workload, marker in markers.items():
        if marker in text:
            return workload
    return None


def per_stream_rate(one_stream_tok_s: float, contention: float, streams: int) -> float:
    """Tokens per second of one stream while `streams` streams decode at once (streams counted from 1)."""
    return one_stream_tok_s / (1.0 + contention * (max(streams, 1) - 1))


def rate_at_depth(one_stream_tok_s: float, context_tokens: int, s_per_token_per_context_token: float) -> float:
    """One stream's decode rate with `context_tokens` already in its context: each output token takes
    1/r + k * d seconds (attention reads the whole KV cache), so decode slows as the context grows."""
    return 1.0 / (1.0 / one_stream_tok_s + s_per_token_per_context_token * max(context_tokens, 0))


def aggregate_rate(one_stream_tok_s: float, contention: float, streams: int) -> float:
    """Tokens per second over all `streams` streams."""
    return streams * per_stream_rate(one_stream_tok_s, contention, streams)


def completion_length(max_tokens: int, *, ignore_eos: bool, min_tokens: int, eos_after_tokens: int) -> int:
    """How many tokens a request generates: max_tokens with ignore_eos, else the model's "EOS" point (at least
    min_tokens), never more than max_tokens."""
    if ignore_eos:
        return max_tokens
    return min(max_tokens, max(min_tokens, eos_after_tokens))


def draw_accepted(rng: random.Random, num_speculative_tokens: int, acceptance_rate: float) -> int:
    """Accepted drafts of one step: Binomial(K, p), mean K*p."""
    return sum(1 for _ in range(num_speculative_tokens) if rng.random() < acceptance_rate)


@dataclass(frozen=True, slots=True)
class Step:
    """One engine step of one stream: `tokens` emitted in one chunk; `accepted` drafts for a draft step."""

    tokens: int
    accepted: int | None = None


def plan_steps(
    completion_tokens: int,
    *,
    num_speculative_tokens: int,
    acceptance_rate: float,
    tokens_per_chunk: int,
    rng: random.Random,
) -> list[Step]:
    """Split `completion_tokens` into steps: token 0 alone, then drafts (1 + accepted) or fixed-size chunks.

    The last step is cut at `completion_tokens`; its `accepted` keeps the drawn value (the engine counted it).
    """
    if completion_tokens <= 0:
        return []
    steps = [Step(1)]
    left = completion_tokens - 1
    while left > 0:
        if num_speculative_tokens > 0:
            accepted = draw_accepted(rng, num_speculative_tokens, acceptance_rate)
            emitted = min(left, 1 + accepted)
            steps.append(Step(emitted, accepted))
        else:
            emitted = min(left, tokens_per_chunk)
            steps.append(Step(emitted))
        left -= emitted
    return steps


def mean_accepted_length(num_speculative_tokens: int, acceptance_rate: float) -> float:
    """Tokens per draft step including the bonus token (vLLM's "mean acceptance length"): 1 + K*p."""
    return 1.0 + num_speculative_tokens * acceptance_rate


def due_ns(t_first_ns: int, token_index: int, rate_tok_s: float) -> int:
    """When token `token_index` (0-based) is due at a constant rate: t_first + i / r."""
    return t_first_ns + round(token_index * NS_PER_S / rate_tok_s)


def next_due_ns(anchor_ns: int, anchor_index: int, last_index: int, rate_tok_s: float) -> int:
    """Due time of token `last_index`, continuing from token `anchor_index` that was due at `anchor_ns`.

    The anchor moves only when the rate changes, so a constant rate never accumulates rounding or sleep error.
    """
    return anchor_ns + round((last_index - anchor_index) * NS_PER_S / rate_tok_s)


def chunk_schedule(t_first_ns: int, steps: Sequence[Step], rate_tok_s: float) -> list[int]:
    """Due times of each step's chunk at a constant rate: when the step's last token is due."""
    schedule = []
    emitted = 0
    for step in steps:
        emitted += step.tokens
        schedule.append(due_ns(t_first_ns, emitted - 1, rate_tok_s))
    return schedule


def request_service_s(ttft_s_: float, completion_tokens: int, per_stream_tok_s: float) -> float:
    """How long one request holds its slot: TTFT, then the remaining tokens at the per-stream rate."""
    return ttft_s_ + max(completion_tokens - 1, 0) / per_stream_tok_s


def saturation_rate_rps(
    *, slots: int, ttft_s_: float, completion_tokens: int, one_stream_tok_s: float, contention: float
) -> float:
    """The request rate at which all `slots` (max_num_seqs) are always busy: slots / service time at full load.

    Requests arriving at a constant rate below it never wait for a slot, so their TTFT is the model's; above
    it the queue, and every later request's TTFT, grows without bound. It is therefore the highest rate that a
    TTFT goal above the model's TTFT can be met at, for a long enough run of constant arrivals.
    """
    rate = per_stream_rate(one_stream_tok_s, contention, slots)
    return slots / request_service_s(ttft_s_, completion_tokens, rate)
