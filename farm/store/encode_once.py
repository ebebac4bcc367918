"""Encoding a run's samples and figure parameters once per object, for the span of one delivery (pure, no I/O).

A run's parts are encoded where it is signed, where it is stored and where the store checks it at delivery; a
bulk delivery's runs may share them (the same parameter sets, the same repeats). `EncodeOnce` remembers each
object it encoded (held here, so its id cannot be reused while it lives), and hands back the same bytes as
farm.store.sample_codec.encode and farm.store.params_codec.encode. What it is given must not change while it
lives: one delivery, or one bulk fill of results built and never mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from farm.store.params_codec import encode as encode_params
from farm.store.sample_codec import encode as encode_samples


class EncodeOnce:
    """farm.store.sample_codec.encode and farm.store.params_codec.encode, each object encoded once."""

    def __init__(self) -> None:
        self._samples: dict[int, tuple[Sequence[dict[str, Any]], bytes]] = {}
        self._params: dict[int, tuple[dict[str, Any], bytes]] = {}

    def samples(self, repeat: Sequence[dict[str, Any]]) -> bytes:
        """One repeat's samples as the store keeps them."""
        found = self._samples.get(id(repeat))
        if found is not None and found[0] is repeat:
            return found[1]
        data = encode_samples(repeat)
        self._samples[id(repeat)] = (repeat, data)
        return data

    def params(self, params: dict[str, Any]) -> bytes:
        """A figure's parameters as the store keeps them."""
        found = self._params.get(id(params))
        if found is not None and found[0] is params:
            return found[1]
        data = encode_params(params)
        self._params[id(params)] = (params, data)
        return data
