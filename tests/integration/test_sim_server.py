"""The simulator over HTTP: vLLM's endpoints and shapes, the truth it records, its metrics, and its faults.

Each server is a real process (`python -m farm.sim serve`) on a free 127.0.0.1 port; requests use urllib, so
the client is as plain as it gets.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from farm.net import free_port

pytestmark = pytest.mark.slow

READY_DEADLINE_S = 20.0
PROSE = "Write an essay about the sea."


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    base: str
    started: float


def spawn(*args: str, module: tuple[str, ...] = ("-m", "farm.sim")) -> Sim:
    port = free_port()
    argv = [sys.executable, *module, "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return Sim(proc, f"http://127.0.0.1:{port}", time.monotonic())


def wait_ready(sim: Sim) -> None:
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if sim.proc.poll() is not None:
            raise AssertionError(f"the simulator exited: {sim.proc.stderr.read().decode() if sim.proc.stderr else ''}")
        with contextlib.suppress(OSError):
            if get(sim.base + "/health", timeout=1.0)[0] == 200:
                return
        time.sleep(0.05)
    raise AssertionError("the simulator did not become ready")


def stop(sim: Sim) -> None:
    if sim.proc.poll() is None:
        sim.proc.terminate()
        try:
            sim.proc.wait(5)
        except subprocess.TimeoutExpired:
            sim.proc.kill()
            sim.proc.wait(5)
    if sim.proc.stderr:
        sim.proc.stderr.close()


@contextlib.contextmanager
def running(*args: str) -> Iterator[Sim]:
    sim = spawn(*args)
    try:
        wait_ready(sim)
        yield sim
    finally:
        stop(sim)


def open_url(req: str | urllib.request.Request, timeout: float) -> Any:
    """urlopen, for the test server's own http://127.0.0.1 URLs only."""
    url = req if isinstance(req, str) else req.full_url
    assert url.startswith("http://127.0.0.1:")
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 (checked: http to 127.0.0.1)


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    try:
        with open_url(url, timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def send(url: str, body: bytes | dict[str, Any], method: str = "POST", timeout: float = 30.0) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310 (opened by open_url)
    try:
        with open_url(req, timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def post_json(url: str, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, raw = send(url, body)
    return status, json.loads(raw)


def sse_events(raw: bytes) -> list[Any]:
    """The `data:` payloads of an SSE body, JSON-decoded, with the final [DONE] kept as the string."""
    events: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition (labels given must all match)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} {labels}")


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    """The test profile: 20 ms base latency, 5 ms per token, EOS after 50 tokens."""
    with running("--profile", "test") as server:
        yield server


@pytest.fixture(scope="module")
def spec_sim() -> Iterator[Sim]:
    """The test profile with speculative decoding: K=4 drafts, half accepted."""
    with running("--profile", "test", "--set", "num_speculative_tokens=4", "--set", "acceptance_rate=0.5") as s:
        yield s


def test_health_version_and_models(sim: Sim) -> None:
    """/health is 200 and empty; /version and /v1/models answer in vLLM's shapes."""
    assert get(sim.base + "/health") == (200, b"")
    assert json.loads(get(sim.base + "/version")[1]) == {"version": "0.0.0+sim"}
    models = json.loads(get(sim.base + "/v1/models")[1])
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == "sim-test"
    assert (card["object"], card["owned_by"], card["root"], card["max_model_len"]) == (
        "model",
        "vllm",
        "sim-test",
        32768,
    )


def test_tokenize_agrees_with_completion_usage(sim: Sim) -> None:
    """/tokenize of a prompt counts what a completion's usage.prompt_tokens counts (BOS included)."""
    prompt = "Hello, world! " * 30
    status, tok = post_json(sim.base + "/tokenize", {"model": "sim-test", "prompt": prompt})
    assert status == 200
    assert tok["count"] == len(tok["tokens"]) == 1 + 120
    assert tok["max_model_len"] == 32768
    _, done = post_json(sim.base + "/v1/completions", {"prompt": prompt, "max_tokens": 2, "ignore_eos": True})
    assert done["usage"]["prompt_tokens"] == tok["count"]
    _, detok = post_json(sim.base + "/detokenize", {"tokens": tok["tokens"][:4]})
    assert detok["prompt"] == "<s> Hello , world"


def test_tokenize_messages_agrees_with_chat_usage(sim: Sim) -> None:
    """/tokenize with messages (and the same chat_template_kwargs) counts a chat request's prompt tokens."""
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": PROSE}]
    kwargs = {"enable_thinking": False}
    _, tok = post_json(sim.base + "/tokenize", {"messages": messages, "chat_template_kwargs": kwargs})
    _, done = post_json(
        sim.base + "/v1/chat/completions",
        {"messages": messages, "max_tokens": 3, "chat_template_kwargs": kwargs, "temperature": 0},
    )
    assert done["usage"]["prompt_tokens"] == tok["count"]
    _, plain = post_json(sim.base + "/tokenize", {"messages": messages})
    assert plain["count"] == tok["count"] - 2  # the empty think block


def test_streaming_completion_with_usage(sim: Sim) -> None:
    """A streamed completion: a token per chunk, finish_reason on the last, usage in a choices-free chunk."""
    body = {
        "model": "sim-test",
        "prompt": PROSE,
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    status, raw = send(sim.base + "/v1/completions", body)
    assert status == 200
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 12
    assert usage_chunk["usage"]["total_tokens"] == usage_chunk["usage"]["prompt_tokens"] + 12
    content = events[:-2]
    assert len(content) == 12
    assert all(e["object"] == "text_completion" and e["model"] == "sim-test" for e in content)
    assert [e["choices"][0]["finish_reason"] for e in content] == [None] * 11 + ["length"]
    text = "".join(e["choices"][0]["text"] for e in content)
    _, tok = post_json(sim.base + "/tokenize", {"prompt": text, "add_special_tokens": False})
    assert tok["count"] == 12


def test_streaming_chat_with_usage(sim: Sim) -> None:
    """A streamed chat: the role first, content chunks, then the usage chunk and [DONE]."""
    body = {
        "messages": [{"role": "user", "content": PROSE}],
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = sse_events(send(sim.base + "/v1/chat/completions", body)[1])
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events[:-1])
    assert [len(e["choices"]) for e in events[1:-1]] == [1] * 5 + [0]
    assert events[-2]["usage"]["completion_tokens"] == 5
    assert events[-1] == "[DONE]"


def test_streaming_without_include_usage_has_no_usage_chunk(sim: Sim) -> None:
    """Without stream_options the stream ends with the last content chunk and [DONE]."""
    body = {"prompt": PROSE, "max_tokens": 3, "ignore_eos": True, "stream": True}
    events = sse_events(send(sim.base + "/v1/completions", body)[1])
    assert len(events) == 4
    assert all("usage" not in e for e in events[:-1])


def test_non_streaming_completion_and_chat(sim: Sim) -> None:
    """Non-streaming answers carry the whole text, finish_reason and usage."""
    _, comp = post_json(sim.base + "/v1/completions", {"prompt": PROSE, "max_tokens": 7, "ignore_eos": True})
    assert comp["object"] == "text_completion"
    assert comp["choices"][0]["finish_reason"] == "length"
    assert comp["usage"]["completion_tokens"] == 7
    assert len(comp["choices"][0]["text"].split()) == 7
    _, chat = post_json(
        sim.base + "/v1/chat/completions",
        {"messages": [{"role": "user", "content": PROSE}], "max_tokens": 4, "ignore_eos": True},
    )
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert len(chat["choices"][0]["message"]["content"].split()) == 4


@pytest.mark.parametrize(
    ("extra", "tokens", "reason"),
    [
        ({"max_tokens": 100}, 50, "stop"),  # EOS after 50 in the test profile
        ({"max_tokens": 100, "min_tokens": 70}, 70, "stop"),
        ({"max_tokens": 100, "ignore_eos": True}, 100, "length"),
        ({"max_tokens": 30}, 30, "length"),
    ],
)
def test_eos_min_tokens_and_max_tokens(sim: Sim, extra: dict[str, Any], tokens: int, reason: str) -> None:
    """Without ignore_eos generation stops at the EOS point (at least min_tokens, at most max_tokens)."""
    _, out = post_json(sim.base + "/v1/completions", {"prompt": PROSE, **extra})
    assert out["usage"]["completion_tokens"] == tokens
    assert out["choices"][0]["finish_reason"] == reason


def test_greedy_output_is_repeatable(sim: Sim) -> None:
    """temperature 0 gives the same text for the same prompt."""
    body = {"prompt": PROSE, "max_tokens": 6, "temperature": 0}
    assert (
        post_json(sim.base + "/v1/completions", body)[1]["choices"][0]["text"]
        == (post_json(sim.base + "/v1/completions", body)[1]["choices"][0]["text"])
    )


def test_unknown_model_is_404_and_bad_json_is_400(sim: Sim) -> None:
    """vLLM's error shape: {"error": {message, type, param, code}}."""
    status, err = post_json(sim.base + "/v1/completions", {"model": "nope", "prompt": "x"})
    assert status == 404
    assert err["error"]["type"] == "NotFoundError"
    assert err["error"]["code"] == 404
    assert "nope" in err["error"]["message"]
    status, err = post_json(sim.base + "/v1/chat/completions", b"{not json")
    assert status == 400
    assert err["error"]["type"] == "BadRequestError"
    assert set(err["error"]) == {"message", "type", "param", "code"}


def test_metrics_names_and_counters_increase(sim: Sim) -> None:
    """/metrics serves vLLM's names with model_name and engine labels, and the counters move."""
    names = (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
    )
    before = get(sim.base + "/metrics")[1].decode()
    for name in names:
        assert re.search(rf'^{re.escape(name)}{{model_name="sim-test",engine="0"', before, re.M), name
    post_json(sim.base + "/v1/completions", {"prompt": PROSE, "max_tokens": 9, "ignore_eos": True})
    after = get(sim.base + "/metrics")[1].decode()
    assert metric(after, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total") == 9
    assert metric(after, "vllm:prompt_tokens_total") > metric(before, "vllm:prompt_tokens_total")
    assert metric(after, "vllm:request_success_total", finished_reason="length") == (
        metric(before, "vllm:request_success_total", finished_reason="length") + 1
    )
    assert (
        metric(after, "vllm:inter_token_latency_seconds_count")
        - metric(before, "vllm:inter_token_latency_seconds_count")
        == 8
    )
    assert "vllm:spec_decode" not in after


def test_spec_decode_chunks_and_counters(spec_sim: Sim) -> None:
    """With spec decoding a chunk carries several tokens, and the counters add up as vLLM's do."""
    before = get(spec_sim.base + "/metrics")[1].decode()
    body = {
        "prompt": PROSE,
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = sse_events(send(spec_sim.base + "/v1/completions", body)[1])
    content = [e for e in events[:-1] if e["choices"]]
    assert events[-2]["usage"]["completion_tokens"] == 400
    assert len(content) < 250  # mean 1 + 4 * 0.5 = 3 tokens per step
    assert sum(len(e["choices"][0]["text"].split()) for e in content) == 400
    after = get(spec_sim.base + "/metrics")[1].decode()

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    drafts = delta("vllm:spec_decode_num_drafts_total")
    assert drafts == len(content) - 1  # every step after the prefill token is one draft
    assert delta("vllm:spec_decode_num_draft_tokens_total") == 4 * drafts
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(4)]
    assert sum(per_pos) == accepted
    assert per_pos == sorted(per_pos, reverse=True)  # accepted drafts are a prefix
    assert accepted / (4 * drafts) == pytest.approx(0.5, abs=0.1)


def test_sim_requests_hold_the_truth_on_the_clients_clock(sim: Sim) -> None:
    """The server's timestamps share the client's monotonic clock and follow the profile's schedule.

    No tolerance is needed for the order: every stamp lies between the client's send and its last read, on a
    loaded machine too (a chunk is stamped before its write, so a preemption after the write cannot put the
    stamp after the client's read). The schedule is exact: the first chunk is due the model's TTFT after
    arrival and chunk i is due 5 ms later per token. No chunk is early, and none is later than the worst
    lateness the server reports of its own schedule (its histogram's buckets are 1% wide, hence the 1%).
    """
    assert send(sim.base + "/sim/requests", b"", method="DELETE")[0] == 204
    assert send(sim.base + "/sim/stats", b"", method="DELETE")[0] in (200, 204)
    started = time.perf_counter_ns()
    body = {"prompt": PROSE, "max_tokens": 20, "ignore_eos": True, "stream": True}
    send(sim.base + "/v1/completions", body)
    finished = time.perf_counter_ns()
    records = json.loads(get(sim.base + "/sim/requests?chunks=1")[1])["requests"]
    assert len(records) == 1
    rec = records[0]
    assert started < rec["arrival_ns"] < rec["first_chunk_ns"] <= rec["last_chunk_ns"] < finished
    assert (rec["chunk_count"], rec["completion_tokens"], rec["workload"]) == (20, 20, "prose")
    assert rec["cached_tokens"] == 0
    assert len(rec["chunk_ns"]) == 20
    # The schedule, exact to the nanosecond's rounding: due times come from the profile, not from the load.
    first_due = rec["first_due_ns"]
    assert abs((first_due - rec["arrival_ns"]) / 1e9 - rec["ttft_model_s"]) < 1e-6
    stats = json.loads(get(sim.base + "/sim/stats")[1])
    assert stats["lateness"]["chunks"] >= 20
    worst_late_ns = stats["lateness"]["max_us"] * 1.01 * 1000 + 1000
    for index, stamp in enumerate(rec["chunk_ns"]):
        due = first_due + round(index * 0.005 * 1e9)
        assert due <= stamp <= due + worst_late_ns, (index, stamp - due, worst_late_ns)


def test_repeated_prompt_hits_the_prefix_cache(sim: Sim) -> None:
    """The same long prompt twice: the second finds its full blocks cached, and the hit counter moves."""
    prompt = " ".join(f"w{i}" for i in range(400))  # unique words: no other test shares these blocks
    body = {"prompt": prompt, "max_tokens": 1}
    before = get(sim.base + "/metrics")[1].decode()
    send(sim.base + "/v1/completions", body)
    send(sim.base + "/v1/completions", body)
    records = json.loads(get(sim.base + "/sim/requests")[1])["requests"][-2:]
    assert [r["cached_tokens"] for r in records] == [0, 400]  # 401 tokens, 16-token blocks: 25 full blocks
    after = get(sim.base + "/metrics")[1].decode()
    assert metric(after, "vllm:prefix_cache_hits_total") - metric(before, "vllm:prefix_cache_hits_total") == 400


def test_sim_profile_and_gpu(sim: Sim) -> None:
    """/sim/profile carries the profile and its truth; /sim/gpu the simulated cards, with the power model's energy
    counter (mJ, only rising) and power (the test profile's 100 W idle: nothing runs between the tests' requests)."""
    prof = json.loads(get(sim.base + "/sim/profile")[1])
    assert prof["profile"]["served_model_name"] == "sim-test"
    assert prof["truth"]["decode_tok_s"]["code"] == 200.0
    assert prof["truth"]["ttft_s"]["32"] == pytest.approx(0.020 + 32e-6)
    cards = json.loads(get(sim.base + "/sim/gpu")[1])
    energy_mj = cards[0].pop("energy_mj")
    assert cards == [
        {
            "index": 0,
            "name": "simulated test GPU",
            "uuid": "GPU-sim-00000000",
            "memory_used_mib": 8192,
            "memory_total_mib": 16384,
            "power_mw": 100_000.0,
        }
    ]
    later = json.loads(get(sim.base + "/sim/gpu")[1])[0]["energy_mj"]
    assert 0 < energy_mj < later


def test_farm_cli_entry_point_serves() -> None:
    """`python -m farm sim serve` (what the worker runs) starts the simulator."""
    sim = spawn("--profile", "test", "--model", "renamed", module=("-m", "farm", "sim"))
    try:
        wait_ready(sim)
        assert json.loads(get(sim.base + "/v1/models")[1])["data"][0]["id"] == "renamed"
    finally:
        stop(sim)


def test_fault_startup_delay_keeps_the_port_closed() -> None:
    """With a start-up delay nothing listens until it has passed: every probe before then is refused."""
    sim = spawn("--profile", "test", "--fault-startup-delay", "1.5")
    try:
        refused = 0
        deadline = time.monotonic() + READY_DEADLINE_S
        while True:
            assert time.monotonic() < deadline, "the simulator never listened"
            try:
                status = get(sim.base + "/health", timeout=1.0)[0]
            except OSError:  # refused: nothing listens yet
                refused += 1
                time.sleep(0.05)
                continue
            opened = time.monotonic() - sim.started
            break
        assert status == 200
        assert refused > 0
        assert opened >= 1.5
    finally:
        stop(sim)


def test_fault_crash_after_marks_the_engine_dead_then_exits() -> None:
    """The engine dies: /health 503 and completions 500 while it lingers, then the process exits non-zero."""
    with running("--profile", "test", "--fault-crash-after", "0.3", "--fault-crash-linger", "1.0") as sim:
        deadline = time.monotonic() + 5
        while get(sim.base + "/health")[0] != 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        status, err = post_json(sim.base + "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert status == 500
        assert err["error"]["code"] == 500
        assert sim.proc.wait(5) == 1


def test_fault_error_rate_answers_some_500s() -> None:
    """A fraction of completions is answered 500 (repeatably for a seed), the rest normally."""
    with running("--profile", "test", "--fault-error-rate", "0.5", "--fault-seed", "1") as sim:
        statuses = [send(sim.base + "/v1/completions", {"prompt": "x", "max_tokens": 1})[0] for _ in range(20)]
    assert set(statuses) == {200, 500}
    assert 3 <= statuses.count(500) <= 17
    with running("--profile", "test", "--fault-error-rate", "0.5", "--fault-seed", "1") as sim:
        again = [send(sim.base + "/v1/completions", {"prompt": "x", "max_tokens": 1})[0] for _ in range(20)]
    assert again == statuses


def test_fault_hang_stops_answering() -> None:
    """After the hang, /health and completions never answer (the socket still accepts)."""
    with running("--profile", "test", "--fault-hang-after", "0.3") as sim:
        deadline = time.monotonic() + 10
        while True:  # /health answers until the hang, then a probe times out
            assert time.monotonic() < deadline, "the simulator never hung"
            try:
                open_url(sim.base + "/health", 0.5).close()
            except (TimeoutError, urllib.error.URLError):
                break
            time.sleep(0.02)  # a poll interval, not a guess at the hang's time
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            open_url(sim.base + "/health", 0.5)
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            send(sim.base + "/v1/completions", {"prompt": "x", "max_tokens": 1}, timeout=0.5)
        assert sim.proc.poll() is None


def raw_exchange(sim: Sim, data: bytes, answers: int = 1, timeout: float = 5.0) -> bytes:
    """Send raw bytes on one connection and read until `answers` complete Content-Length responses came back."""
    host, port = sim.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(data)
        received = b""
        while received.count(b"HTTP/1.1 ") < answers or not _complete(received, answers):
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def _complete(raw: bytes, answers: int) -> bool:
    rest = raw
    for _ in range(answers):
        head, sep, rest = rest.partition(b"\r\n\r\n")
        match = re.search(rb"Content-Length: (\d+)", head)
        if not sep or match is None or len(rest) < int(match.group(1)):
            return False
        rest = rest[int(match.group(1)) :]
    return True


def test_keep_alive_routes_and_refusals_over_one_socket(sim: Sim) -> None:
    """Two requests on one connection both answered; 404 and 405 in FastAPI's shape; a chunked body is 411."""
    raw = raw_exchange(sim, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 2)
    assert raw.count(b"HTTP/1.1 200 OK") == 2
    assert b'"0.0.0+sim"' in raw
    assert b'"sim-test"' in raw
    assert get(sim.base + "/no/such/route") == (404, b'{"detail":"Not Found"}')
    assert get(sim.base + "/v1/completions")[0] == 405
    chunked = b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    assert raw_exchange(sim, chunked).startswith(b"HTTP/1.1 411 ")


def test_client_leaving_mid_stream_leaves_the_server_serving(sim: Sim) -> None:
    """A client that disconnects mid-stream is aborted; streams and requests after it are served normally."""
    host, port = sim.base.removeprefix("http://").split(":")
    body = json.dumps({"prompt": PROSE, "max_tokens": 200, "ignore_eos": True, "stream": True}).encode()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    before = json.loads(get(sim.base + "/sim/stats")[1])["aborted"]
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(request)
        received = b""
        while b"data: {" not in received:
            chunk = conn.recv(65536)
            assert chunk, received
            received += chunk
    deadline = time.monotonic() + 5
    while json.loads(get(sim.base + "/sim/stats")[1])["aborted"] == before:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    events = sse_events(send(sim.base + "/v1/completions", {"prompt": PROSE, "max_tokens": 3, "stream": True})[1])
    assert events[-1] == "[DONE]"
    stats = json.loads(get(sim.base + "/sim/stats")[1])
    assert (stats["running"], stats["decoding"]) == (0, 0)


def test_port_zero_logs_the_bound_port() -> None:
    """With --port 0 the simulator listens on a free port and says which in its `listening` log line."""
    argv = [sys.executable, "-m", "farm.sim", "serve", "--profile", "test", "--port", "0"]
    proc = subprocess.Popen([*argv, "--fault-startup-delay", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + READY_DEADLINE_S
        line = b""
        while b'"listening"' not in line:
            assert time.monotonic() < deadline
            line = proc.stderr.readline()
        port = json.loads(line)["port"]
        assert port > 0
        assert get(f"http://127.0.0.1:{port}/health") == (200, b"")
    finally:
        proc.terminate()
        assert proc.wait(5) == 0 or proc.returncode < 0
        if proc.stderr:
            proc.stderr.close()
