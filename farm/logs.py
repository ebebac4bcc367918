"""structlog configuration, fenced into this one module: JSON when not on a terminal, console when on one.

structlog is imported when something first logs, not when a command configures logging: most CLI commands never
log, and the import is a tenth of their start.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import structlog

_configured = False
_pending: tuple[str, str, TextIO | None] | None = None


def configure(fmt: str = "auto", level: str = "info", file: TextIO | None = None) -> None:
    """Configure structlog for the process. `fmt` is 'json', 'console' or 'auto'; `file` defaults to stderr.

    Applied at once when structlog is already in use, otherwise on the first `get_logger`."""
    global _pending
    logging.getLevelNamesMapping()[level.upper()]  # an unknown level is refused here, not at the first log line
    _pending = (fmt, level, file)
    if "structlog" in sys.modules:
        _apply()


def _apply() -> None:
    global _configured, _pending
    import structlog

    fmt, level, file = _pending or ("auto", "info", None)
    _pending = None
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
    from farm.scrubber import scrub_text

    return {key: scrub_text(value) if isinstance(value, str) else value for key, value in event_dict.items()}


def _current_stderr(*_args: Any) -> structlog.PrintLogger:
    """A logger on whatever sys.stderr is when it logs: a stream swapped and closed since (a test runner's
    capture) must not break every later log line."""
    import structlog

    return structlog.PrintLogger(file=sys.stderr)


class _Logger:
    """A named logger that imports and configures structlog when it first logs (or is bound)."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if self._logger is None:
            import structlog

            if _pending is not None or not _configured:
                _apply()
            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attribute)


def get_logger(name: str) -> Any:
    """A logger; configures the defaults (or what `configure` was last given) on first use, so library code
    never logs unconfigured. Modules call this at import; structlog itself is imported at the first log line."""
    return _Logger(name)
