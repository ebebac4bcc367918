"""How fast the timed client's per-read work runs: tokens/s parsed on one core from a pre-recorded stream.

The stream is vLLM-shaped chat chunks (one token per chunk, the worst case), fed to `StreamAccumulator`
either one event per read (what a client sees when tokens trickle in) or in 64 KiB reads (a client that fell
behind).
The project's bar is 250k tok/s on one core.

    uv run python bench/sse_parse.py [--chunks 1000000] [--api chat|completions]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from farm.bench.sse import CHAT_TEXT_KEYS, COMPLETION_TEXT_KEYS, StreamAccumulator

WORDS = ["the", " tree", " node", " splits", "\n", " def", " insert", "(self,", ' key"', " é", " 🙂", "\\"]


def recorded_stream(chunks: int, api: str) -> list[bytes]:
    """One SSE event per token, as vLLM writes them (compact JSON, raw UTF-8), then usage and [DONE]."""
    events = []
    head = {"id": "chatcmpl-5f1e0c", "created": 1767225600, "model": "deepseek-ai/DeepSeek-V4-Flash-0731"}
    for index in range(chunks):
        word = WORDS[index % len(WORDS)]
        if api == "chat":
            choice = {"index": 0, "delta": {"content": word}, "logprobs": None, "finish_reason": None}
            body = {**head, "object": "chat.completion.chunk", "choices": [choice]}
        else:
            choice = {"index": 0, "text": word, "logprobs": None, "finish_reason": None, "stop_reason": None}
            body = {**head, "object": "text_completion", "choices": [choice]}
        events.append(b"data: " + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n")
    usage = {"prompt_tokens": 32, "completion_tokens": chunks, "total_tokens": 32 + chunks}
    events.append(b"data: " + json.dumps({**head, "choices": [], "usage": usage}).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def run(reads: list[bytes], keys: tuple[bytes, ...]) -> float:
    accumulator = StreamAccumulator(keys)
    clock = time.perf_counter_ns
    began = time.process_time()
    for data in reads:
        accumulator.feed(data, clock())
    sample = accumulator.sample(0)
    elapsed = time.process_time() - began
    assert sample.ok, sample.error
    assert len(sample.chunk_ns) == sample.completion_tokens
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--api", choices=["chat", "completions"], default="chat")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    keys = CHAT_TEXT_KEYS if args.api == "chat" else COMPLETION_TEXT_KEYS
    events = recorded_stream(args.chunks, args.api)
    joined = b"".join(events)
    bulk = [joined[offset : offset + 65536] for offset in range(0, len(joined), 65536)]
    print(f"{args.chunks} chunks ({args.api}), {len(joined) / args.chunks:.0f} bytes each, one core")
    for label, reads in (("one event per read", events), ("64 KiB reads", bulk)):
        seconds = run(reads, keys)
        rate, cost = args.chunks / seconds, seconds / args.chunks * 1e6
        print(f"  {label:>20}: {rate:>10,.0f} tok/s  ({cost:.2f} µs/token)")


if __name__ == "__main__":
    main()
