"""The engine seam: what the worker needs from an engine under test, whatever runs it, and what the farm knows
about each engine (`EngineKind`, one line of the table in farm.engines.registry)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec, CanonicalCommand
    from farm.engines.environment_names import EngineEnvironment
    from farm.engines.reparse import Mirror
    from farm.hardware.probe import HardwareProbe
    from farm.recipes.model import Recipe


@dataclass(frozen=True)
class PrefixCacheReset:
    """What an engine's own reset procedure (`EngineKind.prefix_cache_resetter`) did before a cold measurement."""

    done: str
    """What was done, in words, for the figures' params (`cache_reset`)."""
    emptied: bool
    """The engine's cache was emptied (a conversation or trace then starts from nothing)."""
    cold_request_fields: Mapping[str, object] = field(default_factory=dict)
    """Body fields that make one request reuse nothing (llama.cpp: `{"cache_prompt": false}`), for the requests
    of a measurement meant cold; empty: the engine has none."""


class Engine(Protocol):
    """One engine instance for one job attempt. `stop` is safe to call more than once and on every exit path."""

    @property
    def base_url(self) -> str: ...

    @property
    def served_model(self) -> str: ...

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def simulated(self) -> bool: ...

    @property
    def environment(self) -> dict[str, str]:
        """The environment the engine was started with (secrets are scrubbed before it is stored)."""
        ...

    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the engine serves, or raise EngineError (start-up timeout, exited, crashed)."""
        ...

    def version(self) -> str | None: ...

    def alive(self) -> bool: ...

    def stop(self) -> int | None:
        """Stop the engine's whole process group; return its exit status (None if it never started)."""
        ...

    def log_text(self) -> str: ...

    def classify(self, *, started: bool) -> str:
        """The failure class of an engine that exited, from its log and exit."""
        ...

    @property
    def log_path(self) -> Path: ...


@dataclass(frozen=True)
class EngineKind:
    """One engine the farm reads recipes for: one line of the table (farm.engines.registry.ENGINES), defined in
    the engine's own folder (`farm/engines/<engine>/__init__.py`). Everything another room needs to know about
    an engine is here; that room asks the table and names no engine."""

    name: str
    """Canonical, lower case (the recipe's `engine.name`)."""
    spec: Callable[[], ArgSpec]
    """Its argument spec (loaded when first asked)."""
    spec_source: str
    """Where the option list came from."""
    launcher: tuple[str, ...]
    """The tokens its server command starts with in `Recipe.argv` (executable and subcommand or module)."""
    aliases: tuple[str, ...] = ()
    """Other spellings of its name in recipes (compared lowercased, trimmed)."""
    python_modules: tuple[str, ...] = ()
    """`python -m MODULE` spellings of its launcher."""
    model_flags: tuple[str, ...] = ()
    """Options that name the model it serves (the first is what its docs use)."""
    positional_model: bool = False
    """Its canonical argv names the model as the first argument after the launcher."""
    parallel_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Its spellings of the tensor, pipeline and data parallel sizes (devices used = their product); empty: it
    uses every device it is given, so the recipe's hardware count stands on its own."""
    context_flags: tuple[str, ...] = ()
    """The option that sets its context length, in every spelling it accepts."""
    metric_prefix: str | None = None
    """The prefix of its own /metrics counters (`sglang:`); None: it serves none, or vLLM's own names."""
    metric_names: Mapping[str, str] = field(default_factory=dict)
    """The farm's counter names (vLLM's, farm.bench.metrics.TOKEN_COUNTERS) to its own."""
    prefix_cache_reset: str | None = None
    """The path it empties its prefix cache at (`POST`), before a measurement that must start cold; None: it
    offers none (the farm's cold measurements then rely on unique prefixes, and say so)."""
    prefix_cache_resetter: str | None = None
    """The module whose `async reset_prefix_cache(session, base_url, timeout_s) -> PrefixCacheReset` makes its
    cache cold where one POST does not (llama.cpp: an erase per slot, or `cache_prompt: false` per request);
    it is used instead of `prefix_cache_reset`."""
    artifact: str | None = None
    """The local model file it loads where it takes no repository: "gguf" or "mlx" (None: a repository)."""
    adapter: str | None = None
    """The module of its worker adapter (its `launch` builds the Engine; farm.worker.engines imports it when a
    worker runs the engine, so the table imports no adapter and, through them, no judge); None: no worker
    launches it, and its recipes are refused at submit."""
    spec_versions: Mapping[str, Callable[[], ArgSpec]] = field(default_factory=dict)
    """Its shipped specs by engine version (release numbers, oldest first); `spec` is the newest, the version
    the farm's workers run unless their profile says otherwise (`default_version`). Empty: `spec` alone."""
    default_version: str | None = None
    """The version `spec` is of (what submit judges against), where the engine ships specs per version; None
    with `spec_versions`: `spec` is newer than every release among them (a main branch's)."""
    launcher_spellings: tuple[tuple[str, ...], ...] = ()
    """Other ways recipes start its server, besides `launcher` and `python -m` (`python_modules`): an executable's
    name (matched wherever the executable lies) and the subcommands after it (`sglang serve`, `mlx_lm server`,
    `lms load`). The first token of `launcher` or of one of these, alone, is its executable for messages."""
    not_servers: Mapping[str, str] = field(default_factory=dict)
    """Executables of its project that recipes name but that serve nothing (llama-bench, llama-cli), with what
    each is: a recipe starting one is refused, or translated where its home says how."""
    tools: Mapping[str, str] = field(default_factory=dict)
    """Tools among `not_servers` whose recorded run says how the model was loaded, by executable name, and how:
    "benchmark" (llama-bench: its settings are the server's, its benchmark options the sweep's) or "client"
    (llama-cli: its load options are the server's, its prompt is left out). The adapter's
    `tool_to_server(argv)` rewrites such a run as the server's command."""
    model_steps: tuple[str, ...] = ()
    """Subcommands of its executable that name the one model its server then serves (`ollama pull MODEL`,
    `ollama run MODEL`): a recorded step of that shape names the recipe's model plainly."""
    model_name: str | None = None
    """A regular expression of the model names those steps take (Ollama's `NAME[:TAG]` and `hf.co/ORG/REPO:QUANT`)."""
    registry_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The registry's `metadata.localmaxxing.engine_flags` keys (`kvCacheDtype`) and the options each becomes in
    its command (a generated command carries them)."""
    official_images: tuple[str, ...] = ()
    """Regular expressions of its official container images (`lmsysorg/sglang`): a launch in one of them runs
    this engine, whatever the recipe's engine name says, when the arguments agree."""
    repository_options: tuple[str, str] | None = None
    """Where it loads one file of a repository (llama.cpp's GGUF): its options for the repository and for the
    file (`--hf-repo`, `--hf-file`); a command the farm builds names a repository with the first. None: it loads
    a whole repository with its first model flag."""
    revision_option: str | None = None
    """The option that pins the repository it loads to a commit (`--revision`); None: it has no such option."""
    optional_positional_model: bool = False
    """Its command may name the model as the first argument, or not at all (LM Studio's `lms load MODEL`)."""
    serving_options: Mapping[str, str] = field(default_factory=dict)
    """How the registry's `serving` block becomes its options in a command the farm builds (`max_context_tokens`:
    `--max-model-len`); `max_context_tokens` is also the option a context the notes state is carried with."""
    inherent_flags: Mapping[str, Callable[[object], bool]] = field(default_factory=dict)
    """Registry `engine_flags` it always has that way, with no option to set them (MLX: flash attention, every
    layer on the GPU): a value the test accepts needs no option."""
    other_servers: Mapping[str, str] = field(default_factory=dict)
    """Other servers that recipes file under this engine's name, as their `engine.version` names them (a regular
    expression, matched case-insensitively, to what that server is): oMLX under `mlx`. A recipe run on one of them
    is refused, since the farm would launch this engine's own server instead of the one that ran."""
    read_version: Callable[[tuple[str, ...]], str | None] | None = None
    """Asks the host's executable which of `spec_versions` it is (llama-server --version); None: the profile
    says (`version`), or the default stands."""

    # What the rooms of the judge, the container launch, the worker and the demo ask of an engine (engines
    # helper, issue 21): each room reads these instead of naming the engine.
    environment: Callable[[], EngineEnvironment] | None = None
    """What its home says of its environment variables (its `environment.py`); None: the runtime tables only."""
    images: EngineImages | None = None
    """Its official container images and how they run its server; None: it has none the farm runs."""
    read_back: Callable[[ArgSpec], Mirror] | None = None
    """Its own parser's declarations, to read a rendered command back (farm.engines.readback); None: the farm
    has none of its declarations, and the rendering stands as judged."""
    loads_model_id: bool = False
    """Its adapter hands it the recipe's model id to load when the command names no model (a repository); else
    the model is the host's file and the id only its served name."""
    host_env_allowlist: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    """The names a worker passes it from its own environment unless the host's profile lists others."""
    demo: EngineDemo | None = None
    """`farm demo --engine NAME`: its sweep, its worker profile, what it prepares first; None: no demo."""
    own_timing: OwnTiming | None = None
    """Its own per-request timing report and where it gives it (Ollama's `eval_count`/`eval_duration`): the
    runner asks it beside the client's measurement, as the server's truth; None: it reports none apart."""
    container_adapter: str | None = None
    """The module whose `launch_container` runs a recipe's own image of it through docker (a worker of kind
    `<name>-container`); None: its images are judged at submit only."""
    host_spec: Callable[[Path], ArgSpec] | None = None
    """Reads an argument list generated on a host for its own build (the profile's `engine.policy` file for it);
    None: it has none, its shipped specs judge."""

    # What the recipes room asks of an engine (issue 21): it reads these instead of naming the engine.
    python_package: str | None = None
    """Its Python package, where a recorded line names its server as any module inside it (`sglang.srt...`)."""
    other_subcommands: bool = False
    """Its executable runs other subcommands too, none of them a server (`vllm bench`): a recorded command of it
    with another subcommand is refused as such."""
    draft_model_flags: tuple[str, ...] = ()
    """Its spellings of a draft model file (llama-server's `-md`), which a host maps to its own file; empty: its
    drafts are repositories, or it has none."""
    attention_data_parallel: str | None = None
    """The option under which its data-parallel ranks run inside the tensor-parallel devices (SGLang's
    `--enable-dp-attention`): the data-parallel size then uses no devices of its own."""
    hub_model_prefix: str = ""
    """What it writes before a Hugging Face repository it pulls as a model name (Ollama's `hf.co/`)."""
    artifact_repository: Callable[[str], bool] | None = None
    """Whether a repository holds its local artifact (an MLX conversion), where that is not told by `gguf` in the
    name; None: the GGUF rule, or none."""
    title: str | None = None
    """Its name as prose writes it (`TabbyAPI`); None: `name`."""
    step_context: str | None = None
    """Where it sets the context of a model its `model_steps` name, since those steps take no option for it
    (Ollama: `OLLAMA_CONTEXT_LENGTH or num_ctx`)."""
    config_option: str | None = None
    """The option naming a config document that holds its whole command (TabbyAPI's `--config`): where a recipe's
    container mounts a registry asset there, the asset's document (less its listen address) takes the path's
    place; None: it has none."""
    gguf_file_only: bool = False
    """It loads a GGUF as one file (with the base model's tokenizer), never a GGUF repository of several
    quantizations: a command naming such a repository without its file is refused."""
    mtp_options: Callable[[int], tuple[str, ...]] | None = None
    """The options that turn on its MTP drafting with that many tokens, for a generated command the notes say ran
    with MTP; None: the farm cannot add them."""
    kv_cache_split: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    """Its options for the K and the V cache types, each in every spelling (the canonical first), where it sets
    them apart (llama.cpp); None: one option, or none."""
    kv_cache_dtype_option: str | None = None
    """Its one option for the KV cache type (`--kv-cache-dtype`), where a stated fp8 cache becomes it and f16 or
    bf16 is its default; None: it has none."""

    @property
    def prose_name(self) -> str:
        """Its name as prose writes it."""
        return self.title or self.name

    def spec_at(self, version: str | None) -> tuple[ArgSpec, str]:
        """The spec a worker running `version` judges with, and a line saying which, for provenance: that
        version's own spec, else the nearest older one shipped, else the oldest (older than all), else (no
        version, or one without a number) the default."""
        if version is None or not self.spec_versions:
            spec = self.spec()
            runs = "" if version is None else f" (no spec per version; runs {version})"
            return spec, f"{self.name} {spec.version}{runs}"
        if version in self.spec_versions:
            spec = self.spec_versions[version]()
            return spec, f"{self.name} {spec.version}"
        wanted = version_key(version)
        if self.default_version is None and wanted and all(version_key(v) < wanted for v in self.spec_versions):
            spec = self.spec()  # the default is newer than every release shipped (SGLang's main branch)
            return spec, f"{self.name} {spec.version}, newer than every release spec shipped, for {version}"
        older = [v for v in self.spec_versions if wanted and version_key(v) <= wanted]
        if older:
            chosen = max(older, key=version_key)
            spec = self.spec_versions[chosen]()
            return spec, f"{self.name} {spec.version}, the nearest older spec shipped for {version}"
        if wanted:
            spec = self.spec_versions[min(self.spec_versions, key=version_key)]()
            return spec, f"{self.name} {spec.version}, the oldest spec shipped; none for {version} or older"
        spec = self.spec()
        return spec, f"{self.name} {spec.version}: {version!r} names no release"

    @property
    def launchable(self) -> bool:
        """Whether a worker adapter launches it (process or container)."""
        return self.adapter is not None


@dataclass(frozen=True)
class EngineImages:
    """An engine's official images (farm.engines.container judges a recipe's container launch with them)."""

    repositories: tuple[str, ...]
    """The image repositories its project publishes (Docker Hub names without `docker.io/`)."""
    tag_prefix: str = ""
    """The tag prefix of the images that run its server, where a repository also holds others (`server`)."""
    entrypoints: tuple[str | None, ...] = (None,)
    """What a recipe may say the image's entrypoint is (None: the image's own, unnamed)."""
    runs: tuple[str, ...] | None = None
    """The part of its launcher the image's entrypoint is, where that is not the whole launcher (the rest leads
    the container's arguments); None: the whole launcher."""
    subcommand: tuple[str, ...] = ()
    """Launcher tokens the registry writes as the container's first arguments though the entrypoint runs them
    (vLLM's `serve`): dropped before the arguments are judged."""
    canonical_arguments: bool = False
    """The registry's container arguments for it are its canonical command after the launcher (vLLM's images run
    `vllm serve`): a written-out entrypoint of its own is dropped, and the container runs the command as read."""
    whole_command: bool = False
    """Its images run no server of their own: a recipe's container arguments are a whole command, launcher
    included (SGLang's `python3 -m sglang.launch_server ...`)."""


@dataclass(frozen=True)
class ServerTiming:
    """One request as the engine itself timed it: prompt tokens and the time it spent reading them, generated
    tokens and the time it spent generating them."""

    prompt_tokens: int | None
    prompt_s: float | None
    output_tokens: int
    decode_s: float


@dataclass(frozen=True)
class OwnTiming:
    """How to ask an engine for its own timing of a request: a POST to its native `path` with `body(model,
    prompt, max_tokens, temperature)`, whose answer `read` turns into a ServerTiming (None: it did not say)."""

    path: str
    body: Callable[[str, str, int, float], dict[str, object]]
    read: Callable[[Mapping[str, object]], ServerTiming | None]
    source: str
    """What the figures are, in words (`ollama /api/generate eval_count/eval_duration`)."""


@dataclass(frozen=True)
class EngineDemo:
    """`farm demo --engine NAME` for one engine: a sweep and a worker profile of the checkout."""

    spec: str
    """The sweep spec, under the checkout's `jobs/`."""
    profile: str
    """The worker profile, under the checkout's `workers/`."""
    what: str
    """What the demo runs, as its closing line says."""
    stand_in: bool = True
    """The simulator stands in for the engine (results marked simulated); False: the real engine on the CPU."""
    prepare: Callable[[], object] | None = None
    """What it builds or fetches first, once per machine (the engine, a tiny model)."""
    preparing: str = ""
    """The line printed while it prepares."""


def version_key(version: str) -> tuple[int, ...]:
    """A release number's order (`0.3.36` after `0.3.16`, `v0.5.2rc1` as 0.5.2); () where it has no number."""
    head = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    return tuple(int(part) for part in head.group(1).split(".")) if head else ()


@dataclass(frozen=True)
class LaunchRequest:
    """What a worker hands an engine's adapter (`launch(request)` in the module the table names): the judged
    command and the host's settings. The adapter renders the command after the host's executable and nothing
    else, with the worker's address."""

    command: CanonicalCommand
    """The recipe's command, parsed and judged under the host's policy."""
    recipe: Recipe
    executable: tuple[str, ...]
    """The host's executable (never the job's): it replaces the recipe's launcher."""
    host: str
    port: int
    served_model: str
    """The name the engine serves the model under (the recipe's model id)."""
    model_path: str | None
    """This host's own copy of the model (a GGUF file, an MLX or EXL folder), if it maps one."""
    log_path: Path
    env: Mapping[str, str]
    run_dir: Path
    """The run's own directory: files the engine is handed (a config, a Modelfile) are written here."""
    extra_args: tuple[str, ...] = ()
    stop_grace_s: float = 30.0
    probe: HardwareProbe | None = None
    """Given, the first stop waits for the GPUs to be free (farm.engines.process.EngineProcess.stop)."""
    gpu_free_deadline_s: float = 30.0
    simulated: bool = False
    """The executable is the simulator standing in for the engine (farm.sim.standin): results are simulated."""
    draft_paths: Mapping[str, str] = field(default_factory=dict)
