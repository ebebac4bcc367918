"""Which release of an engine a host runs, asked of the host's own executable once at worker start: the version
its spec is chosen by (`EngineKind.spec_at`). Each engine's line says how (`read_version`, built here by
`version_reader`): its own version command (`ollama --version`, `lms version`, `vllm --version`), or, where the
executable is the engine's Python module or a console script of its package, the package's version from that
interpreter (`importlib.metadata`), or the version in the `pyproject.toml` beside a script run from a checkout
(TabbyAPI's `main.py`). An executable that is something else (the simulator standing in for the engine, a
wrapper) is asked the engine's version command, and answers it or not. No answer: None (the profile's `version`,
else the newest shipped spec, judges)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

VERSION_TIMEOUT_S = 15.0
"""A version command answers at once, and `importlib.metadata` imports no engine; a loaded host still answers
well within this."""

_RELEASE = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?(?:[-.+]?(?:rc|post|dev|a|b)\d*)?)(?![\w.])")
_INTERPRETER = re.compile(r"^python(\d+(\.\d+)?)?$")


def release_in(text: str) -> str | None:
    """The first release number in a version command's output (`ollama version is 0.12.3`: 0.12.3)."""
    found = _RELEASE.search(text)
    return found.group(1) if found else None


def ask(argv: Sequence[str], *, timeout_s: float = VERSION_TIMEOUT_S) -> str | None:
    """What `argv` prints (stdout, then stderr) when it exits 0; None when it fails, is missing or hangs (then its
    whole process group is killed: an executable that does not know the question may start serving instead)."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None
    return out + err if process.returncode == 0 else None


def is_interpreter(token: str) -> bool:
    return bool(_INTERPRETER.match(Path(token).name))


def script_interpreter(script: str) -> str | None:
    """The interpreter of a console script (its `#!` line), found on PATH or by its path; None: not a script."""
    path = shutil.which(script) or (script if os.path.isfile(script) else None)
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            first = handle.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = words[1:]
    return words[0] if words and is_interpreter(words[0]) else None


def package_version(interpreter: str, package: str, *, timeout_s: float = VERSION_TIMEOUT_S) -> str | None:
    """The installed version of `package` in `interpreter`'s environment."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    said = ask((interpreter, "-c", code), timeout_s=timeout_s)
    return release_in(said) if said is not None else None


def checkout_version(script: str) -> str | None:
    """The `project.version` of the pyproject.toml beside a script run from a checkout."""
    path = Path(os.path.expanduser(script)).resolve().parent / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    version = data.get("project", {}).get("version")
    return str(version) if isinstance(version, str) else None


def version_reader(
    *,
    command: Sequence[str],
    package: str | None = None,
    modules: Sequence[str] = (),
    drop: Sequence[str] = (),
    checkout_script: str | None = None,
) -> Callable[[tuple[str, ...]], str | None]:
    """How an engine's line reads the version of the host's executable:
    - `python -m MODULE` with one of the engine's `modules`: `package`'s version in that interpreter;
    - `python SCRIPT` where SCRIPT is the engine's `checkout_script`: the checkout's pyproject.toml version;
    - a console script of `package` (its `#!` interpreter): the package's version there, else the command;
    - anything else: the executable, less its trailing `drop` tokens (a subcommand such as `serve`), with
      `command` appended (`--version`), and the first release number it prints."""
    wanted = tuple(command)

    def read(executable: tuple[str, ...]) -> str | None:
        if not executable:
            return None
        head, rest = executable[0], executable[1:]
        if is_interpreter(head) and rest[:1] == ("-m",) and rest[1:2] and rest[1] in modules and package:
            return package_version(head, package)
        if is_interpreter(head) and checkout_script and rest[:1] and Path(rest[0]).name == checkout_script:
            return checkout_version(rest[0])
        if package and not is_interpreter(head):
            interpreter = script_interpreter(head)
            found = package_version(interpreter, package) if interpreter else None
            if found is not None:
                return found
        base = executable
        if drop and base[-len(drop) :] == tuple(drop):
            base = base[: -len(drop)]
        said = ask((*base, *wanted))
        return release_in(said) if said is not None else None

    return read
