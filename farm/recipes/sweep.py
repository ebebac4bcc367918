"""The sweep spec: a TOML file in jobs/ naming a recipe and the measurement plan (the seed's method as data)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WORKLOADS = ("code", "prose", "math")
"""The prompts the farm ships (farm.bench.prompts). The seed measured all three."""


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DecodePlan(_Spec):
    """Two-point decode: the same prefix-warmed prompt at two output lengths; the difference cancels prefill."""

    workloads: tuple[Literal["code", "prose", "math"], ...] = WORKLOADS
    short_output_tokens: int = Field(64, ge=1, description="the seed's short point")
    long_output_tokens: int = Field(896, ge=2, description="the seed's long point")

    @model_validator(mode="after")
    def _long_after_short(self) -> DecodePlan:
        if self.long_output_tokens <= self.short_output_tokens:
            raise ValueError("long_output_tokens must be greater than short_output_tokens")
        return self


class PrefillPlan(_Spec):
    """TTFT on long prompts of exact token counts, each with a unique prefix so no cache is hit."""

    prompt_tokens: tuple[int, ...] = Field((107_016,), min_length=1, description="the seed's 107,016 tokens")
    output_tokens: int = Field(1, ge=1, description="one token is enough to time the first one")


class ShortTTFTPlan(_Spec):
    """TTFT on a short prompt."""

    prompt_tokens: int = Field(32, ge=1)


class PrefixCachePlan(_Spec):
    """The first long prefill prompt sent again: TTFT served from the prefix cache."""

    enabled: bool = True


class ConcurrencyPlan(_Spec):
    """N streams at once: aggregate and per-stream tok/s; TTFT, ITL, TPOT and E2E percentiles."""

    levels: tuple[int, ...] = Field((1, 2, 4, 8, 16, 32, 64), min_length=1)
    prompt_tokens: int = Field(512, ge=1)
    output_tokens: int = Field(256, ge=2)
    workload: Literal["code", "prose", "math"] = "code"

    @model_validator(mode="after")
    def _positive_levels(self) -> ConcurrencyPlan:
        if any(level < 1 for level in self.levels):
            raise ValueError("every concurrency level must be at least 1")
        return self


class SweepPlan(_Spec):
    """How to measure. A section left out of the spec is not measured."""

    repeats: int = Field(3, ge=1, le=100, description="the seed's 'mean of 3 runs'")
    warmup_requests: int = Field(1, ge=0, description="requests sent and discarded before measuring")
    temperature: float = Field(0.0, ge=0.0, description="greedy, as the seed")
    thinking: bool = Field(False, description="the seed ran with thinking off")
    time_budget_s: float = Field(3600.0, gt=0, description="the whole sweep, warm-up included")
    request_timeout_s: float = Field(600.0, gt=0, description="one request; a 107k prefill takes 10 s on the seed")
    api: Literal["chat", "completions"] = Field(
        "chat", description="decode and concurrency requests: chat (thinking off through the template) or raw"
    )
    decode: DecodePlan | None = DecodePlan()
    prefill: PrefillPlan | None = PrefillPlan()
    short_ttft: ShortTTFTPlan | None = ShortTTFTPlan()
    prefix_cache: PrefixCachePlan | None = PrefixCachePlan()
    concurrency: ConcurrencyPlan | None = None


class SweepSpec(_Spec):
    """A sweep spec file: a name, the recipe it measures, and the plan."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str = Field(min_length=1, description="path to the recipe document, relative to the spec file")
    description: str | None = None
    max_attempts: int = Field(3, ge=1, le=20, description="claims before the job fails for good")
    plan: SweepPlan = SweepPlan()
