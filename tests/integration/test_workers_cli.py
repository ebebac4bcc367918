"""`farm workers` as an operator types it: a quarantined host with its reason, and `--release HOST`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from farm.cli.app import app
from farm.settings import Settings
from farm.store import Store

runner = CliRunner()
CLASS = "sim:rtx-pro-6000-blackwell-96gb x 2"


def test_a_quarantined_host_is_shown_with_its_reason_and_released_by_name() -> None:
    """The table and --json say `quarantined` and why; `--release` by host name returns it to rotation; a host
    that is not quarantined cannot be released (a clear error, exit status 1)."""
    with Store.open(Settings().resolved_database_url, auto_upgrade=True) as store:
        store.register_worker("gpu-7-sim", host="gpu-7", hardware_classes=[CLASS])
        store.register_worker("gpu-8-sim", host="gpu-8", hardware_classes=[CLASS])
        store.quarantine("gpu-7-sim", "the engine failed to start 3 times in a row; last: engine_start_failed")

    listed = runner.invoke(app, ["workers", "--json"])
    assert listed.exit_code == 0, listed.stderr
    states = {w["worker_id"]: (w["state"], w["quarantine_reason"]) for w in json.loads(listed.stdout)["workers"]}
    assert states == {
        "gpu-7-sim": ("quarantined", "the engine failed to start 3 times in a row; last: engine_start_failed"),
        "gpu-8-sim": ("live", None),
    }
    table = runner.invoke(app, ["workers"])
    assert "quarantined" in table.stdout

    released = runner.invoke(app, ["workers", "--release", "gpu-7"])
    assert released.exit_code == 0, released.stderr
    assert "gpu-7-sim" in released.stdout
    again = runner.invoke(app, ["workers", "--release", "gpu-7"])
    assert again.exit_code == 1
    assert "no quarantined worker" in again.stderr
    with Store.open(Settings().resolved_database_url) as store:
        assert store.quarantine_reason("gpu-7-sim") is None
