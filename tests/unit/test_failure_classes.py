"""Failure classes by cause: deterministic engine refusals are told from transient failures by the message."""

from __future__ import annotations

import pytest

from farm.domain import NOT_RETRIED, FailureClass
from farm.worker.failures import classify_request_failure

CONTEXT = (
    'a failed request has no timing: HTTP 400: {"object":"error","message":"This model\'s maximum context '
    'length is 64 tokens. However, you requested 120 tokens","type":"BadRequestError","code":400}'
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (CONTEXT, FailureClass.CONTEXT_TOO_LONG),
        ("HTTP 400: prompt is too long for max_model_len 1024", FailureClass.CONTEXT_TOO_LONG),
        ('HTTP 404: {"message":"The model `x/y` does not exist."}', FailureClass.UNKNOWN_MODEL),
        ("HTTP 400: The model `x` does not exist.", FailureClass.UNKNOWN_MODEL),
        ("HTTP 400: max_tokens must be at least 1, got 0.", FailureClass.REQUEST_REFUSED),
        ("HTTP 422: field required (body.prompt)", FailureClass.REQUEST_REFUSED),
        (
            "every one of the 4 concurrent requests failed: HTTP 500: Injected engine error.",
            FailureClass.MEASUREMENT_ERROR,
        ),
        ("HTTP 503: The engine is dead.", FailureClass.MEASUREMENT_ERROR),
        ("ClientOSError: [Errno 104] Connection reset by peer", FailureClass.MEASUREMENT_ERROR),
        ("TimeoutError: the request took longer than 30 s", FailureClass.MEASUREMENT_ERROR),
        ("bad stream: no usage in the last chunk", FailureClass.MEASUREMENT_ERROR),
        ("two-point decode: the long request has no more tokens (16 <= 16)", FailureClass.MEASUREMENT_ERROR),
    ],
)
def test_failures_are_classed_by_cause(message: str, expected: FailureClass) -> None:
    """Refusals (400/404/422 with their reason) get their own class; 5xx, resets, timeouts stay transient."""
    assert classify_request_failure(message) is expected


def test_refusals_are_not_retried_and_transient_failures_are() -> None:
    """Every refusal class fails a job at once; the transient class is retried."""
    for refusal in (FailureClass.CONTEXT_TOO_LONG, FailureClass.UNKNOWN_MODEL, FailureClass.REQUEST_REFUSED):
        assert refusal in NOT_RETRIED
    assert FailureClass.MEASUREMENT_ERROR not in NOT_RETRIED
