"""structlog configuration, fenced into this one module: JSON when not on a terminal, console when on one."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

_configured = False


def configure(fmt: str = "auto", level: str = "info", file: TextIO | None = None) -> None:
    """Configure structlog for the process. `fmt` is 'json', 'console' or 'auto'; `file` defaults to stderr."""
    global _configured
    out = file or sys.stderr
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    renderer: Any = structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _scrub_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(file=file) if file is not None else _current_stderr,
        cache_logger_on_first_use=False,
    )
    _configured = True


def _scrub_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """Every string of a log line (messages, errors, tracebacks) through the farm's one secret scrubber."""
    from farm.provenance import scrub_text

    return {key: scrub_text(value) if isinstance(value, str) else value for key, value in event_dict.items()}


def _current_stderr(*_args: Any) -> structlog.PrintLogger:
    """A logger on whatever sys.stderr is when it logs: a stream swapped and closed since (a test runner's
    capture) must not break every later log line."""
    return structlog.PrintLogger(file=sys.stderr)


def get_logger(name: str) -> Any:
    """A logger; configures the defaults on first use so library code never logs unconfigured."""
    if not _configured:
        configure()
    return structlog.get_logger(name)
