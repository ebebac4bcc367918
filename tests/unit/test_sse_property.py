"""Property tests of the timed path's stream parser (farm.bench.sse): any stream an OpenAI-compatible server can
send, cut into reads anywhere, gives the same content chunks, text hash and usage; any bytes at all give either
a sample or the parser's own StreamFormatError, never another exception."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from farm.bench.sse import CHAT_TEXT_KEYS, COMPLETION_TEXT_KEYS, StreamAccumulator, StreamFormatError

texts = st.text(min_size=1, max_size=12)
line_ends = st.sampled_from(["\n", "\r\n", "\r"])


def chat_event(text: str, *, compact: bool, ascii_only: bool) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(chunk, separators=separators, ensure_ascii=ascii_only).encode()


def completion_event(text: str, *, compact: bool, ascii_only: bool) -> bytes:
    chunk = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]}
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(chunk, separators=separators, ensure_ascii=ascii_only).encode()


def stream_bytes(payloads: list[bytes], end: str) -> bytes:
    return b"".join(b"data: " + payload + (end * 2).encode() for payload in payloads)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """`data` split at the given offsets (taken modulo its length, sorted, deduplicated)."""
    offsets = sorted({point % (len(data) + 1) for point in points})
    pieces, start = [], 0
    for offset in offsets:
        pieces.append(data[start:offset])
        start = offset
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(texts, min_size=1, max_size=8),
    chat=st.booleans(),
    compact=st.booleans(),
    ascii_only=st.booleans(),
    end=line_ends,
    points=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_stream_cut_anywhere_gives_its_chunks_text_and_usage(
    chunks: list[str], chat: bool, compact: bool, ascii_only: bool, end: str, points: list[int]
) -> None:
    """One content chunk per event with text, the hash of the whole text, and the usage of the last event."""
    event = chat_event if chat else completion_event
    usage = {"id": "c", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(chunks)}}
    payloads = [event(text, compact=compact, ascii_only=ascii_only) for text in chunks]
    payloads += [json.dumps(usage).encode(), b"[DONE]"]
    data = stream_bytes(payloads, end)
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS if chat else COMPLETION_TEXT_KEYS)
    for now_ns, piece in enumerate(cut(data, points), start=1):
        accumulator.feed(piece, now_ns)
    sample = accumulator.sample(0)
    assert sample.error is None
    assert len(sample.chunk_ns) == len(chunks)
    assert list(sample.chunk_ns) == sorted(sample.chunk_ns)
    assert sample.text_sha256 == hashlib.sha256("".join(chunks).encode()).hexdigest()
    assert (sample.prompt_tokens, sample.completion_tokens) == (7, len(chunks))
    # A bare CR at the very end may be the first half of a CRLF: the parser waits for the next read, which a
    # finished stream never sends, so `[DONE]` after CR line ends is seen only when something follows it.
    assert accumulator.done or end == "\r"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400), points=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_any_bytes_give_a_sample_or_the_parsers_own_error(data: bytes, points: list[int]) -> None:
    """Garbage from a broken server is a failed sample or StreamFormatError, never a crash of the client."""
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    try:
        for now_ns, piece in enumerate(cut(data, points), start=1):
            accumulator.feed(piece, now_ns)
    except StreamFormatError:
        return
    sample = accumulator.sample(0)
    assert sample.ok or sample.error is not None


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(texts, min_size=1, max_size=5),
    garbage=st.binary(min_size=1, max_size=40),
    position=st.integers(min_value=0, max_value=5),
)
def test_a_stream_with_a_broken_event_fails_with_the_parsers_own_error_or_a_sample(
    chunks: list[str], garbage: bytes, position: int
) -> None:
    """A valid stream with one event of junk spliced in: the parser's own error or a sample, nothing else."""
    payloads = [chat_event(text, compact=True, ascii_only=False) for text in chunks]
    payloads.insert(position % (len(payloads) + 1), garbage.replace(b"\n", b" ").replace(b"\r", b" "))
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    try:
        accumulator.feed(stream_bytes(payloads, "\n"), 1)
    except StreamFormatError:
        return
    assert accumulator.sample(0).chunk_ns
