"""Provenance: the value object attached to every result, and what the worker can read of its own host."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import farm

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|CREDENTIAL|PRIVATE)", re.IGNORECASE)
SECRET_VALUE = re.compile(r"^(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|ghp_[A-Za-z0-9]{8,})$")


def scrub_environment(env: dict[str, str]) -> dict[str, str]:
    """The environment with every secret's value replaced, by name or by the shape of the value."""
    return {k: ("<redacted>" if SECRET_NAME.search(k) or SECRET_VALUE.match(v) else v) for k, v in env.items()}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HostInfo:
    name: str
    cpu: str
    cpu_count: int
    memory_gib: float
    os: str
    kernel: str

    @classmethod
    def read(cls) -> HostInfo:
        return cls(
            name=socket.gethostname(),
            cpu=_cpu_model(),
            cpu_count=os.cpu_count() or 0,
            memory_gib=round(_memory_bytes() / 2**30, 1),
            os=_os_name(),
            kernel=platform.release(),
        )


@dataclass(frozen=True)
class Provenance:
    """Everything needed to tell how a figure was obtained. Serialised whole into the store."""

    captured_at: str
    host: dict[str, Any]
    gpus: dict[str, Any]
    engine: dict[str, Any]
    argv: tuple[str, ...]
    environment: dict[str, str]
    recipe_id: str
    recipe_sha256: str
    """sha256 of the recipe's canonical JSON: the store's key for the recipe row."""
    recipe_source_sha256: str
    """sha256 of the document the recipe was read from (registry JSON or LocalMaxxing page)."""
    model_id: str
    model_revision: str | None
    farm_version: str
    farm_commit: str | None
    method: dict[str, Any]
    prompt_sha256: dict[str, str]
    output_sha256: dict[str, str]
    cache_state: str
    worker_id: str
    attempt: int
    simulated: bool
    absent_figures: dict[str, str] = field(default_factory=dict)
    """Each figure the sweep could not measure (so it has none), with the reason."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def farm_version() -> str:
    return farm.__version__


def farm_commit() -> str | None:
    """The git commit of the farm's source tree, when it runs from a checkout."""
    root = Path(farm.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()
