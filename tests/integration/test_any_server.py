"""`farm bench URL` against a plain OpenAI-compatible server: the simulator with no /tokenize.

Most OpenAI-compatible servers (Ollama, LM Studio, hosted endpoints) have no tokenizer endpoint; the farm then
sizes its prompts from `usage.prompt_tokens` of one-token completions. The simulator's timing is known, so every
plan section's figures are checked against it (within 2%), and the provenance must say how prompts were sized.
The simulator also makes decode slower with context (`decode_s_per_context_token`), so decode at depth has a
known truth, and its prefix-cache counters give the hit rate each measurement must carry.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.bench.multiproc import timed_placement
from farm.engines.process import EngineProcess
from farm.sim import timing
from farm.sim.launch import running_sim
from farm.store import Store

pytestmark = pytest.mark.slow

MODEL = "sim-test"
K_S_PER_CONTEXT_TOKEN = 1.0e-7
"""Each output token takes 5 ms + 0.1 µs per token of context: decode at 32k is 8.3 ms a token (121 tok/s)."""

SHORT_TTFT_MS = 8.0
"""How far a TTFT of about 20 ms may be from the truth here (see the test)."""

SPEC = """
name = "any-server"

[plan]
repeats = 3
warmup_requests = 1
time_budget_s = 150.0
request_timeout_s = 30.0

[plan.decode]
workloads = ["code"]
short_output_tokens = 16
long_output_tokens = 96

[plan.prefill]
prompt_tokens = [8000, 20000]

[plan.short_ttft]
prompt_tokens = 32

[plan.prefix_cache]

[plan.concurrency]
levels = [4]
prompt_tokens = 256
output_tokens = 48
workload = "code"

[plan.context_depth]
depths = [0, 8192, 32768]
workload = "code"
short_output_tokens = 16
long_output_tokens = 80

[plan.dataset]
source = "sharegpt"
requests = 4
concurrency = 2
seed = 1
max_output_tokens = 64

[open_loop]
process = "constant"
rates_rps = [10.0]
requests = 10
prompt_tokens = 64
output_tokens = 16
"""


@pytest.fixture(scope="module")
def placement() -> tuple[int, int] | None:
    """The client's CPU and the simulator's, the two quietest when the module starts (None: nothing pinned)."""
    return timed_placement()


@pytest.fixture(scope="module")
def sim(placement: tuple[int, int] | None) -> Iterator[EngineProcess]:
    """The simulator without /tokenize, decode slowing with context, a 64k context, and prefill at 50 µs a token
    (8k tokens: 420 ms), so 2% of a prefill TTFT is well above the client's few milliseconds of noise here."""
    overrides = (
        "tokenize_endpoint=false",
        f"decode_s_per_context_token={K_S_PER_CONTEXT_TOKEN}",
        "max_model_len=65536",
        "prefix_block_tokens=16",
        "prefill_linear_s_per_token=5.0e-5",
    )
    with running_sim(
        model=MODEL,
        overrides=overrides,
        faults=("--fault-startup-delay", "0"),
        cpus={placement[1]} if placement else None,
    ) as process:
        yield process


def sim_profile(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(base_url + "/sim/profile", timeout=10) as response:  # noqa: S310 - loopback
        answer: dict[str, Any] = json.loads(response.read())
    profile: dict[str, Any] = answer["profile"]
    return profile


def bench(sim: EngineProcess, placement: tuple[int, int] | None, data_dir: Path, spec_text: str) -> dict[str, Any]:
    """`python -m farm bench` on the quietest CPU, its store in `data_dir`; its JSON answer."""
    spec = data_dir / "spec.toml"
    spec.write_text(spec_text)
    env = {**os.environ, "FARM_DATA_DIR": str(data_dir), "FARM_LOG_FORMAT": "json"}
    env.pop("FARM_DATABASE_URL", None)
    argv = [sys.executable, "-m", "farm", "bench", sim.base_url, "--model", MODEL, "--spec", str(spec), "--json"]
    if placement:
        argv = ["taskset", "-c", str(placement[0]), *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.fixture(scope="module")
def benched(
    sim: EngineProcess, placement: tuple[int, int] | None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    data_dir = tmp_path_factory.mktemp("any-server")
    return bench(sim, placement, data_dir, SPEC), data_dir


def figure(answer: dict[str, Any], key: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [item for item in answer["figures"] if item["key"] == key]
    assert found, f"no figure {key}; have {[item['key'] for item in answer['figures']]}"
    return found[0]


def served_cold_ttfts_ms(base_url: str, tokens: int) -> tuple[list[float], list[float]]:
    """The simulator's records of the streamed one-token cold requests of `tokens` prompt tokens (the measured
    sends of a prefill or a depth; the sizing probes are not streamed): when it wrote each first token after
    reading the request, and when its timing model meant it to, in ms."""
    with urllib.request.urlopen(base_url + "/sim/requests", timeout=10) as response:  # noqa: S310 - loopback
        records: list[dict[str, Any]] = json.loads(response.read())["requests"]
    cold = [
        r
        for r in records
        if r["stream"] and r["prompt_tokens"] == tokens and r["cached_tokens"] == 0 and r["completion_tokens"] == 1
    ]
    served = [(r["first_chunk_ns"] - r["arrival_ns"]) / 1e6 for r in cold]
    return served, [r["ttft_model_s"] * 1000 for r in cold]


def assert_ttft_within_two_percent(base_url: str, tokens: int, measured: dict[str, Any], truth_ms: float) -> None:
    """A cold TTFT figure within 2% of what the simulator did: the median of its own first writes for those
    requests (its timing model's `truth_ms` for every one of them). The simulator's writes run late when this
    shared machine does not schedule it in time (25 ms late at 8k tokens has been seen, load 6 on 2 cores);
    that lateness is the server's, which the farm measures rightly, so the bar is against what it did."""
    served, model = served_cold_ttfts_ms(base_url, tokens)
    # The repeats come first; the prefix-cache measurement later sends the first one again, untimed (evicted
    # by the 20k prompts, so cold too).
    repeats = len(measured["values"])
    assert len(served) >= repeats, (tokens, served)
    served, model = served[:repeats], model[:repeats]
    assert model == pytest.approx([truth_ms] * len(model)), (tokens, model, truth_ms)
    server = statistics.median(served)
    error = abs(measured["median"] - server) / truth_ms
    assert error < 0.02, (tokens, measured["values"], served, truth_ms)


def ttft_truth_ms(profile: dict[str, Any], tokens: int, cached: int = 0) -> float:
    return 1000 * timing.ttft_s(
        tokens,
        cached,
        base_latency_s=profile["base_latency_s"],
        linear_s_per_token=profile["prefill_linear_s_per_token"],
        quadratic_s_per_token2=profile["prefill_quadratic_s_per_token2"],
        cached_s_per_token=profile["cached_s_per_token"],
    )


def test_the_server_really_has_no_tokenize(sim: EngineProcess) -> None:
    """The switch drops the endpoint: /tokenize answers 404, as on a plain OpenAI-compatible server."""
    request = urllib.request.Request(sim.base_url + "/tokenize", data=b'{"prompt": "hi"}', method="POST")  # noqa: S310 - loopback
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - loopback
    refused.value.close()
    assert refused.value.code == 404


def test_every_section_within_two_percent_of_the_truth(
    benched: tuple[dict[str, Any], Path], sim: EngineProcess
) -> None:
    """Decode, prefill TTFT at 8k and 20k, short TTFT, the cached repeat, concurrency and open loop: each figure
    within 2% of what the timing model says for the prompt lengths asked (sized without /tokenize); the prefill
    TTFTs within 2% of what the simulator did, its model's TTFT for each of those requests."""
    answer, _ = benched
    p = sim_profile(sim.base_url)
    decode = figure(answer, "decode/code/decode_tok_s")["mean"]
    decode_truth = timing.rate_at_depth(200.0, 60, K_S_PER_CONTEXT_TOKEN)  # the decode prompt: ~60 tokens
    assert abs(decode - decode_truth) / decode_truth < 0.02, (decode, decode_truth)
    for tokens in (8000, 20000):
        ttft = figure(answer, f"prefill/{tokens}/ttft_ms")
        assert_ttft_within_two_percent(sim.base_url, tokens, ttft, ttft_truth_ms(p, tokens))
        assert ttft["params"]["prompt_sized_by"] == "usage.prompt_tokens"
    # TTFTs of about 21 ms cannot be held to 2% (0.4 ms) on this shared machine: the simulator's own writes run
    # up to 5 ms late here (its /sim/requests records show it) and the client adds a few ms (FACTS.md). They are
    # held to SHORT_TTFT_MS; the long prefills carry the 2% bar.
    short = figure(answer, "short_ttft/32/ttft_ms")["median"]
    assert abs(short - ttft_truth_ms(p, 32)) < SHORT_TTFT_MS, short
    # The cached repeat of the 8k prompt: all but the last partial block (16 tokens) served from the cache.
    cached = (8000 - 1) // 16 * 16
    warm = figure(answer, "prefix_cache/8000/ttft_ms")["median"]
    assert abs(warm - ttft_truth_ms(p, 8000, cached)) < SHORT_TTFT_MS, warm
    per_stream = figure(answer, "concurrency/4/per_stream_tok_s")["mean"]
    stream_truth = timing.rate_at_depth(200.0, 256, K_S_PER_CONTEXT_TOKEN)
    assert abs(per_stream - stream_truth) / stream_truth < 0.02, (per_stream, stream_truth)
    assert figure(answer, "concurrency/4/ttft_ms_p50")["params"]["prompt_sized_by"] == "usage.prompt_tokens"
    sharegpt = figure(answer, "dataset/sharegpt/per_stream_tok_s")
    assert sharegpt["params"]["output_tokens_counted_by"] == "usage.prompt_tokens"
    assert abs(sharegpt["mean"] - 200.0) / 200.0 < 0.02, sharegpt["values"]  # short prompts: k * d is tiny
    open_ttft = figure(answer, "open_loop/10rps/ttft_ms_p50")["median"]
    assert abs(open_ttft - ttft_truth_ms(p, 64)) < SHORT_TTFT_MS, open_ttft


def test_the_provenance_says_prompts_were_sized_from_usage(benched: tuple[dict[str, Any], Path]) -> None:
    """The stored run records `prompt_sized_by` = usage.prompt_tokens: a reader can tell how prompts were made."""
    answer, data_dir = benched
    store = Store.open(f"sqlite:///{data_dir / 'farm.db'}")
    try:
        (run,) = store.runs(answer["job"])
        assert run.provenance is not None
        assert run.provenance["extra"]["prompt_sized_by"] == "usage.prompt_tokens"
    finally:
        store.close()


def test_cold_measurements_are_cold_and_the_cached_one_warm(benched: tuple[dict[str, Any], Path]) -> None:
    """From the simulator's prefix-cache counters: prefill and short TTFT near 0 and not flagged, the cached
    repeat near 1 (all full blocks of the prompt); the reset the engine offers was made."""
    answer, _ = benched
    for key in ("prefill/8000", "prefill/20000", "short_ttft/32"):
        rate = figure(answer, f"{key}/prefix_cache_hit_rate")
        assert rate["mean"] < 0.01, (key, rate["values"])
        assert rate["params"]["cold_but_warm"] is False
        assert rate["params"]["cache_reset"] == "POST /reset_prefix_cache"
    warm = figure(answer, "prefix_cache/8000/prefix_cache_hit_rate")
    assert warm["mean"] == pytest.approx((8000 - 1) // 16 * 16 / 8000, abs=0.005)


def test_decode_and_prefill_at_depth_within_two_percent(
    benched: tuple[dict[str, Any], Path], sim: EngineProcess
) -> None:
    """At 0, 8k and 32k tokens of context: two-point decode within 2% of 1 / (5 ms + k * d) (decode measured at
    depth, the prefix warm) and the cold TTFT within 2% of the prefill truth (depth 0, about 22 ms, within
    SHORT_TTFT_MS); the figure keys name the depth; the cold sends were cold."""
    answer, _ = benched
    p = sim_profile(sim.base_url)
    for depth in (0, 8192, 32768):
        decode = figure(answer, f"depth/{depth}/decode_tok_s")
        (tokens, *_) = decode["params"]["prompt_tokens_from_usage"]
        assert tokens == depth or (depth == 0 and 30 < tokens < 80), tokens
        truth = timing.rate_at_depth(200.0, tokens, K_S_PER_CONTEXT_TOKEN)
        assert abs(decode["mean"] - truth) / truth < 0.02, (depth, decode["values"], truth)
        ttft_figure = figure(answer, f"depth/{depth}/ttft_ms")
        ttft_truth = ttft_truth_ms(p, tokens)
        if depth:
            assert_ttft_within_two_percent(sim.base_url, tokens, ttft_figure, ttft_truth)
        else:
            assert abs(ttft_figure["median"] - ttft_truth) < SHORT_TTFT_MS, (depth, ttft_figure, ttft_truth)
        assert figure(answer, f"depth/{depth}/prefix_cache_hit_rate")["mean"] < 0.01
    slowdown = figure(answer, "depth/32768/decode_tok_s")["mean"] / figure(answer, "depth/0/decode_tok_s")["mean"]
    assert slowdown == pytest.approx(0.6, abs=0.03)  # 5 ms against 8.3 ms a token
