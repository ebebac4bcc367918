"""The validated recipe: one shape for every source format (registry JSON, LocalMaxxing page)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from farm.engines.registry import ENGINES

ENGINE_LAUNCHERS: dict[str, tuple[str, ...]] = {name: kind.launcher for name, kind in ENGINES.items()}
"""Each engine's canonical name and the tokens its server command starts with in `Recipe.argv` (the executable
and its one subcommand or module: the table's `launcher`). Other spellings of the same command (`python -m
vllm.entrypoints.openai.api_server`, `python3 -m sglang.launch_server`, `/opt/llama.cpp/build/bin/llama-server`)
are rewritten to these by farm.recipes.commands."""

KNOWN_ENGINES: frozenset[str] = frozenset(ENGINE_LAUNCHERS)
"""Canonical engine names a recipe may ask for (aliases such as `llama-cpp` or `vLLM`: the table's)."""

ENGINE_SUBCOMMANDS: dict[str, str] = {
    name: launcher[1] for name, launcher in ENGINE_LAUNCHERS.items() if len(launcher) == 2
}
"""The subcommand that starts an engine's server (`vllm serve`); others (`vllm bench`) serve nothing."""

POSITIONAL_MODEL_ENGINES: frozenset[str] = frozenset(name for name, kind in ENGINES.items() if kind.positional_model)
"""Engines whose canonical argv names the model as the first argument after the launcher."""

COMMAND_SOURCES = (
    "argv",
    "metadata.localmaxxing.tokenized.arguments",
    "metadata.localmaxxing.observed_command",
    "launch.arguments",
    "draft_launch.arguments",
    "engine+model+engine_flags",
    "localmaxxing.tokenized.arguments",
    "localmaxxing.observed_command",
)
"""Where a recipe's command can come from (RecipeProvenance.command_source), in the order they are tried."""

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
    command_source: str | None = Field(None, description="the field the argv was read from (COMMAND_SOURCES)")
    source_command: tuple[str, ...] = Field((), description="the command's tokens as that field gave them")
    launch_kind: str | None = Field(None, description="the registry's launch.kind: reference, docker, ...")
    model_source: str | None = Field(None, description="where model_id came from: argv, model_id, model_instance_id")
    instance_repository: str | None = Field(
        None, description="the repository the registry's model instance names (farm.recipes.instances)"
    )
    instance_revision: str | None = Field(None, description="the revision the registry's model instance pins")
    command_notes: tuple[str, ...] = Field(
        (), description="what changed between the recipe's command and the canonical argv, and why"
    )
    content_sha256: str = Field(description="sha256 of the source document's bytes")
    dropped_environment: tuple[str, ...] = Field(
        (), description="credential variables the recipe named, dropped unread: the engine gets the worker's own"
    )


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
    argv: tuple[str, ...] = Field(description="the launch command as tokens, e.g. (EXECUTABLE, SUBCOMMAND, MODEL, ...)")
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="variables the command set for the engine process (leading VAR=value words, "
        "tokenized.environment); never part of argv. A container's own variables are in container.environment",
    )
    model_instance_id: str | None = Field(None, description="the registry's model_instance_id, when it gives one")
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
        launcher = ENGINE_LAUNCHERS.get(self.engine.name, ())
        if tuple(args[: len(launcher)]) == launcher:
            args = args[len(launcher) :]
        if self.engine.name in POSITIONAL_MODEL_ENGINES and args and not args[0].startswith("-"):
            args = args[1:]
        return tuple(args)

    @property
    def launcher(self) -> tuple[str, ...]:
        """The executable and subcommand (or module) tokens that start argv."""
        return ENGINE_LAUNCHERS.get(self.engine.name, self.argv[:1])
