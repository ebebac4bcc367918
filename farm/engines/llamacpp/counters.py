"""llama-server's /metrics counters under the farm's names (the table's `metric_names`, the adapter's too)."""

from __future__ import annotations

METRICS = {
    "vllm:prompt_tokens": "llamacpp:prompt_tokens_total",
    "vllm:generation_tokens": "llamacpp:tokens_predicted_total",
}
"""The farm's counters (named as vLLM's) and the llama-server `/metrics` counters that count the same thing
(tools/server/server.cpp, with `--metrics`)."""

# No prefix-cache counters mapped: newer llama-servers count `llamacpp:prompt_tokens_cached_total` with
# `prompt_tokens_total` excluding those (so queries would be their sum, which a name map cannot say); the farm
# reads the hit rate from each answer's `timings.cache_n` instead (farm.bench.sse). It has no whole-cache reset
# either: its cold measurements erase each slot where the server allows it and send `cache_prompt: false`
# (farm.engines.llamacpp.cache, the table line's `prefix_cache_resetter`).
