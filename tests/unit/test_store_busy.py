"""The bounded retry of SQLITE_BUSY on a store's first open (farm.store.db.retry_busy), without a database."""

from __future__ import annotations

import sqlite3

import pytest

from farm.errors import StoreError
from farm.store.db import is_busy, retry_busy


def test_busy_is_retried_until_the_action_succeeds() -> None:
    """ "database is locked" twice, then success: the result comes back after three calls."""
    calls: list[int] = []

    def action() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "wal"

    assert retry_busy(action, "switch to WAL") == "wal"
    assert len(calls) == 3


def test_busy_wrapped_in_a_store_error_is_recognised() -> None:
    """translate_errors' StoreError raised from the driver's busy error counts as busy; other errors do not."""
    outer = StoreError("cannot read the schema revision: database is locked")
    outer.__cause__ = sqlite3.OperationalError("database is locked")
    assert is_busy(outer)
    assert not is_busy(StoreError("no such table: jobs"))
    assert not is_busy(sqlite3.OperationalError("no such table: jobs"))


def test_other_errors_are_not_retried_and_busy_gives_up_at_the_deadline() -> None:
    """A different error goes up at once; busy goes up once the deadline has passed."""
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("no such table: jobs")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_busy(broken, "read")
    assert len(calls) == 1

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_busy(locked, "read", deadline_s=0.05)
