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


REAL_PARTS: dict[str, tuple[str, ...]] = {
    "tests/e2e/test_vllm_cpu.py": ("vllm",),
    "tests/integration/test_tinymodel.py": ("vllm",),
    "tests/e2e/test_parse_back_real_vllm.py": ("vllm",),
    "tests/e2e/test_report_browser.py": ("browser",),
    "tests/integration/test_farm_mode.py": ("farm",),
    "tests/integration/test_farm_failures.py": ("farm",),
    "tests/integration/test_loadgen_accuracy.py": ("quiet_machine",),
    "tests/integration/test_endpoint_bench.py": ("quiet_machine",),
    "tests/integration/test_multiproc_loadgen.py": ("quiet_machine",),
    "tests/integration/test_rate_sweep.py": ("quiet_machine",),
    "tests/integration/test_kernel_stamps.py": ("quiet_machine",),
}
"""Which real part each test module needs beyond SQLite and the simulator: `make test-fast` leaves these out."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the real parts its module needs (the markers are declared in pyproject.toml)."""
    for item in items:
        module = item.path.relative_to(ROOT).as_posix()
        for marker in REAL_PARTS.get(module, ()):
            item.add_marker(marker)
