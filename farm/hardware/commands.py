"""Running a hardware tool (rocm-smi, sysctl, system_profiler) behind one seam, so probes are tested with fakes.

A probe takes a `CommandRunner`: argv in, standard output out. The real one runs the tool with a deadline and
turns every way it can fail (not installed, non-zero exit, timeout) into a ProfileError naming the tool; tests
hand in a function that returns a recorded output of the real tool.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence

from farm.errors import ProfileError

CommandRunner = Callable[[Sequence[str]], str]
"""Runs a hardware tool and returns its standard output."""

TOOL_TIMEOUT_S = 20.0
"""rocm-smi takes a few seconds on a host with 8 GPUs; system_profiler about one."""


def run_tool(argv: Sequence[str]) -> str:
    """The real CommandRunner."""
    executable = shutil.which(argv[0])
    if executable is None:
        raise ProfileError(f"{argv[0]} is not installed on this host", field="hardware.source")
    try:
        done = subprocess.run(
            [executable, *argv[1:]], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ProfileError(f"{' '.join(argv)} did not answer in {TOOL_TIMEOUT_S:.0f} s", field="hardware") from exc
    except OSError as exc:
        raise ProfileError(f"{' '.join(argv)} could not run: {exc}", field="hardware") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProfileError(f"{' '.join(argv)} failed (exit {done.returncode}): {detail[0]}", field="hardware")
    return done.stdout
