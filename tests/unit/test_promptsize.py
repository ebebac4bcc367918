"""Sizing a prompt to an exact token count, through the TokenCounter seam (a fake tokenizer, no server)."""

from __future__ import annotations

import asyncio
import re

import pytest

from farm.bench.promptsize import repeated, sized_prompt, unique_prefix
from farm.errors import MeasurementError


class WordCounter:
    """Counts words and punctuation, as the simulator does; `merge` makes one word count as `merge` tokens."""

    def __init__(self, merge: dict[str, int] | None = None) -> None:
        self.calls = 0
        self.merge = merge or {}

    async def count_tokens(self, text: str) -> int:
        self.calls += 1
        return sum(self.merge.get(t, 1) for t in re.findall(r"\w+|[^\w\s]", text))


@pytest.mark.parametrize("target", [5, 17, 100, 1_000, 20_000])
def test_sized_prompt_hits_the_exact_count(target: int) -> None:
    """For word-like tokenizers every target above the head's own length is hit exactly, in few round trips."""
    counter = WordCounter()
    sized = asyncio.run(sized_prompt(counter, target, head="Task.", filler="alpha beta, gamma. "))
    assert sized.tokens == target
    assert asyncio.run(counter.count_tokens(sized.text)) == target
    assert counter.calls <= 34


def test_a_head_longer_than_the_target_is_a_clear_error() -> None:
    """The head alone over the target: the error says how long the head is."""
    with pytest.raises(MeasurementError, match="head alone is 6 tokens, more than the 3 asked"):
        asyncio.run(sized_prompt(WordCounter(), 3, head="one two three four five six", filler="x "))


def test_a_gap_no_cut_can_close_is_an_error_not_a_wrong_length() -> None:
    """When every filler word is worth 3 tokens and no tail fits, sizing fails instead of measuring 1 off."""
    counter = WordCounter(merge={t: 3 for t in ("w", "a", "the", "1", ".", ",", "!")})
    with pytest.raises(MeasurementError, match="no prompt of exactly"):
        asyncio.run(sized_prompt(counter, 11, head="h", filler="w w w "))


def test_unique_prefixes_differ_and_stay_short() -> None:
    """Two prefixes never match, and each is a handful of words (room for short prompts)."""
    first, second = unique_prefix(), unique_prefix()
    assert first != second
    assert len(re.findall(r"\w+|[^\w\s]", first)) <= 4


@pytest.mark.parametrize(("chars", "expected"), [(0, ""), (3, "abc"), (7, "abcdeab"), (10, "abcdeabcde")])
def test_repeated_cuts_the_filler_to_the_character(chars: int, expected: str) -> None:
    """The filler is repeated and cut to exactly `chars` characters."""
    assert repeated("abcde", chars) == expected
