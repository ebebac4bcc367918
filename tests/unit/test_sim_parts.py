"""The simulator's parts without a server: tokenizer, template, profiles, prefix cache, metrics, SSE bytes, and
the HTTP connection and application driven through a fake transport (no sockets)."""

from __future__ import annotations

import asyncio
import heapq
import json
import random
import time
from pathlib import Path
from typing import Any, cast

import pytest

from farm.sim import protocol, timing, tokenizer
from farm.sim.faults import ErrorDraw, FaultPlan
from farm.sim.http import Connection, Request, Response
from farm.sim.metrics import EngineMetrics, LatenessRecorder, build_1_2_5_buckets
from farm.sim.prefix_cache import PrefixCache, block_hashes
from farm.sim.profile import SimProfileError, load_profile, parse_override, profile_names
from farm.sim.routes import build_app


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("Hello, world!", 4), ("a  b\n\tc", 3), ("x=y+1;", 6), ("B-tree", 3), ("naïve café", 2)],
)
def test_token_count_is_one_per_word_or_punctuation(text: str, count: int) -> None:
    """One token per run of word characters or per punctuation character; whitespace is free."""
    assert tokenizer.count_tokens(text) == count
    assert len(tokenizer.split_tokens(text)) == count


def test_tokenizer_counts_a_132k_token_prompt_in_one_pass() -> None:
    """count_tokens agrees with split_tokens on a prompt as long as the prefill measurement sizes (its speed is
    bench material, not a test)."""
    text = "lorem ipsum, dolor sit. " * 22_000  # 6 tokens: lorem ipsum , dolor sit .
    assert tokenizer.count_tokens(text) == len(tokenizer.split_tokens(text)) == 132_000


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


class FakeTransport(asyncio.Transport):
    """Collects what is written; `close` marks it closing, as a real transport does."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False
        self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


class Recorder:
    """An application that records requests and answers each with its path (or later, when `defer` is set)."""

    def __init__(self, defer: bool = False) -> None:
        self.requests: list[Request] = []
        self.defer = defer

    def __call__(self, request: Request, conn: Connection) -> Response | None:
        self.requests.append(request)
        if self.defer:
            return None
        return Response(200, request.path.encode() + b"|" + request.body, "text/plain")


def connect(app: Any, clock: Any = time.perf_counter_ns) -> tuple[Connection, FakeTransport]:
    conn = Connection(app, clock=clock)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s" % (path.encode(), len(body), extra, body)


def test_request_split_across_reads_is_stamped_when_its_body_completes() -> None:
    """Bytes arriving in pieces make one request, stamped by the clock at the read that completed it."""
    app = Recorder()
    ticks = iter(range(100, 200))
    conn, transport = connect(app, clock=lambda: next(ticks))
    raw = post("/a", b'{"x": 1}')
    for i in range(0, len(raw), 7):
        conn.data_received(raw[i : i + 7])
    assert len(app.requests) == 1
    request = app.requests[0]
    # Tick 100 went to the connection's start (no request can arrive before it); 101 is the completing read.
    assert (request.method, request.path, request.body, request.arrival_ns) == ("POST", "/a", b'{"x": 1}', 101)
    assert request.headers["host"] == "x"
    assert transport.written.startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.written.endswith(b"\r\n\r\n/a|" + b'{"x": 1}')
    assert b"Content-Length: 11\r\n" in transport.written
    assert not transport.closing


def test_keep_alive_serves_several_requests_and_connection_close_ends_it() -> None:
    """Requests follow one another on a connection; `Connection: close` closes it after the answer."""
    app = Recorder()
    conn, transport = connect(app)
    conn.data_received(post("/one", b"1"))
    conn.data_received(b"GET /two?q=1 HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert [(r.method, r.path, r.query) for r in app.requests] == [("POST", "/one", ""), ("GET", "/two", "q=1")]
    assert transport.written.count(b"HTTP/1.1 200 OK") == 2
    assert transport.written.count(b"Connection: close") == 1
    assert transport.closing


def test_pipelined_request_waits_for_the_deferred_answer() -> None:
    """A second request in the same read is parsed only when the first's deferred answer is finished."""
    app = Recorder(defer=True)
    conn, transport = connect(app)
    conn.data_received(post("/first", b"a") + post("/second", b"b"))
    assert [r.path for r in app.requests] == ["/first"]
    conn.send(Response(200, b"first", "text/plain"))
    assert [r.path for r in app.requests] == ["/first", "/second"]
    conn.send(Response(200, b"second", "text/plain"))
    assert transport.written.index(b"first") < transport.written.index(b"second")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411),
        (b"POST /a HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
        (b"POST /a HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400),
        (b"NOT A REQUEST LINE AT ALL\r\n\r\n", 400),
        (b"GET /a HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET /a HTTP/1.1\r\nX-Big: " + b"a" * 70_000, 431),
    ],
    ids=["chunked-body", "too-large", "bad-length", "bad-request-line", "bad-header", "huge-head"],
)
def test_bad_requests_are_refused_and_the_connection_closed(raw: bytes, status: int) -> None:
    """Chunked bodies 411, oversized bodies 413, oversized heads 431, malformed requests 400; then close."""
    app = Recorder()
    conn, transport = connect(app)
    conn.data_received(raw)
    assert app.requests == []
    assert transport.written.startswith(b"HTTP/1.1 %d " % status)
    assert transport.closing


def test_http10_stream_is_not_chunked_and_closes() -> None:
    """An HTTP/1.0 client gets an unframed stream and `Connection: close`."""
    app = Recorder(defer=True)
    conn, _ = connect(app)
    conn.data_received(b"GET /s HTTP/1.0\r\n\r\n")
    head, chunked = conn.stream_head(200, {"Content-Type": "text/event-stream"})
    assert not chunked
    assert b"Transfer-Encoding" not in head
    assert b"Connection: close" in head


def fast_profile(**overrides: Any) -> Any:
    """The test profile made quick: 1 ms base latency, 2000 tok/s."""
    values = {"base_latency_s": 0.001, "decode_tok_s": {"code": 2000.0}, "default_decode_tok_s": 2000.0}
    return load_profile("test", overrides={**values, **overrides})


async def wait_until(condition: Any, timeout_s: float = 5.0) -> None:
    """Poll `condition()` while the loop runs (the scheduler writes between polls); fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.002)


async def drive(app: Any, raw: bytes, until: Any) -> tuple[Connection, FakeTransport]:
    """Feed one request to a fresh connection of `app` with its scheduler running, until `until()` holds."""
    app.start()
    try:
        conn, transport = connect(app)
        conn.data_received(raw)
        await wait_until(lambda: until(conn, transport))
        return conn, transport
    finally:
        await app.stop(timeout_s=0)


def test_streamed_completion_is_anchored_at_arrival_and_ends_with_the_terminator() -> None:
    """The stream's first chunk is due at arrival + TTFT exactly; the body ends with `0\\r\\n\\r\\n`."""
    app = build_app(fast_profile())
    body = json.dumps({"prompt": "hello", "max_tokens": 5, "ignore_eos": True, "stream": True}).encode()
    _, transport = asyncio.run(drive(app, post("/v1/completions", body), lambda c, t: t.written.endswith(b"0\r\n\r\n")))
    raw = bytes(transport.written)
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Transfer-Encoding: chunked" in raw
    assert raw.count(b"data: {") == 5
    assert raw.count(b"data: [DONE]") == 1
    record = app.state.records[0]
    assert record.status == "ok"
    assert record.first_due_ns == record.arrival_ns + round(record.ttft_model_s * 1e9)
    assert record.first_chunk_ns is not None
    assert record.first_chunk_ns >= record.first_due_ns
    assert app.state.running == 0


def test_non_streaming_answer_comes_when_the_last_token_is_due() -> None:
    """A non-streaming completion is answered once, after its last token's due time, with its usage."""
    app = build_app(fast_profile())
    body = json.dumps({"prompt": "hello", "max_tokens": 8, "ignore_eos": True}).encode()

    def answered(conn: Connection, transport: FakeTransport) -> bool:
        return b"\r\n\r\n{" in transport.written

    _, transport = asyncio.run(drive(app, post("/v1/completions", body), answered))
    head, _, payload = bytes(transport.written).partition(b"\r\n\r\n")
    assert b"Content-Length: %d" % len(payload) in head
    answer = json.loads(payload)
    assert answer["usage"]["completion_tokens"] == 8
    record = app.state.records[0]
    assert record.last_chunk_ns is not None
    assert record.last_chunk_ns >= record.arrival_ns + round((record.ttft_model_s + 7 / 2000) * 1e9)


def test_client_gone_mid_stream_is_aborted_and_the_scheduler_goes_on() -> None:
    """A stream whose client went away is aborted at its next step; the slot frees and later requests run."""
    app = build_app(fast_profile(decode_tok_s={"code": 200.0}, default_decode_tok_s=200.0))
    body = json.dumps({"prompt": "hello", "max_tokens": 50, "ignore_eos": True, "stream": True}).encode()

    async def scenario() -> tuple[FakeTransport, FakeTransport]:
        app.start()
        try:
            conn, gone = connect(app)
            conn.data_received(post("/v1/completions", body))
            await wait_until(lambda: b"data:" in gone.written)
            gone.closing = True
            conn.connection_lost(None)
            await wait_until(lambda: app.state.scheduler.aborted > 0)
            short = json.dumps({"prompt": "hi", "max_tokens": 2, "ignore_eos": True, "stream": True}).encode()
            conn2, after = connect(app)
            conn2.data_received(post("/v1/completions", short))
            await wait_until(lambda: after.written.endswith(b"0\r\n\r\n"))
            return gone, after
        finally:
            await app.stop(timeout_s=0)

    asyncio.run(asyncio.wait_for(scenario(), 10))
    first, second = app.state.records
    assert first.status == "aborted"
    assert 0 < first.completion_tokens < 50
    assert second.status == "ok"
    assert app.state.running == 0
    assert app.state.scheduler.decoding == 0


def test_lazy_spec_decode_steps_follow_plan_steps() -> None:
    """The scheduler draws a stream's steps one at a time, exactly as `timing.plan_steps` plans them."""
    app = build_app(fast_profile(num_speculative_tokens=3, acceptance_rate=0.6, decode_tok_s={"code": 20000.0}))
    body = json.dumps({"prompt": "hello", "max_tokens": 60, "ignore_eos": True, "stream": True}).encode()
    asyncio.run(drive(app, post("/v1/completions", body), lambda c, t: t.written.endswith(b"0\r\n\r\n")))
    profile = app.state.profile
    planned = timing.plan_steps(
        60,
        num_speculative_tokens=3,
        acceptance_rate=0.6,
        tokens_per_chunk=1,
        rng=random.Random(profile.seed * 1_000_003 + 1),
    )
    assert list(app.state.records[0].chunk_tokens) == [step.tokens for step in planned]
    assert len(planned) < 40  # several tokens per chunk


def test_routes_answer_404_and_405_in_fastapis_shape() -> None:
    """Unknown paths are 404, a known path with another method 405 with Allow, as vLLM's FastAPI answers."""
    app = build_app(fast_profile())
    conn, transport = connect(app)
    conn.data_received(b"GET /nowhere HTTP/1.1\r\n\r\n")
    conn.data_received(b"GET /v1/completions HTTP/1.1\r\n\r\n")
    answers = bytes(transport.written).split(b"HTTP/1.1 ")[1:]
    assert answers[0].startswith(b"404 ")
    assert answers[0].endswith(b'{"detail":"Not Found"}')
    assert answers[1].startswith(b"405 ")
    assert b"Allow: POST\r\n" in answers[1]


class _CountingTransport:
    """A transport that keeps every write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing to close."""


def test_a_late_stream_sends_several_steps_in_one_write() -> None:
    """A stream whose every step is overdue: the first step goes alone, then up to HOLD_STEPS steps per write;
    every step is stamped once, the bytes are all there in order, and the lateness counts every step."""
    from farm.sim.scheduler import HOLD_STEPS, RequestRecord, Scheduler, Stream

    profile = load_profile("test")
    lateness = LatenessRecorder()
    scheduler = Scheduler(profile, EngineMetrics(profile.served_model_name, profile.max_model_len, 0), lateness)
    body = b'{"model":"sim-test","prompt":"hi","max_tokens":20,"stream":true,"ignore_eos":true}'
    req = protocol.completion_request(protocol.parse_body(body, protocol.CompletionBody), profile)
    transport = _CountingTransport()
    record = RequestRecord("r", "completion", True, 0, 2, 0, None, 0.0, 200.0)
    stream = Stream(
        record=record,
        req=req,
        completion_tokens=20,
        step_rng=None,
        finish_reason="length",
        one_stream_rate=200.0,
        text_offset=0,
        transport=cast("asyncio.Transport", transport),  # the scheduler needs only its four methods
        templates=protocol.ChunkTemplates(req, "cmpl-r", 0),
    )
    scheduler.push(0, stream)  # due at the clock's origin: every step is long overdue
    while len(scheduler):
        due, _, popped = heapq.heappop(scheduler._heap)
        scheduler._advance(popped, due, time.perf_counter_ns())
    assert record.status == "ok"
    assert len(record.chunk_ns) == 20
    assert len(transport.writes) == 1 + -(-19 // (HOLD_STEPS + 1))
    assert transport.writes[0].count(b"data: ") == 1
    assert b"".join(transport.writes).count(b'"text":') == 20
    assert sum(lateness.counts) == 20
