"""The endpoint engine behind the Engine seam, against a simulator it did not start."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.engines.base import Engine
from farm.engines.endpoint.adapter import EndpointEngine, EndpointSection, endpoint_engine
from farm.errors import EngineError
from farm.net import free_port
from farm.sim.launch import running_sim

pytestmark = pytest.mark.slow


def test_endpoint_engine_answers_for_a_running_server_and_never_stops_it(tmp_path: Path) -> None:
    """start and stop do nothing; wait_ready and alive ask the server; version is the server's; the log and
    the provenance name the URL without its credentials."""
    with running_sim(model="sim-test", faults=("--fault-startup-delay", "0")) as sim:
        url = sim.base_url.replace("http://", "http://me:hunter2@")
        section = EndpointSection(url=url, served_models={"org/model": "sim-test"})
        engine: Engine = endpoint_engine(section, "org/model", log_path=tmp_path / "engine.log")
        assert engine.served_model == "sim-test"
        engine.start()
        engine.wait_ready(10)
        assert engine.alive()
        assert engine.version() == "0.0.0+sim"
        assert engine.stop() is None
        assert sim.alive(), "stopping an endpoint must not touch the server"
        assert engine.alive()
        assert isinstance(engine, EndpointEngine)
        assert "hunter2" not in engine.log_text()
        assert "hunter2" not in str(engine.provenance())
        assert engine.provenance()["kind"] == "endpoint"


def test_endpoint_engine_times_out_on_a_closed_port(tmp_path: Path) -> None:
    """No server: wait_ready ends with a start-up timeout naming the URL, and alive is False."""
    engine = EndpointEngine(f"http://127.0.0.1:{free_port()}", "m", log_path=tmp_path / "engine.log")
    assert not engine.alive()
    with pytest.raises(EngineError, match="did not answer") as raised:
        engine.wait_ready(0.5)
    assert raised.value.failure_class == "startup_timeout"
