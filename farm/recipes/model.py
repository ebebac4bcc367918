"""The validated recipe: one shape for every source format (registry JSON, LocalMaxxing page)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

KNOWN_ENGINES: frozenset[str] = frozenset({"vllm"})
"""Engine names a recipe may ask for. A recipe's argv starts with its engine's executable (the same name)."""

ENGINE_SUBCOMMANDS: dict[str, str] = {"vllm": "serve"}
"""The subcommand that starts an engine's server (`vllm serve`); others (`vllm bench`) serve nothing."""

SOURCE_FORMATS = ("local-ai-registry/v1", "localmaxxing-page")
"""The recipe documents the farm reads (farm.recipes.parse)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceRef(_Frozen):
    """One place a fact came from."""

    kind: str
    url: str | None = None
    captured_at: str | None = None


class RecipeProvenance(_Frozen):
    """Where the recipe came from and when it was captured."""

    source_format: str = Field(description="'local-ai-registry/v1' or 'localmaxxing-page'")
    captured_at: str | None = None
    sources: tuple[SourceRef, ...] = ()
    run_id: str | None = None
    run_url: str | None = None
    argv_fidelity: str | None = None
    content_sha256: str = Field(description="sha256 of the source document's bytes")


class Mount(_Frozen):
    source: str
    target: str
    read_only: bool = False


class ContainerLaunch(_Frozen):
    """A container launch (the registry's `draft_launch` of kind docker)."""

    image: str
    arguments: tuple[str, ...] = ()
    entrypoint: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    ipc: str | None = None
    shm_size: str | None = None
    mounts: tuple[Mount, ...] = ()
    container_port: int | None = None
    host_port: int | None = None
    accelerator_backend: str | None = None

    @property
    def digest(self) -> str | None:
        """The image digest (`sha256:...`) when the image is pinned by digest."""
        _, sep, digest = self.image.partition("@")
        return digest if sep else None


class Engine(_Frozen):
    name: str
    version: str | None = None


class ServingLimits(_Frozen):
    max_context_tokens: int | None = None
    max_concurrency: int | None = None
    tensor_parallel: int | None = None
    kv_cache_tokens: int | None = None


class Recipe(_Frozen):
    """What to run: model, hardware, engine and the exact launch argv."""

    id: str
    model_id: str = Field(description="the model repository the engine serves, e.g. deepseek-ai/DeepSeek-V4-Flash-0731")
    hardware_id: str = Field(description="a local-ai-registry hardware id, e.g. rtx-pro-6000-blackwell-96gb")
    hardware_count: int = Field(ge=1)
    engine: Engine
    argv: tuple[str, ...] = Field(description="the launch command as tokens, e.g. ('vllm', 'serve', MODEL, ...)")
    container: ContainerLaunch | None = None
    serving: ServingLimits = ServingLimits()
    provenance: RecipeProvenance
    notes: str | None = None

    @property
    def hardware_class(self) -> str:
        from farm.domain import hardware_class

        return hardware_class(self.hardware_id, self.hardware_count)

    @property
    def engine_args(self) -> tuple[str, ...]:
        """The argv after the executable, subcommand and model (the flags the engine is launched with)."""
        args = list(self.argv)
        if args and args[0] == "vllm":
            args = args[1:]
        if args and args[0] == "serve":
            args = args[1:]
        if args and not args[0].startswith("-"):
            args = args[1:]
        return tuple(args)
