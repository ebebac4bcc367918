"""farm.store.encode_once: each repeat and parameter set encoded once, to the bytes the codecs write."""

from __future__ import annotations

from typing import Any

from farm.store.encode_once import EncodeOnce
from farm.store.params_codec import decode as decode_params
from farm.store.params_codec import encode as encode_params
from farm.store.sample_codec import encode as encode_samples

SAMPLE: dict[str, Any] = {
    "started_ns": 5,
    "first_token_ns": 15,
    "last_token_ns": 95,
    "prompt_tokens": 32,
    "completion_tokens": 8,
    "chunk_ns": [15, 40, 95],
    "error": None,
    "text_sha256": None,
}


def test_the_bytes_are_the_codecs_own() -> None:
    """What EncodeOnce hands back is what sample_codec and params_codec write, and reads back."""
    once = EncodeOnce()
    repeat = [SAMPLE, {**SAMPLE, "started_ns": 7}]
    params = {"workload": "code", "repeats": 3}
    assert once.samples(repeat) == encode_samples(repeat)
    assert once.params(params) == encode_params(params)
    assert decode_params(once.params(params)) == params


def test_one_object_is_encoded_once_and_an_equal_other_one_again(monkeypatch: Any) -> None:
    """The same list handed in twice is encoded once; another list (even equal to it) is encoded on its own,
    so objects never share bytes by accident of their ids."""
    import farm.store.encode_once as module

    calls: list[int] = []

    def counting(samples: Any) -> bytes:
        calls.append(1)
        return encode_samples(samples)

    monkeypatch.setattr(module, "encode_samples", counting)
    once = EncodeOnce()
    repeat = [SAMPLE]
    first = once.samples(repeat)
    assert once.samples(repeat) is first
    other = [dict(SAMPLE, completion_tokens=9)]
    assert once.samples(other) == encode_samples(other) != first
    assert len(calls) == 2


def test_the_params_cache_gives_each_text_its_own_bytes() -> None:
    """params_codec caches bytes by the parameters' JSON text: different parameters never share bytes."""
    a, b = {"point": "code"}, {"point": "prose"}
    assert encode_params(a) == encode_params(dict(a))
    assert decode_params(encode_params(a)) == a
    assert decode_params(encode_params(b)) == b
