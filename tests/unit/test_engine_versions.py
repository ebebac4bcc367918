"""Which release a host runs, asked of its executable at worker start (farm.engines.versions): a version command,
the package's version in the executable's interpreter, a checkout's pyproject.toml; and the spec it chooses."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from farm.engines.registry import ENGINES
from farm.engines.versions import checkout_version, release_in, script_interpreter, version_reader

FAKES = Path(__file__).resolve().parents[1] / "fixtures" / "fake_engines"


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("ollama version is 0.12.3\n", "0.12.3"),
        ("lms - LM Studio CLI - 0.3.0-standin", "0.3.0"),
        ("0.33.0\n", "0.33.0"),
        ("sglang v0.5.2rc1", "0.5.2rc1"),
        ("Warning: could not connect to a running Ollama instance\nclient version is 0.5.7", "0.5.7"),
        ("build 1.2.3.4.5", None),
        ("no version here", None),
    ],
)
def test_release_in(text: str, release: str | None) -> None:
    """The first release number a version command prints."""
    assert release_in(text) == release


def test_a_version_command_answers_through_the_recording_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording fake answers `--version` with FARM_FAKE_VERSION; unset, it fails and no version is read."""
    read = version_reader(command=("--version",), drop=("serve",))
    executable = (sys.executable, str(FAKES / "record_argv.py"))
    monkeypatch.setenv("FARM_FAKE_VERSION", "0.28.1")
    assert read(executable) == "0.28.1"
    assert read((*executable, "serve")) == "0.28.1"  # the engine's subcommand is dropped before the question
    monkeypatch.delenv("FARM_FAKE_VERSION")
    assert read(executable) is None
    assert read(("/no/such/engine",)) is None


def test_the_stand_in_answers_as_the_engine_and_the_spec_follows(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m farm.sim.standin mlx --version` answers FARM_STANDIN_VERSION as mlx_lm would; MLX's reader asks
    it (the module is not mlx_lm's, so the package is not asked) and the spec is the nearest older shipped."""
    monkeypatch.setenv("FARM_STANDIN_VERSION", "0.29.1")
    kind = ENGINES["mlx"]
    assert kind.read_version is not None
    version = kind.read_version((sys.executable, "-m", "farm.sim.standin", "mlx"))
    assert version == "0.29.1"
    spec, note = kind.spec_at(version)
    assert spec.version == "0.28"
    assert "nearest older" in note


def test_a_python_module_engine_is_asked_its_package_version() -> None:
    """`python -m MODULE` of the engine's own module: the package's installed version in that interpreter (pytest
    stands in for the engine's package: it is installed here, and its version is known)."""
    read = version_reader(command=("--version",), package="pytest", modules=("pytest",))
    assert read((sys.executable, "-m", "pytest")) == importlib.metadata.version("pytest")


def test_a_console_script_is_asked_through_its_interpreter(tmp_path: Path) -> None:
    """A console script of the package (its `#!` names the interpreter): the package's version there."""
    script = tmp_path / "engine-server"
    script.write_text(f"#!{sys.executable}\nraise SystemExit(3)\n", encoding="utf-8")
    script.chmod(0o755)
    assert script_interpreter(str(script)) == sys.executable
    read = version_reader(command=("--version",), package="pytest")
    assert read((str(script),)) == importlib.metadata.version("pytest")


def test_a_checkout_script_reads_its_pyproject(tmp_path: Path) -> None:
    """TabbyAPI runs from a checkout (`python3 main.py`): the version of the pyproject.toml beside main.py."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "tabbyAPI"\nversion = "0.0.1"\n', encoding="utf-8")
    (tmp_path / "main.py").write_text("", encoding="utf-8")
    assert checkout_version(str(tmp_path / "main.py")) == "0.0.1"
    kind = ENGINES["tabbyapi"]
    assert kind.read_version is not None
    assert kind.read_version(("python3", str(tmp_path / "main.py"))) == "0.0.1"
    os.remove(tmp_path / "pyproject.toml")
    assert checkout_version(str(tmp_path / "main.py")) is None


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_reads_its_version(name: str) -> None:
    """Every engine's line says how its version is read at worker start."""
    assert ENGINES[name].read_version is not None
