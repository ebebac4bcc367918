"""The simulator's tokenizer and chat template: simple, deterministic, and the same everywhere it counts.

One token per match of `\\w+|[^\\w\\s]` (a run of word characters, or one punctuation character; whitespace is
free), so "Hello, world!" is 4 tokens. /tokenize, `usage.prompt_tokens` and the prefill cost all use it.

Completions: one BOS token first when the profile adds it and `add_special_tokens` is true (vLLM's default for
completions and for /tokenize with a prompt).

Chat (the template, counted in special tokens of one token each):
    BOS                                             1
    per message: <|role|> content <|end|>           2 + tokens(content)
    generation prompt <|assistant|>                 1   (add_generation_prompt, default true)
    chat_template_kwargs.enable_thinking == false   2   (an empty <think></think> block, Qwen3-style)
so /tokenize with `messages` (whose add_special_tokens defaults to false, as vLLM's) counts exactly what a
chat request's usage.prompt_tokens counts.

Token ids are the CRC-32 of the token text (31 bits), special tokens have ids below 16; /detokenize maps ids
back through the texts it has seen and joins them with spaces (whitespace is not kept: lossy on purpose).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")

BOS = "<s>"
SPECIAL_IDS: dict[str, int] = {
    BOS: 1,
    "<|end|>": 2,
    "<|assistant|>": 3,
    "<think>": 4,
    "</think>": 5,
    "<|system|>": 6,
    "<|user|>": 7,
    "<|tool|>": 8,
}
_ID_TO_SPECIAL = {v: k for k, v in SPECIAL_IDS.items()}
_SPECIAL_ID_LIMIT = 16


def count_tokens(text: str) -> int:
    """Number of tokens in `text` (no special tokens)."""
    return len(TOKEN_PATTERN.findall(text))


def split_tokens(text: str) -> list[str]:
    """The token texts of `text` (no special tokens)."""
    return TOKEN_PATTERN.findall(text)


def token_id(token: str) -> int:
    """A token's id: fixed for special tokens, CRC-32 (31 bits, above the special range) for the rest."""
    special = SPECIAL_IDS.get(token)
    if special is not None:
        return special
    return (zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF) | _SPECIAL_ID_LIMIT


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    raise ValueError("message content must be a string or a list of content parts")


def _role_token(role: str) -> str:
    token = f"<|{role}|>"
    return token if token in SPECIAL_IDS else "<|user|>"


def chat_prompt_tokens(
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> list[str]:
    """The token texts of a chat prompt through the simulator's template (see the module docstring)."""
    tokens = [BOS]
    for message in messages:
        tokens.append(_role_token(str(message.get("role", "user"))))
        tokens.extend(split_tokens(message_text(message.get("content"))))
        tokens.append("<|end|>")
    if add_generation_prompt:
        tokens.append("<|assistant|>")
        if chat_template_kwargs is not None and chat_template_kwargs.get("enable_thinking") is False:
            tokens.extend(("<think>", "</think>"))
    return tokens


def completion_prompt_tokens(prompt: str, *, add_bos: bool) -> list[str]:
    """The token texts of a completion prompt."""
    tokens = split_tokens(prompt)
    if add_bos:
        tokens.insert(0, BOS)
    return tokens


class Vocabulary:
    """Remembers the text of every id handed out, so /detokenize can map ids back."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = dict(_ID_TO_SPECIAL)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        ids = []
        texts = self._texts
        for token in tokens:
            tid = token_id(token)
            texts.setdefault(tid, token)
            ids.append(tid)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self._texts.get(tid, "<unk>") for tid in ids)
