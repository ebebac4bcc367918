"""What the registry refresh scripts (refresh-hardware.py, refresh-instances.py, refresh-assets.py) share: the
commit a local-ai-registry checkout is at. A script run as `python deploy/NAME.py` has deploy/ on its path."""

from __future__ import annotations

import subprocess
from pathlib import Path


def checkout_commit(checkout: Path) -> str | None:
    """The checkout's HEAD commit, or None when it is not a git checkout (a copied folder)."""
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
