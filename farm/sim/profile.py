"""The simulator's profile: what it claims to be (model, version, GPUs) and its timing model's parameters.

Profiles are TOML files in `farm/sim/profiles/` (by name) or anywhere (by path); `--set key=value` overrides a
field after loading, dotted keys reach into tables (`decode_tok_s.code=300`). Every field is validated
(`extra="forbid"`), so a typo in a profile names the file and the field.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from farm.bench.prompts import WORKLOAD_MARKERS
from farm.errors import InputError

PROFILE_PACKAGE = "farm.sim.profiles"


class SimProfileError(InputError):
    """A simulator profile that cannot be found, parsed or validated."""


class SimProfile(BaseModel):
    """One simulated host + engine + model. Times are seconds, rates tokens per second."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    served_model_name: str
    model_root: str | None = Field(None, description="`root` in /v1/models; the served name when unset")
    version: str = Field(description="what /version answers")
    max_model_len: int = Field(gt=0)
    max_position_embeddings: int | None = Field(
        None,
        gt=0,
        description="the model's own context limit: a recipe's --max-model-len above it makes the engine exit at "
        "start, as vLLM does (None: no limit)",
    )
    startup_s: float = Field(1.0, ge=0, description="seconds before the socket listens (vLLM loads the model)")

    # Time to first token: base + prefill(uncached) + cached * cached_s_per_token; prefill(n) = a*n + b*n².
    base_latency_s: float = Field(ge=0)
    prefill_linear_s_per_token: float = Field(ge=0, description="a: the per-token (MLP, projection) cost")
    prefill_quadratic_s_per_token2: float = Field(ge=0, description="b: the attention cost, quadratic in n")
    cached_s_per_token: float = Field(0.0, ge=0, description="cost of a prompt token served from the cache")

    # Decode: per-stream rate r = decode_tok_s[workload] / (1 + contention * (c - 1)), c streams decoding.
    decode_tok_s: dict[str, float] = Field(description="one-stream decode rate per workload")
    default_decode_tok_s: float = Field(gt=0, description="rate for a prompt no marker matches")
    contention: float = Field(0.0, ge=0)
    decode_s_per_context_token: float = Field(
        0.0, ge=0, description="k: each output token takes 1/r + k*d seconds with d prompt tokens in context"
    )
    workload_markers: dict[str, str] = Field(default_factory=lambda: dict(WORKLOAD_MARKERS))

    # Chunking: speculative decoding (K drafts, per-token acceptance p) or a fixed number of tokens per chunk.
    num_speculative_tokens: int = Field(0, ge=0)
    acceptance_rate: float = Field(0.0, ge=0, le=1)
    tokens_per_chunk: int = Field(1, ge=1, description="without spec decoding: tokens per streamed chunk")

    # Scheduling and caches.
    max_num_seqs: int = Field(256, gt=0, description="requests running at once; the rest wait")
    prefix_block_tokens: int = Field(256, gt=0)
    prefix_cache_blocks: int = Field(4096, ge=0, description="LRU capacity in blocks; 0 disables the cache")
    kv_cache_tokens: int = Field(1_000_000, gt=0, description="KV capacity behind vllm:kv_cache_usage_perc")

    # Generation without ignore_eos stops ("EOS") after this many tokens (at least min_tokens).
    eos_after_tokens: int = Field(200, gt=0)
    add_bos: bool = Field(True, description="a completion prompt gets one BOS token (add_special_tokens)")

    # Simulated GPUs (GET /sim/gpu).
    gpu_name: str = "simulated GPU"
    gpu_count: int = Field(1, ge=0)
    gpu_memory_total_mib: int = Field(81920, ge=0)
    gpu_memory_used_mib: int = Field(0, ge=0)

    # Simulated power per card, W (farm.sim.power): no power model when power_idle_w is unset.
    power_idle_w: float | None = Field(None, ge=0, description="a card with the model loaded and nothing to do")
    power_prefill_w: float = Field(0.0, ge=0, description="while any prompt is in prefill (compute-bound)")
    power_decode_w: float = Field(0.0, ge=0, description="one stream decoding")
    power_per_stream_w: float = Field(0.0, ge=0, description="added by each further stream decoding")
    power_limit_w: float | None = Field(None, gt=0, description="the card's power limit: no draw above it")

    tokenize_endpoint: bool = Field(
        True, description="serve /tokenize and /detokenize (false: a plain OpenAI-compatible server without them)"
    )
    seed: int = Field(0, description="seeds every random draw (spec-decode acceptance, sampled text)")
    dialect: Literal["vllm", "sglang", "llamacpp", "ollama", "lmstudio", "tabbyapi", "mlx"] = Field(
        "vllm",
        description="the server it plays: vllm (/version, vllm:* metrics), sglang (/get_server_info, "
        "/get_model_info, sglang:* metrics, no /version), or llamacpp, ollama, lmstudio, tabbyapi, mlx "
        "(farm.sim.dialects)",
    )
    dev_mode: bool = Field(
        True,
        description="vllm dialect: served as with VLLM_SERVER_DEV_MODE=1, so POST /reset_prefix_cache is there "
        "(false: HTTP 404, as a vLLM without dev mode answers)",
    )
    slot_save_path: bool = Field(
        False,
        description="llamacpp dialect: started with --slot-save-path, so POST /slots/{id}?action=erase works "
        "(without it llama-server answers every slot action with HTTP 501)",
    )

    @model_validator(mode="after")
    def _check(self) -> SimProfile:
        if self.gpu_memory_used_mib > self.gpu_memory_total_mib:
            raise ValueError("gpu_memory_used_mib exceeds gpu_memory_total_mib")
        if self.power_idle_w is not None and self.power_limit_w is not None and self.power_limit_w < self.power_idle_w:
            raise ValueError("power_limit_w is below power_idle_w")
        if any(rate <= 0 for rate in self.decode_tok_s.values()):
            raise ValueError("every decode_tok_s rate must be positive")
        return self

    @property
    def spec_decoding(self) -> bool:
        return self.num_speculative_tokens > 0

    @property
    def models_power(self) -> bool:
        return self.power_idle_w is not None

    @property
    def root(self) -> str:
        return self.model_root or self.served_model_name


def profile_names() -> list[str]:
    """The names of the profiles shipped in `farm/sim/profiles/`."""
    folder = resources.files(PROFILE_PACKAGE)
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def _read_named(name: str) -> tuple[str, str]:
    resource = resources.files(PROFILE_PACKAGE) / f"{name}.toml"
    if not resource.is_file():
        raise SimProfileError(
            f"no simulator profile named {name!r} (known: {', '.join(profile_names())})", field="profile"
        )
    return resource.read_text(encoding="utf-8"), f"{PROFILE_PACKAGE}/{name}.toml"


def parse_override(item: str) -> tuple[str, Any]:
    """`key=value` → (key, value); the value is read as TOML, or kept as a string when it is not TOML."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise SimProfileError(f"expected key=value, got {item!r}", field="--set")
    try:
        value: Any = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of `data` with dotted keys set (`decode_tok_s.code` sets one entry of a table)."""
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        target = merged
        for part in parts[:-1]:
            nested = target.get(part)
            if not isinstance(nested, dict):
                nested = {}
                target[part] = nested
            target = nested
        target[parts[-1]] = value
    return merged


def load_profile(
    name: str | None = None,
    *,
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> SimProfile:
    """Load a profile by name (shipped) or by path, then apply `overrides` (dotted keys) and validate."""
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SimProfileError(f"cannot read the profile: {exc}", source=source) from exc
    elif name is not None:
        text, source = _read_named(name)
    else:
        raise SimProfileError("give a profile name or a profile file", field="profile")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SimProfileError(f"not valid TOML: {exc}", source=source) from exc
    data = apply_overrides(data, overrides or {})
    try:
        return SimProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise SimProfileError(first["msg"], source=source, field=field) from exc
