"""Settings in one place: every default defined once in farm.settings, read by the worker; stable worker ids."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, cast

import pytest

from farm.errors import InputError, SettingsError
from farm.settings import Settings
from farm.store import Store
from farm.worker.daemon import Worker
from farm.worker.profile import WorkerProfile


def _profile(**worker: Any) -> WorkerProfile:
    return WorkerProfile.model_validate(
        {"name": "box", "worker": worker, "hardware": {"hardware_id": "h200-141gb", "count": 1}}
    )


def test_farm_lease_and_poll_settings_reach_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FARM_LEASE_S and FARM_POLL_INTERVAL_S apply when the profile leaves them unset; a profile's own values win."""
    monkeypatch.setenv("FARM_LEASE_S", "7.5")
    monkeypatch.setenv("FARM_POLL_INTERVAL_S", "0.25")
    store = cast(Store, None)  # never touched by the constructor
    worker = Worker(store, _profile(), data_dir=tmp_path)
    assert (worker.lease_s, worker.poll_interval_s) == (7.5, 0.25)
    own = Worker(store, _profile(lease_s=30.0, poll_interval_s=2.0), data_dir=tmp_path)
    assert (own.lease_s, own.poll_interval_s) == (30.0, 2.0)


def test_the_worker_id_is_stable_across_restarts() -> None:
    """Unset, the id is <hostname>-<profile name>: the same in every process on the host."""
    assert _profile().worker_id() == _profile().worker_id() == f"{socket.gethostname()}-box"
    assert _profile(id="gpu-7").worker_id() == "gpu-7"


@pytest.mark.parametrize(("attempt", "expected"), [(1, 10.0), (2, 20.0), (3, 40.0), (10, 300.0)])
def test_the_retry_backoff_doubles_up_to_its_ceiling(attempt: int, expected: float) -> None:
    """10 s after the first failed attempt, doubled per attempt, never above five minutes."""
    assert Settings().backoff_s(attempt) == expected


def test_settings_read_the_environment_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """FARM_<NAME> sets a setting whatever the case of its name; an explicit argument wins over the environment."""
    monkeypatch.setenv("farm_lease_s", "7.5")
    monkeypatch.setenv("FARM_QUARANTINE_AFTER", "5")
    monkeypatch.setenv("FARM_DATABASE_URL", "")
    settings = Settings()
    assert (settings.lease_s, settings.quarantine_after, settings.database_url) == (7.5, 5, None)
    assert Settings(lease_s=2.0).lease_s == 2.0


@pytest.mark.parametrize(
    ("variable", "raw", "message"),
    [
        ("FARM_LEASE_S", "abc", "FARM_LEASE_S='abc': not a number (setting lease_s)"),
        ("FARM_LEASE_S", "0", "FARM_LEASE_S='0': expected a number above 0 (setting lease_s)"),
        ("FARM_MAX_INPUT_BYTES", "1.5", "FARM_MAX_INPUT_BYTES='1.5': not a whole number"),
        ("FARM_QUARANTINE_AFTER", "0", "expected a whole number of 1 or more (setting quarantine_after)"),
        ("FARM_RETRY_BACKOFF_S", "-1", "expected a number of 0 or more (setting retry_backoff_s)"),
        ("FARM_LOG_LEVEL", "loud", "expected one of debug, info, warning, error, critical (setting log_level)"),
        ("FARM_LOG_FORMAT", "xml", "expected one of auto, json, console (setting log_format)"),
        ("FARM_ON_SIGTERM", "abandon", "expected one of finish, release (setting on_sigterm)"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, message: str
) -> None:
    """A value that does not parse or is out of range is a SettingsError (an InputError) naming the variable."""
    monkeypatch.setenv(variable, raw)
    with pytest.raises(SettingsError) as caught:
        Settings()
    assert message in str(caught.value)
    assert isinstance(caught.value, InputError)


def test_an_explicit_setting_is_checked_too() -> None:
    """Settings(...) arguments meet the same ranges as the environment; an unknown name is a TypeError."""
    with pytest.raises(SettingsError, match=r"0: expected a number above 0 \(setting poll_interval_s\)"):
        Settings(poll_interval_s=0)
    with pytest.raises(TypeError, match="no setting lease"):
        Settings(lease=1.0)


def test_log_level_is_read_without_regard_to_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_LOG_LEVEL", "WARNING")
    assert Settings().log_level == "warning"
