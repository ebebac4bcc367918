"""An engine's own timing report (Ollama's `eval_count`/`eval_duration`), read through its folder, and the
server's two-point decode rate made from it."""

from __future__ import annotations

import pytest

from farm.bench.methods import OwnDecodeReport
from farm.engines.base import ServerTiming
from farm.engines.ollama.timings import generate_body, read_timing
from farm.engines.registry import ENGINES

FINAL = {
    "model": "m",
    "response": "x",
    "done": True,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 130_000_000,
    "eval_count": 290,
    "eval_duration": 4_709_213_000,
}
"""A final message of Ollama's /api/generate (api/types.go `Metrics`; durations in nanoseconds)."""


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (FINAL, ServerTiming(26, 0.13, 290, 4.709213)),
        ({"usage": {"eval_count": 10, "eval_duration": 500_000_000}}, ServerTiming(None, None, 10, 0.5)),
        ({"eval_count": 10}, None),
        ({"eval_count": 10, "eval_duration": 0}, None),
        ({"eval_count": True, "eval_duration": 5}, None),
        ({"eval_count": -1, "eval_duration": 5}, None),
        ({"choices": [], "usage": {"completion_tokens": 3}}, None),
    ],
)
def test_read_timing(document: dict[str, object], expected: ServerTiming | None) -> None:
    """Counts and nanosecond durations from a final message or an OpenAI-compatible usage; None without both."""
    assert read_timing(document) == expected


def test_the_table_asks_ollama_natively() -> None:
    """Ollama's line names its own report: a whole /api/generate of exactly the asked tokens, greedy."""
    own = ENGINES["ollama"].own_timing
    assert own is not None
    assert own.path == "/api/generate"
    assert own.body("m", "p", 64, 0.0) == generate_body("m", "p", 64, 0.0)
    assert generate_body("m", "p", 64, 0.0)["options"] == {"num_predict": 64, "temperature": 0.0}
    assert [name for name, kind in ENGINES.items() if kind.own_timing is not None] == ["ollama"]


def test_the_servers_two_point_rate() -> None:
    """(n_long - n_short) / (d_long - d_short) from the engine's own counts, and the client's rate over it."""
    report = OwnDecodeReport("s", ServerTiming(5, 0.01, 64, 0.64), ServerTiming(5, 0.01, 896, 8.96))
    assert report.decode_tok_s() == pytest.approx(100.0)
    params = report.params(101.0)
    assert params["client_over_server"] == pytest.approx(1.01)
    assert params["long_eval_tok_s"] == pytest.approx(100.0)
