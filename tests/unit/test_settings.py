"""Settings in one place: every default defined once in farm.settings, read by the worker; stable worker ids."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, cast

import pytest

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
