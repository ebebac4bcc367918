"""Logging configuration: JSON off a terminal, and robust to the stream it was configured with going away."""

from __future__ import annotations

import io
import json

import pytest

from farm.logs import configure, get_logger


def test_logs_follow_stderr_when_it_is_swapped_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A captured stderr that is closed afterwards (a CLI test runner's) does not break later log lines."""
    configure("json")
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    get_logger("t").info("first", n=1)
    first.close()
    second = io.StringIO()
    monkeypatch.setattr("sys.stderr", second)
    get_logger("t").info("second", n=2)
    line = json.loads(second.getvalue())
    assert line["event"] == "second"
    assert line["n"] == 2
    assert line["level"] == "info"


def test_a_file_given_to_configure_gets_the_lines() -> None:
    """`configure(file=...)` sends JSON lines there (the demo's worker log)."""
    out = io.StringIO()
    configure("json", file=out)
    try:
        get_logger("t").warning("to the file", job="j-1")
    finally:
        configure("json")
    line = json.loads(out.getvalue())
    assert (line["event"], line["job"], line["level"]) == ("to the file", "j-1", "warning")
