"""The compact raw-sample codec: every field and chunk timestamp comes back exactly, and it is smaller."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.errors import StoreError
from farm.store.sample_codec import JSON_FALLBACK, PACKED, SampleCodecError, decode, encode


def sample(start: int, chunks: int, *, error: str | None = None, sha: str | None = "ab" * 32) -> dict[str, Any]:
    """A streamed request's sample with `chunks` chunk timestamps 7-8 ms apart (nanoseconds)."""
    first = start + 61_234_567
    chunk_ns = [first + i * 7_654_321 + (i * 7919) % 1000 for i in range(chunks)]
    return {
        "started_ns": start,
        "first_token_ns": first if chunks else None,
        "last_token_ns": chunk_ns[-1] if chunks else None,
        "prompt_tokens": 47,
        "completion_tokens": chunks or None,
        "chunk_ns": chunk_ns,
        "error": error,
        "text_sha256": sha,
    }


def test_round_trip_is_exact_and_at_least_three_times_smaller_than_json() -> None:
    """A repeat of realistic samples decodes equal, field by field, at a third of its JSON or less."""
    repeat = [sample(432_701_980_506 + i * 1_000_000_000, 64) for i in range(6)]
    data = encode(repeat)
    assert data.startswith(PACKED)
    assert decode(data) == repeat
    assert len(json.dumps(repeat)) >= 3 * len(data)


def test_failed_requests_and_odd_hashes_survive() -> None:
    """A failed request (no tokens, an error), a hash that is not 64 hex digits and no hash all come back."""
    repeat = [
        sample(10, 0, error="HTTP 500: boom", sha=None),
        sample(20_000, 3, sha="not-a-hash"),
        sample(40_000, 2, sha="AB" * 32),
    ]
    assert decode(encode(repeat)) == repeat


def test_unknown_shapes_fall_back_to_json_and_lose_nothing() -> None:
    """A sample with an extra key or a float time is kept as compressed JSON, equal on the way back."""
    repeat = [{**sample(1, 2), "extra": [1, 2]}, {**sample(5, 1), "started_ns": 5.5}]
    data = encode(repeat)
    assert data.startswith(JSON_FALLBACK)
    assert decode(data) == repeat


@pytest.mark.parametrize("data", [b"XXXX" + b"\x00" * 8, PACKED + b"not zlib", b""])
def test_bytes_it_did_not_write_are_a_store_error(data: bytes) -> None:
    """Corrupt or foreign bytes raise the farm's StoreError, never a zlib or index error."""
    with pytest.raises(SampleCodecError) as caught:
        decode(data)
    assert isinstance(caught.value, StoreError)


times = st.integers(min_value=-(2**61), max_value=2**61)
samples = st.fixed_dictionaries(
    {
        "started_ns": times,
        "first_token_ns": st.none() | times,
        "last_token_ns": st.none() | times,
        "prompt_tokens": st.none() | st.integers(min_value=0, max_value=2**40),
        "completion_tokens": st.none() | st.integers(min_value=0, max_value=2**40),
        "chunk_ns": st.lists(times, max_size=20),
        "error": st.none() | st.text(max_size=20),
        "text_sha256": st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64) | st.text(max_size=5),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(samples, max_size=8))
def test_any_samples_round_trip(repeat: list[dict[str, Any]]) -> None:
    """Whatever the values (negative deltas, missing times, odd text), decode(encode(x)) == x."""
    assert decode(encode(repeat)) == repeat
