"""The incremental SSE parser and the per-read work of the streaming client (farm.bench.sse), no sockets."""

from __future__ import annotations

import hashlib
import itertools
import json
import random

import pytest

from farm.bench.sse import (
    CHAT_TEXT_KEYS,
    COMPLETION_TEXT_KEYS,
    SSEDecoder,
    StreamAccumulator,
    StreamFormatError,
    extract_text,
)

HEAD = {"id": "chatcmpl-8c1f", "object": "chat.completion.chunk", "created": 1767225600, "model": "m"}

TRICKY_TEXTS = [
    "def insert(self, key):",
    ' say "hi"',
    "\n",
    "\\",
    'end\\"',
    "tab\there",
    " é",
    " 🙂",
    "日本語",
    "</think>",
    '{"content": "nested"}',
    "\u2028",
]


def chat_chunk(content: str | None, *, role: bool = False, compact: bool = True, ascii_only: bool = False) -> bytes:
    """One chat chunk as vLLM writes it (compact, raw UTF-8) or as `json.dumps` does by default."""
    delta: dict[str, str | None] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    body = {**HEAD, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(body, ensure_ascii=ascii_only, separators=separators).encode()


def completion_chunk(text: str) -> bytes:
    """One completions chunk as vLLM writes it."""
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None, "stop_reason": None}
    return json.dumps({**HEAD, "object": "text_completion", "choices": [choice]}, ensure_ascii=False).encode()


def usage_chunk(prompt: int, completion: int) -> bytes:
    """The final chunk with `stream_options.include_usage`: no choices, the usage."""
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}
    return json.dumps({**HEAD, "choices": [], "usage": usage}).encode()


def events(*payloads: bytes, newline: bytes = b"\n") -> bytes:
    """SSE framing of each payload as one `data:` event."""
    return b"".join(b"data: " + payload + newline + newline for payload in payloads)


def vllm_stream(texts: list[str], *, newline: bytes = b"\n", compact: bool = True, ascii_only: bool = False) -> bytes:
    """A whole chat stream: the role chunk, one chunk per text, a final empty delta, usage, [DONE]."""
    payloads = [chat_chunk("", role=True, compact=compact)]
    payloads += [chat_chunk(text, compact=compact, ascii_only=ascii_only) for text in texts]
    payloads += [chat_chunk("", compact=compact), usage_chunk(12, len(texts)), b"[DONE]"]
    return events(*payloads, newline=newline)


def sha(texts: list[str]) -> str:
    return hashlib.sha256("".join(texts).encode()).hexdigest()


def feed_in_pieces(stream: bytes, cuts: list[int], keys: tuple[bytes, ...] = CHAT_TEXT_KEYS) -> StreamAccumulator:
    """Feed `stream` cut at `cuts`, stamping read i with time i."""
    accumulator = StreamAccumulator(keys)
    bounds = [0, *sorted(cuts), len(stream)]
    for index, (begin, end) in enumerate(itertools.pairwise(bounds)):
        if end > begin:
            accumulator.feed(stream[begin:end], index)
    return accumulator


@pytest.mark.parametrize(
    ("data", "payloads"),
    [
        (b"data: a\n\n", [b"a"]),
        (b"data:a\n\n", [b"a"]),
        (b"data: a\r\n\r\ndata: b\r\n\r\n", [b"a", b"b"]),
        # A final CR waits for the next read: it may be the first half of a CRLF.
        (b"data: a\r\rdata: b\r\r", [b"a"]),
        (b"data: a\r\rdata: b\r\r\r", [b"a", b"b"]),
        (b": ping\n\ndata: a\n\n", [b"a"]),
        (b": comment\ndata: a\n\n", [b"a"]),
        (b"event: message\nid: 7\ndata: a\n\n", [b"a"]),
        (b"data: first\ndata: second\n\n", [b"first\nsecond"]),
        (b"data: a\n\ndata: b\n\ndata: c", [b"a", b"b"]),
        (b"id: 1\n\n", []),
        (b"\n\n\ndata:  two spaces\n\n", [b" two spaces"]),
    ],
)
def test_decoder_events(data: bytes, payloads: list[bytes]) -> None:
    """SSE framing: `data:` with or without a space, comments, other fields, CRLF and CR, multi-line data."""
    assert SSEDecoder().feed(data) == payloads


@pytest.mark.parametrize(
    "data",
    [
        b"data: a\n\n",
        b"data: a\r\n\r\n",
        b": c\r\ndata: x\r\ndata: y\r\n\r\ndata: z\n\n",
        b"data: a\r\rdata: b\r\r",
    ],
)
def test_decoder_gives_the_same_events_at_every_split(data: bytes) -> None:
    """Cut in two at every byte (including between a CR and its LF), the events are the same."""
    whole = SSEDecoder().feed(data)
    for cut in range(1, len(data)):
        decoder = SSEDecoder()
        assert decoder.feed(data[:cut]) + decoder.feed(data[cut:]) == whole, cut


@pytest.mark.parametrize("text", TRICKY_TEXTS)
@pytest.mark.parametrize(("compact", "ascii_only"), [(True, False), (False, False), (True, True), (False, True)])
def test_extract_text_matches_json(text: str, compact: bool, ascii_only: bool) -> None:
    """The targeted extraction gives the UTF-8 of what json.loads reads, for escapes, unicode and spacing."""
    payload = chat_chunk(text, compact=compact, ascii_only=ascii_only)
    decoded = json.loads(payload)["choices"][0]["delta"]["content"]
    assert extract_text(payload, CHAT_TEXT_KEYS) == decoded.encode()


@pytest.mark.parametrize(
    "payload",
    [
        chat_chunk("", role=True),
        chat_chunk(None),
        chat_chunk(""),
        usage_chunk(3, 4),
        b'{"choices":[{"delta":{"content":null}}]}',
        b'{"choices":[{"delta":{"content" : 5}}]}',
        # the key's name inside a string value is not the key
        b'{"model":"a\\"content\\":\\"x","choices":[{"delta":{}}]}',
        b'{"model":"ends with \\"content","choices":[{"delta":{}}]}',
        b'{"choices":[{"delta":{"reasoning_content_len":"x"}}]}',
    ],
)
def test_extract_text_finds_no_content(payload: bytes) -> None:
    """Role chunks, empty deltas, usage, null and look-alike keys carry no content."""
    assert extract_text(payload, CHAT_TEXT_KEYS) == b""


def test_extract_text_reads_reasoning_and_completions() -> None:
    """A thinking model's reasoning counts as content; completions carry `text`."""
    reasoning = b'{"choices":[{"delta":{"reasoning_content":"hmm"}}]}'
    assert extract_text(reasoning, CHAT_TEXT_KEYS) == b"hmm"
    assert extract_text(completion_chunk(' "x"'), COMPLETION_TEXT_KEYS) == b' "x"'
    assert extract_text(completion_chunk(""), COMPLETION_TEXT_KEYS) == b""


def test_extract_text_rejects_an_unterminated_string() -> None:
    """A chunk cut inside its string is a format error, not a silent empty text."""
    with pytest.raises(StreamFormatError):
        extract_text(b'{"choices":[{"delta":{"content":"abc', CHAT_TEXT_KEYS)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize(("compact", "ascii_only"), [(True, False), (False, True)])
def test_accumulator_whole_stream(newline: bytes, compact: bool, ascii_only: bool) -> None:
    """One read holding a whole vLLM-shaped stream: every content chunk stamped, usage read, text hashed."""
    stream = vllm_stream(TRICKY_TEXTS, newline=newline, compact=compact, ascii_only=ascii_only)
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    accumulator.feed(stream, 42)
    result = accumulator.sample(started_ns=0)
    assert result.ok
    assert result.chunk_ns == (42,) * len(TRICKY_TEXTS)
    assert (result.prompt_tokens, result.completion_tokens) == (12, len(TRICKY_TEXTS))
    assert result.text_sha256 == sha(TRICKY_TEXTS)
    assert accumulator.done


@pytest.mark.parametrize("seed", range(40))
def test_accumulator_at_random_splits(seed: int) -> None:
    """Cut anywhere (in events, in UTF-8 characters, between CR and LF): same hash, same chunk order."""
    generator = random.Random(seed)
    texts = [generator.choice(TRICKY_TEXTS) for _ in range(30)]
    newline = b"\r\n" if seed % 3 == 0 else b"\n"
    stream = vllm_stream(texts, newline=newline, compact=seed % 2 == 0)
    cuts = generator.sample(range(1, len(stream)), k=generator.randint(1, 60))
    result = feed_in_pieces(stream, cuts).sample(started_ns=0)
    assert result.ok
    assert result.text_sha256 == sha(texts)
    assert len(result.chunk_ns) == len(texts)
    assert list(result.chunk_ns) == sorted(result.chunk_ns)
    assert result.completion_tokens == len(texts)


def test_accumulator_stamps_each_chunk_with_its_read() -> None:
    """A chunk is stamped with the time of the read that completed it, not the read that began it."""
    stream = vllm_stream(["a", "b", "c"])
    first = stream.index(b"data: ", 1)  # the start of chunk "a"
    second = stream.index(b"data: ", first + 1)
    third = stream.index(b"data: ", second + 1)
    # read 0: role chunk and half of "a"; read 1: rest of "a" and all of "b"; read 2: the rest
    result = feed_in_pieces(stream, [first + 10, third]).sample(started_ns=0)
    assert result.chunk_ns == (1, 1, 2)
    assert (result.first_token_ns, result.last_token_ns) == (1, 2)


def test_accumulator_completions_stream() -> None:
    """The completions API: `text` fields, usage at the end."""
    stream = events(completion_chunk("Hello"), completion_chunk(", "), completion_chunk('"w"'), usage_chunk(5, 3))
    accumulator = StreamAccumulator(COMPLETION_TEXT_KEYS)
    accumulator.feed(stream, 7)
    result = accumulator.sample(started_ns=1)
    assert result.ok
    assert result.text_sha256 == sha(["Hello", ", ", '"w"'])
    assert result.chunk_ns == (7, 7, 7)


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (events(chat_chunk("a"), b"[DONE]"), "no usage"),
        (events(chat_chunk("", role=True), usage_chunk(3, 0), b"[DONE]"), "no content"),
        (events(b'{"object":"error","message":"out of KV cache","type":"Internal","code":500}'), "out of KV"),
        (events(chat_chunk("a"), b'{"error":{"message":"engine died","code":500}}'), "engine died"),
    ],
)
def test_accumulator_failures_are_samples(stream: bytes, error: str) -> None:
    """No usage, no content, or an error event: the sample says so (failures are data)."""
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    accumulator.feed(stream, 5)
    result = accumulator.sample(started_ns=0)
    assert not result.ok
    assert result.error is not None
    assert error in result.error


def test_accumulator_rejects_a_chunk_that_is_not_json() -> None:
    """Garbage that mentions usage is a format error."""
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    with pytest.raises(StreamFormatError):
        accumulator.feed(b'data: {"usage": oops\n\n', 1)


def test_accumulator_rejects_a_chunk_cut_after_its_key() -> None:
    """An event that ends right after `"content":"` is a format error, not an IndexError."""
    accumulator = StreamAccumulator(CHAT_TEXT_KEYS)
    with pytest.raises(StreamFormatError):
        accumulator.feed(b'data: {"choices":[{"delta":{"content":"\n\n', 1)
