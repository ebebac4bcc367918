"""How fast the secret scrubber runs on a large engine log: MB/s of `scrub_text`, the farm's own rules and
detect-secrets' patterns apart, on one core.

The log is vLLM-shaped (its start-up dump of arguments, per-request access lines, the periodic throughput line,
warnings, a traceback), with a few secrets of each class spread through it; the worker scrubs the whole engine
log once per run before it is stored as an artifact. The bench checks that every planted secret is gone.

    uv run python bench/scrubber.py [--megabytes 20]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from farm import scrubber

LINES = [
    "INFO 12-01 20:00:{s:02d} [api_server.py:1042] vLLM API server version 0.32.0",
    "INFO 12-01 20:00:{s:02d} [utils.py:326] non-default args: {{'model': 'org/m', 'max_model_len': 32768, "
    "'tensor_parallel_size': 2, 'max_num_seqs': 64, 'enable_prefix_caching': True}}",
    "INFO 12-01 20:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 tokens/s, Avg generation "
    "throughput: 276.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit "
    "rate: 93.2%",
    'INFO:     127.0.0.1:{p} - "POST /v1/completions HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:{p} - "GET /metrics HTTP/1.1" 200 OK',
    "INFO 12-01 20:00:{s:02d} [gpu_model_runner.py:2310] Model loading took 81.2 GiB and 92.4 seconds",
    "INFO 12-01 20:00:{s:02d} [kv_cache_utils.py:716] GPU KV cache size: 1,234,567 tokens",
    "INFO 12-01 20:00:{s:02d} [kv_cache_utils.py:720] Maximum concurrency for 262,144 tokens per request: 4.71x",
    "WARNING 12-01 20:00:{s:02d} [config.py:1204] max_num_batched_tokens (8192) is smaller than max_model_len",
    "DEBUG 12-01 20:00:{s:02d} [core.py:88] sha256 of config: 0a51ea5b4ae2dc5d81890e5173f54203d2a3ae0cfffe51b8fd2a",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 512, in run_engine_core',
    "Downloading https://huggingface.co/org/m/resolve/main/model-00001-of-00031.safetensors?download=true",
]
SECRETS = [
    "connecting to postgresql://farm:p@ss@w0rd-7@db:5432/farm",
    "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 set by the launcher",
    "Cookie: session=Zm9vYmFyYmF6cXV4",
    "GET https://b.s3.amazonaws.com/o?X-Amz-Signature=9f8e7d6c5b4a39281706f5e4d3c2b1a0&x=1",
    '{"api_key": "k-123-abc-planted"}',
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7plantedkey\n"
    "-----END PRIVATE KEY-----",
    "stripe rk_live_abcdefghijklmnopqrstuvwx",
]
PLANTED = [
    "p@ss@w0rd-7",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "Zm9vYmFyYmF6cXV4",
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "k-123-abc-planted",
    "plantedkey",
    "rk_live_abcdefghijklmnopqrstuvwx",
]


def engine_log(megabytes: float, seed: int = 7) -> str:
    """A vLLM-shaped log of about `megabytes`, a secret of each class every ~50,000 lines."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < megabytes * 1_000_000:
        if rng.random() < 1 / 50_000 or not lines:
            line = rng.choice(SECRETS)
        else:
            line = rng.choice(LINES).format(s=rng.randrange(60), p=rng.randrange(30000, 60000))
        lines.append(line)
        size += len(line) + 1
    lines += SECRETS  # every class at least once
    return "\n".join(lines) + "\n"


def timed(function: object, text: str) -> tuple[float, str]:
    assert callable(function)
    began = time.process_time()
    out = function(text)
    return time.process_time() - began, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=20.0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    text = engine_log(args.megabytes)
    megabytes = len(text.encode()) / 1_000_000
    scrubber._library_patterns()  # import and compile once, outside the timing
    total, scrubbed = timed(scrubber.scrub_text, text)
    library, _ = timed(scrubber._library_scrub, text)
    missed = [secret for secret in PLANTED if secret in scrubbed]
    assert not missed, f"secrets left in the log: {missed}"
    redacted = scrubbed.count(scrubber.REDACTED)
    print(f"engine log: {megabytes:.1f} MB, {text.count(chr(10)):,} lines, {redacted:,} secrets redacted")
    print(f"scrub_text: {total:.2f} s CPU, {megabytes / total:.1f} MB/s (every planted secret removed)")
    print(f"  of which detect-secrets' {len(scrubber._library_patterns())} patterns: {library:.2f} s")
    print(f"  the farm's own rules: {total - library:.2f} s")


if __name__ == "__main__":
    main()
