"""Figure parameters stored compact: exact round trips, JSON from before still read, a tenth of the size."""

from __future__ import annotations

import json
from typing import Any

import pytest

from farm.errors import StoreError
from farm.store.params_codec import VERSION_1, decode, encode

DECODE_PARAMS: dict[str, Any] = {
    "api": "chat",
    "temperature": 0.0,
    "thinking": False,
    "repeats": 3,
    "ignore_eos": True,
    "request_timeout_s": 60.0,
    "workload": "code",
    "short_output_tokens": 64,
    "long_output_tokens": 896,
    "prefix_warmed": True,
    "timing": "request start to last content chunk",
    "server_counter_deltas": [{"vllm:prompt_tokens": 94.0, "vllm:generation_tokens": 832.0 + i} for i in range(3)],
    "usage_completion_tokens": [832, 833, 834],
}


@pytest.mark.parametrize(
    "params", [DECODE_PARAMS, {}, {"card": 1, "sampled_every_s": 0.5}, {"é": ["ünïcode", None, 1e300]}]
)
def test_round_trip_is_exact(params: dict[str, Any]) -> None:
    """decode(encode(p)) == p for the farm's own parameters and for anything JSON holds."""
    data = encode(params)
    assert data.startswith(VERSION_1)
    assert decode(data) == params


def test_compact_is_several_times_smaller_than_json() -> None:
    """The decode figure's parameters take under a third of their JSON (the per-repeat numbers included)."""
    assert 3 * len(encode(DECODE_PARAMS)) < len(json.dumps(DECODE_PARAMS))


@pytest.mark.parametrize("legacy", [json.dumps(DECODE_PARAMS), json.dumps(DECODE_PARAMS).encode(), DECODE_PARAMS])
def test_json_from_before_is_still_read(legacy: Any) -> None:
    """A row written before revision 0002 (JSON text, its bytes, or a dict from JSONB) reads the same."""
    assert decode(legacy) == DECODE_PARAMS


@pytest.mark.parametrize("data", [VERSION_1 + b"not zlib", b"\xff\xfe"])
def test_corrupt_bytes_are_a_store_error(data: bytes) -> None:
    """Bytes that are neither compact nor JSON raise the farm's StoreError."""
    with pytest.raises(StoreError):
        decode(data)
