"""Failure classes by cause: what a failed measurement's message says about whether trying again can help.

A request the engine refused for what the job asked (a prompt beyond the context, a model it does not serve, an
argument it rejects) fails the same way on every host and every attempt: the job fails at once with that class.
A transient failure (connection reset, timeout, HTTP 5xx) is retried with back-off, preferably on another host.
The full table of classes is in docs/failure-classes.md. Pure functions: text in, a class out.
"""

from __future__ import annotations

import re

from farm.domain import FailureClass

_HTTP_STATUS = re.compile(r"\bHTTP (?P<status>[1-5][0-9]{2})\b")

_CONTEXT_TOO_LONG = (
    "maximum context length",
    "context length",
    "max_model_len",
    "prompt is too long",
    "is longer than the maximum model length",
    "too many tokens",
)
_UNKNOWN_MODEL = ("does not exist", "model not found", "unknown model", "no such model")


def classify_request_failure(message: str) -> FailureClass:
    """The class of a measurement that failed with `message` (which quotes the failed request's error).

    HTTP 400/413/422 with a context-length text is context_too_long; 404, or a 400 that names a model that
    does not exist, is unknown_model; any other 400/405/413/422 is request_refused (a bad argument). Anything
    else (5xx, connection errors, timeouts, a stream without usage) is measurement_error, which is retried.
    """
    lowered = message.lower()
    statuses = {int(m["status"]) for m in _HTTP_STATUS.finditer(message)}
    refused = statuses & {400, 404, 405, 413, 422}
    if refused and any(needle in lowered for needle in _CONTEXT_TOO_LONG):
        return FailureClass.CONTEXT_TOO_LONG
    if 404 in statuses or (refused and any(needle in lowered for needle in _UNKNOWN_MODEL)):
        return FailureClass.UNKNOWN_MODEL
    if refused:
        return FailureClass.REQUEST_REFUSED
    return FailureClass.MEASUREMENT_ERROR
