"""The JSON bodies `StreamRequest` sends: a conversation's history as chat messages, engine fields as given."""

from __future__ import annotations

from farm.bench.stream import StreamRequest


def test_history_goes_before_the_prompt_as_user_and_assistant_messages() -> None:
    """Each earlier turn is a user message and its answer an assistant one, in order, then the new prompt."""
    request = StreamRequest(prompt="third", max_tokens=4, api="chat", history=(("first", "a1"), ("second", "a2")))
    assert request.body("m")["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "third"},
    ]


def test_a_single_turn_chat_request_is_one_user_message() -> None:
    assert StreamRequest(prompt="hi", max_tokens=1).body("m")["messages"] == [{"role": "user", "content": "hi"}]


def test_extra_fields_are_added_to_the_body_and_absent_by_default() -> None:
    """llama.cpp's `cache_prompt: false` on a cold request reaches the body as it is; a plain request has none."""
    cold = StreamRequest(prompt="p", max_tokens=1, api="completions", extra={"cache_prompt": False})
    assert cold.body("m")["cache_prompt"] is False
    assert cold.body("m")["prompt"] == "p"
    assert "cache_prompt" not in StreamRequest(prompt="p", max_tokens=1, api="completions").body("m")


def test_a_request_with_engine_fields_still_hashes_and_pickles() -> None:
    """Requests go to load-generator processes (pickled) and may be set members: the fields do not break that."""
    import pickle

    request = StreamRequest(prompt="p", max_tokens=1, history=(("a", "b"),), extra={"cache_prompt": False})
    assert pickle.loads(pickle.dumps(request)) == request  # noqa: S301 - our own bytes
    assert hash(request) == hash(StreamRequest(prompt="p", max_tokens=1, history=(("a", "b"),)))
