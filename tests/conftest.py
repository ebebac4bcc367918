"""Fixtures every tier shares: an isolated data directory and environment for each test."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SEED_REGISTRY = FIXTURES / "001_5d0dc33ac7ff8823.txt"
SEED_PAGE = FIXTURES / "000_fb943dab8cb08842.txt"


@pytest.fixture(autouse=True)
def _isolated_farm_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's data directory or inherits a farm setting from the shell."""
    for name in ("FARM_DATABASE_URL", "FARM_BROKER_URL", "FARM_LOG_FORMAT", "FARM_LEASE_S"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FARM_DATA_DIR", str(tmp_path / "farm-data"))
