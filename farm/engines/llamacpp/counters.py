"""llama-server's /metrics counters under the farm's names (the table's `metric_names`, the adapter's too)."""

from __future__ import annotations

METRICS = {
    "vllm:prompt_tokens": "llamacpp:prompt_tokens_total",
    "vllm:generation_tokens": "llamacpp:tokens_predicted_total",
}
"""The farm's counters (named as vLLM's) and the llama-server `/metrics` counters that count the same thing
(tools/server/server.cpp, with `--metrics`)."""
