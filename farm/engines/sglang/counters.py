"""SGLang's /metrics counters under the farm's names (the table's `metric_names`, the adapter's too)."""

from __future__ import annotations

METRICS = {
    "vllm:prompt_tokens": "sglang:prompt_tokens_total",
    "vllm:generation_tokens": "sglang:generation_tokens_total",
    "vllm:prefix_cache_hits": "sglang:cached_tokens_total",
    "vllm:prefix_cache_queries": "sglang:prompt_tokens_total",
}
"""The farm's counters (named as vLLM's) and SGLang's counters for the same thing. SGLang counts prompt tokens
served from its radix cache in `cached_tokens_total` (labelled by cache_source) and has no queries counter:
every prompt token is a query, so the hit rate is cached over prompt tokens."""
