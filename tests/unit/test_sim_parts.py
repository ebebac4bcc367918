"""The simulator's parts without a server: tokenizer, template, profiles, prefix cache, metrics, SSE bytes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from farm.sim import protocol, tokenizer
from farm.sim.faults import ErrorDraw, FaultPlan
from farm.sim.metrics import EngineMetrics, LatenessRecorder, build_1_2_5_buckets
from farm.sim.prefix_cache import PrefixCache, block_hashes
from farm.sim.profile import SimProfileError, load_profile, parse_override, profile_names


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("Hello, world!", 4), ("a  b\n\tc", 3), ("x=y+1;", 6), ("B-tree", 3), ("naïve café", 2)],
)
def test_token_count_is_one_per_word_or_punctuation(text: str, count: int) -> None:
    """One token per run of word characters or per punctuation character; whitespace is free."""
    assert tokenizer.count_tokens(text) == count
    assert len(tokenizer.split_tokens(text)) == count


def test_tokenizer_is_fast_on_a_110k_token_prompt() -> None:
    """132k tokens count in well under 100 ms (the prefill measurement sizes prompts this long)."""
    text = "lorem ipsum, dolor sit. " * 22_000  # 6 tokens: lorem ipsum , dolor sit .
    started = time.perf_counter()
    count = tokenizer.count_tokens(text)
    tokens = tokenizer.split_tokens(text)
    elapsed = time.perf_counter() - started
    assert count == len(tokens) == 132_000
    assert elapsed < 0.2  # both passes; one pass is well under 100 ms


def test_chat_template_overhead() -> None:
    """BOS + (2 per message + content) + 1 generation prompt; thinking off adds an empty think block (2)."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, world!"}]
    content = 3 + 4
    assert len(tokenizer.chat_prompt_tokens(messages)) == 1 + 2 * 2 + content + 1
    off = tokenizer.chat_prompt_tokens(messages, chat_template_kwargs={"enable_thinking": False})
    assert len(off) == 1 + 2 * 2 + content + 1 + 2
    assert len(tokenizer.chat_prompt_tokens(messages, add_generation_prompt=False)) == 1 + 2 * 2 + content


def test_chat_content_parts_count_their_text() -> None:
    """A list of content parts counts its text parts."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "image_url"}]}]
    assert len(tokenizer.chat_prompt_tokens(messages)) == 1 + 2 + 2 + 1


def test_vocabulary_round_trip() -> None:
    """Ids are stable and map back to their texts (joined with spaces)."""
    vocab = tokenizer.Vocabulary()
    ids = vocab.encode(tokenizer.completion_prompt_tokens("Hello, world", add_bos=True))
    assert ids[0] == tokenizer.SPECIAL_IDS[tokenizer.BOS]
    assert ids[1:] == [tokenizer.token_id("Hello"), tokenizer.token_id(","), tokenizer.token_id("world")]
    assert vocab.decode(ids) == "<s> Hello , world"
    assert vocab.decode([123]) == "<unk>"


def test_generated_words_are_one_token_each() -> None:
    """Re-tokenizing generated text gives back the completion token count."""
    text = protocol.output_text(5, 0, 300).decode()
    assert tokenizer.count_tokens(text) == 300


def test_shipped_profiles_load() -> None:
    """Every shipped profile validates; the seed and test profiles are there."""
    names = profile_names()
    assert {"seed-rtx-pro-6000-tp2", "test"} <= set(names)
    for name in names:
        assert load_profile(name).name == name


def test_seed_profile_identity() -> None:
    """The seed profile claims the seed's model, version, context and two 96 GB cards."""
    p = load_profile("seed-rtx-pro-6000-tp2")
    assert p.served_model_name == "deepseek-ai/DeepSeek-V4-Flash-0731"
    assert p.version == "0.11.2.dev279+eldritch.enlightenment.v45c1582.b12xf3686b5.cu132.20260704"
    assert p.max_model_len == 262_144
    assert (p.gpu_count, p.gpu_memory_used_mib, p.gpu_memory_total_mib) == (2, 96_799, 97_887)
    assert (p.num_speculative_tokens, p.acceptance_rate) == (5, 0.486)


@pytest.mark.parametrize(
    ("item", "key", "value"),
    [
        ("contention=0.1", "contention", 0.1),
        ("decode_tok_s.code=300", "decode_tok_s.code", 300),
        ("served_model_name=my/model", "served_model_name", "my/model"),
        ('served_model_name="quoted"', "served_model_name", "quoted"),
        ("add_bos=false", "add_bos", False),
    ],
)
def test_parse_override(item: str, key: str, value: object) -> None:
    """--set values are TOML values, or strings when they are not."""
    assert parse_override(item) == (key, value)


def test_overrides_reach_nested_tables() -> None:
    """A dotted override changes one entry and keeps the others."""
    p = load_profile("test", overrides={"decode_tok_s.code": 300.0, "num_speculative_tokens": 3})
    assert p.decode_tok_s == {"code": 300.0, "prose": 200.0, "math": 200.0}
    assert p.num_speculative_tokens == 3


def test_bad_profile_names_the_field(tmp_path: Path) -> None:
    """An unknown field is refused with its name and the file."""
    path = tmp_path / "bad.toml"
    path.write_text((Path(__file__).parents[2] / "farm/sim/profiles/test.toml").read_text() + "\nbogus = 1\n")
    with pytest.raises(SimProfileError, match="bogus") as info:
        load_profile(path=path)
    assert info.value.source == str(path)


def test_unknown_profile_name() -> None:
    """An unknown profile name lists the known ones."""
    with pytest.raises(SimProfileError, match="seed-rtx-pro-6000-tp2"):
        load_profile("nope")


def test_prefix_cache_hits_full_blocks_and_never_the_last_token() -> None:
    """A repeated prompt hits every full block except one that would include its last token."""
    tokens = [f"t{i}" for i in range(64)]
    cache = PrefixCache(capacity_blocks=100, block_tokens=16)
    hashes = block_hashes(tokens, 16)
    assert len(hashes) == 3  # (64 - 1) // 16
    assert cache.lookup(hashes) == 0
    cache.insert(hashes)
    assert cache.lookup(hashes) == 48
    longer = tokens + ["x"] * 20
    assert cache.lookup(block_hashes(longer, 16)) == 48
    changed = ["other", *tokens[1:]]
    assert cache.lookup(block_hashes(changed, 16)) == 0  # a different first block changes every hash after it


def test_prefix_cache_evicts_least_recently_used() -> None:
    """Beyond capacity the oldest blocks go first."""
    cache = PrefixCache(capacity_blocks=2, block_tokens=1)
    a = block_hashes(["a", "x"], 1)
    b = block_hashes(["b", "x"], 1)
    c = block_hashes(["c", "x"], 1)
    cache.insert(a)
    cache.insert(b)
    assert cache.lookup(a) == 1  # refreshes a
    cache.insert(c)
    assert (cache.lookup(a), cache.lookup(b), cache.lookup(c)) == (1, 0, 1)


def test_lateness_percentiles() -> None:
    """Exact microseconds below 2 ms; log buckets 1% wide above."""
    rec = LatenessRecorder()
    assert rec.percentile_us(0.5) is None
    for us in range(1, 101):
        rec.record_ns(us * 1000)
    assert rec.percentile_us(0.5) == 50.0
    assert rec.percentile_us(0.99) == 99.0
    rec.record_ns(-5000)  # written early counts as on time
    rec.record_ns(50_000_000)
    summary = rec.summary()
    assert summary["chunks"] == 102
    assert summary["max_us"] == pytest.approx(50_000, rel=0.011)
    rec.clear()
    assert rec.summary()["chunks"] == 0


def test_metrics_render_vllm_names_and_spec_counters() -> None:
    """The exposition carries vLLM's names, labels and the per-position spec counters."""
    m = EngineMetrics("org/model", 1000, num_speculative_tokens=3)
    m.observe_draft(2)
    m.observe_draft(0)
    m.ttft.observe(0.03)
    text = m.render()
    labels = 'model_name="org/model",engine="0"'
    assert f"vllm:spec_decode_num_drafts_total{{{labels}}} 2.0" in text
    assert f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} 6.0" in text
    assert f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} 2.0" in text
    assert f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="1"}} 1.0' in text
    assert f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="2"}} 0.0' in text
    assert f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.04"}} 1.0' in text
    assert f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.02"}} 0.0' in text
    assert f"vllm:time_to_first_token_seconds_count{{{labels}}} 1.0" in text
    assert "vllm:spec_decode" not in EngineMetrics("m", 1000, num_speculative_tokens=0).render()


def test_1_2_5_buckets() -> None:
    """vLLM's token-count buckets."""
    assert build_1_2_5_buckets(100) == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def test_stream_chunks_are_valid_json_in_vllm_shapes() -> None:
    """Template-built chat chunks parse as JSON with vLLM's fields, the role first and usage last."""
    profile = load_profile("test")
    body = protocol.ChatBody.model_validate(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    req = protocol.chat_request(body, profile)
    t = protocol.ChunkTemplates(req, "chatcmpl-1", 7)
    events = [t.opening, t.chunk(b" a"), t.final_chunk(b" b", "length"), t.usage_chunk(5, 2)]
    parsed = [json.loads(e[len(b"data: ") : -2]) for e in events]
    assert parsed[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert parsed[1]["choices"][0]["delta"] == {"content": " a"}
    assert parsed[2]["choices"][0]["finish_reason"] == "length"
    assert parsed[3]["choices"] == []
    assert parsed[3]["usage"]["total_tokens"] == 7
    assert all(p["object"] == "chat.completion.chunk" and p["model"] == "sim-test" for p in parsed)


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"prompt": "x", "model": "other"}, 404, "does not exist"),
        ({"prompt": "x", "max_tokens": 0}, 400, "at least 1"),
        ({"prompt": "x", "max_tokens": 40_000}, 400, "maximum context length"),
        ({"prompt": "x", "stream_options": {"include_usage": True}}, 400, "stream=True"),
        ({"prompt": "x", "n": 2}, 400, "n=1"),
        ({}, 400, "prompt"),
    ],
)
def test_completion_request_errors(body: dict[str, object], status: int, fragment: str) -> None:
    """Bad requests are refused with vLLM's status and a message that says why."""
    profile = load_profile("test")
    with pytest.raises(protocol.ApiError) as info:
        protocol.completion_request(protocol.CompletionBody.model_validate(body), profile)
    assert info.value.status == status
    assert fragment in info.value.message


def test_bad_json_is_a_400_in_vllm_shape() -> None:
    """Unparseable JSON: 400, BadRequestError, code 400."""
    with pytest.raises(protocol.ApiError) as info:
        protocol.parse_body(b"{nope", protocol.CompletionBody)
    assert info.value.body()["error"]["type"] == "BadRequestError"
    assert info.value.body()["error"]["code"] == 400


def test_error_draw_is_deterministic_and_near_its_rate() -> None:
    """The same seed fails the same requests; the fraction is near the rate."""
    first = [ErrorDraw(0.25, 3).next_fails() for _ in range(1)]
    draws_a = ErrorDraw(0.25, 3)
    draws_b = ErrorDraw(0.25, 3)
    a = [draws_a.next_fails() for _ in range(4000)]
    b = [draws_b.next_fails() for _ in range(4000)]
    assert a == b
    assert a[:1] == first
    assert sum(a) / len(a) == pytest.approx(0.25, abs=0.03)
    assert not any(ErrorDraw(0.0, 1).next_fails() for _ in range(100))


def test_fault_plan_validates() -> None:
    """A rate outside 0..1 or a negative time is refused."""
    with pytest.raises(ValueError, match="error_rate"):
        FaultPlan(error_rate=1.5)
    with pytest.raises(ValueError, match="crash_after_s"):
        FaultPlan(crash_after_s=-1)
