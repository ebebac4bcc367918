"""A figure's method parameters as compact bytes, and back (pure, no I/O).

Every figure of a run carries the parameters that produced it (about 60 figures × 350 bytes of JSON per run,
most of it the same key names again and again). They are stored compressed with zlib and a preset dictionary
of those key names and common values (`DICTIONARY`), so each row shrinks to about a tenth while staying
readable on its own. The dictionary never changes once stored: a new one gets a new version byte.

Layout: one version byte (1) and the zlib stream. Anything else (a row written before revision 0002, whose
column held JSON text) is read as JSON.
"""

from __future__ import annotations

import json
import zlib
from functools import lru_cache
from typing import Any

from farm.errors import StoreError

VERSION_1 = b"\x01"
DICTIONARY = (
    b'{"card": 0, "sampled_every_s": 0.5}{"card": 1, "sampled_every_s": 0.5}'
    b'"prompt_sized_by": "/tokenize"}"cache_state": "warm: the same prompt was sent before"}'
    b'"percentiles": "linear interpolation (numpy\'s default)", "itl": "gaps between successive content chunks"}'
    b'"source": "deltas of /metrics counters over each repeat"}'
    b'"timing": "request start to last content chunk", "server_counter_deltas": [{"vllm:prompt_tokens": '
    b', "vllm:generation_tokens": }, {"vllm:prompt_tokens": , "vllm:spec_decode_num_drafts": '
    b', "vllm:spec_decode_num_draft_tokens": , "vllm:spec_decode_num_accepted_tokens": '
    b'], "usage_completion_tokens": ['
    b'"workload": "prose", "workload": "math", "short_output_tokens": 64, "long_output_tokens": 512, '
    b'"prefix_warmed": true, "concurrency": 1, "workload": "code", "prompt_tokens": 256, "output_tokens": 128, '
    b'"unique_prefix": true, "prompt_tokens": 32, "output_tokens": 1}'
    b'{"api": "completions", "temperature": 0.0, "thinking": false, "repeats": 3, "ignore_eos": true, '
    b'"request_timeout_s": 60.0, '
    b'{"api": "chat", "temperature": 0.0, "thinking": false, "repeats": 3, "ignore_eos": true, '
    b'"request_timeout_s": 60.0, '
)
"""Key names and values the farm's methods write (farm.bench.methods), most common last (zlib prefers the end).
Frozen: rows written with it are read with it."""
_LEVEL = 9


def encode(params: dict[str, Any]) -> bytes:
    """The parameters as compact bytes (`decode` gives them back equal)."""
    return _compressed(json.dumps(params, separators=(", ", ": ")))


@lru_cache(maxsize=4096)
def _compressed(text: str) -> bytes:
    """The bytes of one parameters text. Cached: a sweep's ~150 figures share a few dozen parameter sets, and
    each is encoded when it is signed, stored and checked at delivery (zlib at level 9 with a dictionary costs
    ~50 us a time, the JSON text ~5)."""
    compressor = zlib.compressobj(_LEVEL, zdict=DICTIONARY)
    return VERSION_1 + compressor.compress(text.encode("utf-8")) + compressor.flush()


def decode(data: bytes | str | dict[str, Any] | None) -> dict[str, Any]:
    """Parameters from what the column holds: compact bytes, or JSON (text or bytes) from before."""
    if data is None:
        return {}
    if isinstance(data, dict):
        return data
    if isinstance(data, str):
        return dict(json.loads(data))
    raw = bytes(data)
    if raw[:1] == VERSION_1:
        try:
            decompressor = zlib.decompressobj(zdict=DICTIONARY)
            raw = decompressor.decompress(raw[1:]) + decompressor.flush()
        except zlib.error as exc:
            raise StoreError(f"a figure's parameters are corrupt: {exc}") from exc
    try:
        return dict(json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise StoreError(f"a figure's parameters are neither compact nor JSON: {exc}") from exc
