"""Ollama's own timing of a request: the final message of its native API (`/api/generate`, `/api/chat`) carries
`prompt_eval_count`/`prompt_eval_duration` and `eval_count`/`eval_duration` (nanoseconds), Ollama's api/types.go
`Metrics`; where an OpenAI-compatible answer carries them too (in `usage`), they are read from there."""

from __future__ import annotations

from collections.abc import Mapping

from farm.engines.base import OwnTiming, ServerTiming

GENERATE_PATH = "/api/generate"


def generate_body(model: str, prompt: str, max_tokens: int, temperature: float) -> dict[str, object]:
    """A native generation of exactly `max_tokens` at `temperature`, answered whole (one final message)."""
    return {
        "model": model,
        "prompt": prompt,
        "stream": False,
        "options": {"num_predict": max_tokens, "temperature": temperature},
    }


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_timing(document: Mapping[str, object]) -> ServerTiming | None:
    """The timing in a final message (or in an OpenAI-compatible answer's `usage`); None where it gives none."""
    usage = document.get("usage")
    source: Mapping[str, object] = document
    if "eval_count" not in document and isinstance(usage, Mapping):
        source = usage
    eval_count, eval_ns = _count(source.get("eval_count")), _count(source.get("eval_duration"))
    if eval_count is None or eval_ns is None or eval_ns == 0:
        return None
    prompt_count, prompt_ns = _count(source.get("prompt_eval_count")), _count(source.get("prompt_eval_duration"))
    return ServerTiming(
        prompt_tokens=prompt_count,
        prompt_s=prompt_ns / 1e9 if prompt_ns is not None else None,
        output_tokens=eval_count,
        decode_s=eval_ns / 1e9,
    )


OWN_TIMING = OwnTiming(
    path=GENERATE_PATH,
    body=generate_body,
    read=read_timing,
    source="ollama /api/generate prompt_eval_count/prompt_eval_duration, eval_count/eval_duration",
)
"""Ollama's own report, as its table line says."""
