"""Provenance: the value object attached to every result, what the worker can read of its own host, how a
run's provenance is captured, and the one scrubber that keeps secrets out of everything stored or printed.

The scrubber (`scrub_text`) knows these shapes, and every path that persists or prints engine output, failure
messages, artifacts, environments or provenance goes through it:

- tokens by their shape: `hf_...`, `sk-...` (OpenAI, Anthropic), `ghp_`/`gho_`/`ghs_`/`github_pat_...`,
  `glpat-...`, `xox?-...` (Slack), `AKIA...` (AWS access key ids);
- credentials in URLs: `scheme://user:password@host` keeps the user and loses the password;
- `Authorization: Bearer ...` / `Basic ...` values;
- assignments of secret-named variables: `*_KEY`, `*_TOKEN`, `*PASSWORD`, `*PASSWD`, `*SECRET`, `*_APIKEY`
  (`NAME=value`, `NAME: value`, `"NAME": "value"`), and flags such as `--hf-token VALUE` or `--api-key=VALUE`.

`mask_url` prints a connection URL with its password hidden.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import farm
from farm.domain import Artifact

if TYPE_CHECKING:
    from farm.bench.runner import SweepOutcome
    from farm.engines.base import Engine
    from farm.hardware.probe import HardwareReport
    from farm.recipes.model import Recipe
    from farm.recipes.sweep import SweepPlan

REDACTED = "<redacted>"
"""What a secret is replaced with."""

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|CREDENTIAL|PRIVATE)", re.IGNORECASE)
"""An environment variable whose name says it holds a secret (used on environments, name by name)."""

SECRET_VALUE = re.compile(
    r"^(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"
    r"|glpat-[A-Za-z0-9_-]{8,}|xox[abposr]-[A-Za-z0-9-]{8,}|AKIA[0-9A-Z]{16})$"
)
"""A value that is a token by its shape, whatever its name."""

_TOKEN = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"
    r"|glpat-[A-Za-z0-9_-]{8,}|xox[abposr]-[A-Za-z0-9-]{8,}|AKIA[0-9A-Z]{16})\b"
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^@\s/]+)@")
_AUTH_HEADER = re.compile(r"\b(?P<kind>Bearer|Basic|Token)(?P<gap>\s+)(?P<value>[A-Za-z0-9._~+/=-]{4,})", re.IGNORECASE)
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<name>\b(?:[A-Za-z0-9]+_)*(?:[A-Za-z0-9]*(?:PASSWORD|PASSWD|SECRET|APIKEY)|KEY|TOKEN|API_KEY)\b)"
    r"(?P<sep>[\"']?\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]]+)",
    re.IGNORECASE,
)
_SECRET_FLAG = re.compile(
    r"(?P<name>--(?:[a-z0-9]+-)*(?:token|key|api-key|password|secret))(?P<sep>=|\s+)(?P<value>[^\s-][^\s]*)",
    re.IGNORECASE,
)


def scrub_text(text: str) -> str:
    """The text with every secret of the shapes in the module docstring replaced by `<redacted>`."""
    if not text:
        return text
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m['kind']}{m['gap']}{REDACTED}", text)
    text = _SECRET_ASSIGNMENT.sub(_redact_value, text)
    text = _SECRET_FLAG.sub(_redact_value, text)
    return _TOKEN.sub(REDACTED, text)


def _redact_value(match: re.Match[str]) -> str:
    value = match["value"]
    if value == REDACTED or value.strip("\"'") == REDACTED:
        return match[0]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['name']}{match['sep']}{quote}{REDACTED}{quote}"


_SECRET_FLAG_NAME = re.compile(r"^--(?:[a-z0-9]+-)*(?:token|key|api-key|password|secret)$", re.IGNORECASE)


def scrub_argv(argv: Sequence[str]) -> list[str]:
    """An argument list with secrets removed: each argument scrubbed, and the value after a secret-named flag
    (`--hf-token VALUE`) redacted."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        after_secret_flag = index > 0 and _SECRET_FLAG_NAME.match(argv[index - 1]) is not None
        out.append(REDACTED if after_secret_flag and not arg.startswith("--") else scrub_text(arg))
    return out


def scrub_json(value: Any) -> Any:
    """A JSON-like value with every string scrubbed, and the value of every secret-named key redacted."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, Mapping):
        return {
            key: (REDACTED if isinstance(key, str) and SECRET_NAME.search(key) and item else scrub_json(item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        if all(isinstance(item, str) for item in value):
            return scrub_argv(value)
        return [scrub_json(item) for item in value]
    return value


def scrub_artifact(artifact: Artifact) -> Artifact:
    """An artifact (an engine log) with its secrets removed."""
    return Artifact(name=artifact.name, content=scrub_text(artifact.content), media_type=artifact.media_type)


def mask_url(url: str) -> str:
    """A connection URL fit to print: its password (if any) replaced, e.g. for FARM_DATABASE_URL."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url)


def scrub_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with every secret's value replaced, by name or by the shape of the value."""
    return {k: (REDACTED if SECRET_NAME.search(k) or SECRET_VALUE.match(v) else scrub_text(v)) for k, v in env.items()}


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
    recipe_argv: tuple[str, ...] = ()
    """The command as the recipe wrote it (scrubbed); `argv` is the canonical command judged and launched."""
    command_source: str | None = None
    """Which of the recipe's copies of its command was used (e.g. observed_command, tokenized.arguments)."""
    absent_figures: dict[str, str] = field(default_factory=dict)
    """Each figure the sweep could not measure (so it has none), with the reason."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["recipe_argv"] = list(self.recipe_argv)
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


def _engine_provenance(engine: Engine, recipe: Recipe, outcome: SweepOutcome) -> dict[str, Any]:
    """The `engine` part: what the farm launched, or, for an engine that describes itself (an endpoint the farm
    did not launch has `provenance()`: kind "endpoint", its URL without credentials), that description."""
    launched: dict[str, Any] = {
        "name": "sim" if engine.simulated else recipe.engine.name,
        "recipe_engine": recipe.engine.name,
        "version": outcome.engine_version or engine.version(),
        "image_digest": recipe.container.digest if recipe.container else None,
    }
    describe = getattr(engine, "provenance", None)
    if not callable(describe):
        return launched
    described = dict(describe())
    if outcome.engine_version:
        described["version"] = outcome.engine_version
    return {**launched, **described, "recipe_engine": recipe.engine.name}


def capture_provenance(
    *,
    host: HostInfo,
    report: HardwareReport,
    gpu_names: tuple[str, ...],
    recipe: Recipe,
    recipe_sha256: str,
    plan: SweepPlan,
    engine: Engine,
    outcome: SweepOutcome,
    started: str,
    worker_id: str,
    attempt: int,
) -> Provenance:
    """The provenance of one run: the host and its cards, the engine, the exact argv and environment (scrubbed),
    the recipe, the method, the prompt and output hashes, and who ran which attempt."""
    return Provenance(
        captured_at=now_utc(),
        host=asdict(host) | {"started_at": started},
        gpus={
            "hardware_id": report.hardware_id,
            "count": report.count,
            "declared": report.declared,
            "names": list(gpu_names),
            "uuids": [g.uuid for g in report.gpus],
            "memory_total_mib": [g.memory_total_mib for g in report.gpus],
            "driver_version": report.driver_version,
            "cuda_version": report.cuda_version,
            "interconnect": report.interconnect,
            "power_limit_w": [g.power_limit_w for g in report.gpus],
        },
        engine=_engine_provenance(engine, recipe, outcome),
        argv=tuple(scrub_argv(engine.argv)),
        recipe_argv=tuple(scrub_argv(recipe.argv)),
        command_source=recipe.provenance.command_source,
        environment=scrub_environment(engine.environment),
        recipe_id=recipe.id,
        recipe_sha256=recipe_sha256,
        recipe_source_sha256=recipe.provenance.content_sha256,
        model_id=recipe.model_id,
        model_revision=None,
        farm_version=farm_version(),
        farm_commit=farm_commit(),
        method=plan.model_dump(mode="json"),
        prompt_sha256=dict(outcome.prompt_sha256),
        output_sha256=dict(outcome.output_sha256),
        cache_state="prefix cache warmed per workload; prefill prompts carry a unique prefix",
        worker_id=worker_id,
        attempt=attempt,
        simulated=engine.simulated,
        absent_figures=dict(outcome.absent),
        extra={"prompt_sized_by": outcome.prompt_sized_by},
    )
