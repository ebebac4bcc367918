"""SGLang's /metrics counters under the farm's names (the table's `metric_names`, the adapter's too)."""

from __future__ import annotations

METRICS = {
    "vllm:prompt_tokens": "sglang:prompt_tokens_total",
    "vllm:generation_tokens": "sglang:generation_tokens_total",
}
"""The farm's counters (named as vLLM's) and SGLang's counters for the same thing."""
