"""The local-ai-registry/v1 recipe JSON, read into a Recipe."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from farm.engines.base import EngineKind
from farm.engines.registry import ENGINES
from farm.errors import ArgumentPolicyError, RecipeError
from farm.recipes import assets, instances
from farm.recipes.commands import (
    ENGINE_FLAG_OPTIONS,
    NOT_SERVERS,
    Command,
    around_a_command,
    before_prose_fence,
    check_environment,
    draft_model,
    engine_of_the_image,
    executable_name,
    from_docker_run,
    from_yaml_items,
    image_engine,
    is_docker_run,
    is_placeholder,
    is_template_blank,
    json_damage,
    mentions_an_engine,
    model_in_argv,
    read_command,
    repair_unquoted_json,
    resolve_draft,
    resolve_model,
    split_command,
    split_environment,
    starts_a_server,
    synthesize,
    through_a_wrapper,
    with_model,
    without_closing_fence,
)
from farm.recipes.fields import (
    DEVICE_COUNTING_ENGINES,
    build,
    check_launch,
    cross_check,
    describe_parallel,
    dig,
    from_validation,
    mapping,
    max_model_len,
    parallel_sizes,
    read_engine,
    read_hardware_count,
    read_hardware_id,
    read_recipe_id,
    sha256_text,
    string_list,
)
from farm.recipes.limits import load_json
from farm.recipes.model import (
    ENGINE_LAUNCHERS,
    POSITIONAL_MODEL_ENGINES,
    ContainerLaunch,
    Recipe,
    ServingLimits,
    SourceRef,
)
from farm.recipes.pasted_words import rejoin_split_paths

REGISTRY_SCHEMA = "local-ai-registry/v1"
"""The only registry schema version the farm reads."""

_REGISTRY_LM = "metadata.localmaxxing"

# --- the registry's JSON --------------------------------------------------------------------------


def parse_registry(text: str, source: str, *, content_sha256: str | None = None) -> Recipe:
    """Parse a local-ai-registry/v1 recipe (the API's `{"data": ...}` envelope or the bare record).

    A minimal recipe carries only schema_version, id, hardware_id, hardware_count, engine {name, version?}
    and a launch command. The command is taken, in this order, from: a top-level `argv` list (the farm's own
    shape); metadata.localmaxxing.observed_command when it is a real command and tokenized.arguments (the one
    that keeps JSON values valid where the two differ only there; otherwise they must agree);
    launch.arguments (with launch.entrypoint); draft_launch.arguments (with draft_launch.entrypoint); and for
    a reference launch, the engine and model with metadata.localmaxxing.engine_flags. An optional top-level
    `model_id` names the model when the argv's model is a local path.
    """
    if "\0" in text:
        raise RecipeError("binary text (NUL character): a recipe is UTF-8 text", source=source)
    doc = _load_json(text, source)
    envelope = doc.get("data")
    data = envelope if "schema_version" not in doc and isinstance(envelope, dict) else doc

    schema = data.get("schema_version")
    if schema is None:
        raise RecipeError(f"missing: expected {REGISTRY_SCHEMA!r}", source=source, field="schema_version")
    if schema != REGISTRY_SCHEMA:
        raise RecipeError(f"expected {REGISTRY_SCHEMA!r}, got {schema!r}", source=source, field="schema_version")

    recipe_id = read_recipe_id(data.get("id"), source, "id")
    hardware_id = read_hardware_id(data.get("hardware_id"), source, "hardware_id")
    hardware_count = read_hardware_count(data.get("hardware_count"), source)
    engine = read_engine(data.get("engine"), source)
    localmaxxing = mapping(dig(data, _REGISTRY_LM), source, _REGISTRY_LM)
    tokenized = mapping(localmaxxing.get("tokenized"), source, f"{_REGISTRY_LM}.tokenized")
    draft_launch = mapping(data.get("draft_launch"), source, "draft_launch")
    launch = mapping(data.get("launch"), source, "launch")
    other = ENGINES[engine.name].other_servers if engine.name in ENGINES else {}
    for pattern, what in other.items():
        if engine.version is not None and re.search(pattern, engine.version, re.IGNORECASE):
            raise RecipeError(
                f"{engine.version!r}: the run was served by {what}; the farm has no adapter for it, and launching "
                f"{' '.join(ENGINES[engine.name].launcher)} instead would benchmark another server than the one "
                "that ran",
                source=source,
                field="engine.version",
            )
    engine_notes: list[str] = []
    if launch.get("kind") == "docker":
        ran = engine_of_the_image(engine.name, launch.get("image"), launch.get("arguments"))
        if ran is not None:
            engine_notes.append(
                f"engine.name says {engine.name}, but launch.image {launch.get('image')!r} is {ran}'s official image "
                f"and launch.arguments name the model with {ran}'s own option: the run was {ran}'s, read as such"
            )
            engine = engine.model_copy(update={"name": ran})
    instance = data.get("model_instance_id")
    if instance is not None and (not isinstance(instance, str) or not instance.strip()):
        raise RecipeError(f"expected a non-empty string, got {instance!r}", source=source, field="model_instance_id")

    resolved = instances.lookup(instance) if isinstance(instance, str) else None
    command = _registry_command(
        data, engine.name, localmaxxing, tokenized, launch, draft_launch, source, hardware_count
    )
    argv_field = command.source_field
    argv = list(command.argv)
    config_asset = None
    config_option = ENGINES[engine.name].config_option if engine.name in ENGINES else None
    if config_option is not None:
        argv, config_asset = _config_asset(argv, ENGINES[engine.name], launch, draft_launch, source)
    check_launch(argv, engine.name, source, argv_field)
    # A paste is read as its engine reads it; the farm's own `argv` shape is written for the farm, and a repeated
    # option there stays the judge's to refuse.
    argv, repeated = _once_each(engine.name, argv) if argv_field != "argv" else (argv, [])
    damaged = json_damage(argv)
    argv, repaired = _repair_json_values(argv, damaged)
    if repaired:
        notes_repaired = repaired
        damaged = json_damage(argv)
    else:
        notes_repaired = []
    if damaged:
        index = damaged[0]
        if (
            re.search(r"\s", argv[index])
            or re.match(r"^[\[(][A-Za-z][\w ]*:\s", argv[index])
            or (
                index > 0
                and re.match(r"^[\[(][A-Za-z]", argv[index]) is not None
                and not _takes_json(engine.name, argv[index - 1])
            )
        ):
            raise RecipeError(
                f"token {index} ({argv[index][:80]!r}) is a remark in brackets, not a value: the command was pasted "
                "with chat text inside it",
                source=source,
                field=argv_field,
            )
        raise RecipeError(
            f"token {index} ({argv[index][:80]!r}) looks like JSON but is not valid JSON: its quotes were lost, "
            "and no other source of the command keeps them",
            source=source,
            field=argv_field,
        )
    notes_on_command = [*engine_notes, *command.notes, *repeated, *notes_repaired]
    if config_asset is not None:
        title = ENGINES[engine.name].prose_name
        notes_on_command.append(
            f"{title}'s {config_option} is registry asset {config_asset.name} (sha256 {config_asset.sha256[:12]}), "
            "read into the command less network.host and network.port (the worker's): the document is judged key by "
            f"key, and a {title} launcher hands {title} exactly it, with its own listen address (no worker runs "
            f"{title} yet)"
        )
    if argv_field != _SYNTHESIZED and not _in_container(argv_field, launch, draft_launch):
        hint = _model_hint(data, draft_launch, engine.name)
        argv, model_note = resolve_model(engine.name, argv, instance, source, argv_field, hint=hint)
        if model_note:
            notes_on_command.append(model_note)
        argv, draft_note = resolve_draft(engine.name, argv)
        if draft_note:
            notes_on_command.append(draft_note)

    if argv_field == _SYNTHESIZED or (argv_field == "draft_launch.arguments" and draft_launch.get("synthesized")):
        argv, prose_notes = _held_to_prose(engine.name, argv, data, source, argv_field)
        notes_on_command.extend(prose_notes)
    _refuse_gguf_repository(engine.name, argv, source, argv_field)
    model_id = data.get("model_id")
    model_source = "model_id"
    if model_id is None and argv_field == _SYNTHESIZED and command.model is not None:
        model_id, model_source = command.model, command.model_source or "model_instance_id"
    if model_id is None:
        model_id, model_source = model_in_argv(engine.name, argv), "argv"
        if model_id is None and isinstance(instance, str):
            model_id, model_source = instance, "model_instance_id"
        if model_id is None:
            raise RecipeError(
                "names no model (no model in the command, no model_instance_id)", source=source, field=argv_field
            )
    elif not isinstance(model_id, str) or not model_id.strip():
        raise RecipeError(f"expected a non-empty string, got {model_id!r}", source=source, field="model_id")

    serving = _serving(data.get("serving"), source)
    serving, ceiling_note = _context_of_the_run(serving, data, source)
    if ceiling_note is not None:
        notes_on_command.append(ceiling_note)
    if engine.name in DEVICE_COUNTING_ENGINES:
        sizes = parallel_sizes(argv, source=source, field=argv_field, engine=engine.name)
        devices = sizes["tensor"] * sizes["pipeline"] * sizes["data"]
        inferred = isinstance(dig(data, "metadata.rig_resolution"), Mapping)
        # A draft the registry synthesized states the devices only where it names a parallel size itself.
        recorded = argv_field not in (_SYNTHESIZED, "argv") and not (
            argv_field == "draft_launch.arguments" and draft_launch.get("synthesized") and not _names_parallel(argv)
        )
        if devices != hardware_count and inferred and recorded and devices <= _MAX_HOST_DEVICES:
            # The registry inferred the rig (metadata.rig_resolution: "the launch does not state hardware"): the
            # command's own parallelism is what the recipe states about its devices.
            notes_on_command.append(
                f"hardware_count {hardware_count} was inferred by the registry (metadata.rig_resolution); "
                f"{argv_field} runs on {devices} device(s) ({describe_parallel(sizes)}): the job asks for {devices}"
            )
            hardware_count = devices
        elif devices < hardware_count and recorded:
            # A recorded command is the most concrete thing a registry recipe says: it ran on fewer devices than
            # the rig has (recipe ids such as `...-tp1` with hardware_count 2 say the same), so the job asks for
            # what it runs on. The farm's own `argv` shape is written for the farm: there a mismatch is an error.
            notes_on_command.append(
                f"hardware_count is {hardware_count}, but {argv_field} runs on {devices} device(s) "
                f"({describe_parallel(sizes)}): the job asks for {devices}"
            )
            hardware_count = devices
        if devices != hardware_count:
            raise RecipeError(
                f"is {hardware_count}, but the launch command runs on {devices} device(s) "
                f"({describe_parallel(sizes)} in {argv_field})",
                source=source,
                field="hardware_count",
            )
        if serving.tensor_parallel is not None and serving.tensor_parallel != sizes["tensor"]:
            raise RecipeError(
                f"is {serving.tensor_parallel}, but {argv_field} has --tensor-parallel-size {sizes['tensor']}",
                source=source,
                field="serving.tensor_parallel",
            )

    context = max_model_len(argv, engine.name)
    if serving.max_context_tokens is None and context is not None:
        serving = serving.model_copy(update={"max_context_tokens": context})

    container = None
    # An official image launched without arguments runs the command built for it: that launch's image, never a draft's.
    bare_image = argv_field == _SYNTHESIZED and launch.get("kind") == "docker" and not launch.get("arguments")
    if (
        argv_field == "launch.arguments"
        or bare_image
        or (launch.get("kind") == "docker" and draft_launch.get("kind") != "docker")
    ):
        if launch.get("kind") == "docker" and launch.get("image"):
            container = _container(launch, source, "launch")
            if argv_field != "launch.arguments":
                container = _running(container, engine.name, argv, command.environment)
    elif draft_launch.get("kind") == "docker":
        container = _container(draft_launch, source, "draft_launch")
        if argv_field != "draft_launch.arguments":
            container = _running(container, engine.name, argv, command.environment)

    if (
        container is not None
        and container.entrypoint is not None
        and _passes_through([container.entrypoint], container.image, engine.name)
    ):
        # The image's own entrypoint, written out: the same as not replacing it. Other engines' images take a whole
        # command the recipe wrote its own way: the recipe runs as the process its canonical command is (_running).
        container = container.model_copy(update={"entrypoint": None}) if _canonical_arguments(engine.name) else None
    if container is not None and _canonical_arguments(engine.name) and (repeated or notes_repaired or command.reshaped):
        # The container runs the command as read (each option once, JSON values whole, chat text cut, a split path
        # whole), not as pasted.
        container = container.model_copy(update={"arguments": tuple(argv[len(ENGINE_LAUNCHERS[engine.name]) :])})
    if container is not None and config_asset is not None:
        # The config is in the command now: the container runs that command, without the asset's mount.
        container = container.model_copy(
            update={
                "arguments": tuple(argv[1:]),
                "mounts": tuple(m for m in container.mounts if m.source != assets.PREFIX + config_asset.name),
            }
        )

    provenance = mapping(data.get("provenance"), source, "provenance")
    run_id = launch.get("run_id") or localmaxxing.get("run_id")
    notes = data.get("notes") if data.get("notes") is not None else localmaxxing.get("notes")
    if notes is not None and not isinstance(notes, str):
        notes = None
    return build(
        source,
        id=recipe_id,
        model_id=model_id,
        model_instance_id=instance,
        hardware_id=hardware_id,
        hardware_count=hardware_count,
        engine=engine,
        argv=tuple(argv),
        environment=command.environment,
        container=container,
        serving=serving,
        notes=notes,
        provenance={
            "source_format": REGISTRY_SCHEMA,
            "captured_at": provenance.get("captured_at"),
            "sources": _sources(provenance.get("sources"), source),
            "run_id": run_id if isinstance(run_id, str) else None,
            "run_url": launch.get("url") if isinstance(launch.get("url"), str) else None,
            "argv_fidelity": tokenized.get("fidelity") if isinstance(tokenized.get("fidelity"), str) else None,
            "command_source": argv_field,
            "source_command": command.source_tokens,
            "launch_kind": launch.get("kind") if isinstance(launch.get("kind"), str) else None,
            "model_source": model_source,
            "instance_repository": resolved.repository if resolved is not None else None,
            "instance_revision": resolved.revision if resolved is not None else None,
            "command_notes": tuple(notes_on_command),
            "content_sha256": content_sha256 or sha256_text(text),
        },
    )


def _load_json(text: str, source: str) -> dict[str, Any]:
    try:
        doc = load_json(text, RecipeError, source)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        # json reports an unterminated string only when the input runs out inside it.
        body = text.rstrip()
        if exc.pos >= len(body) or exc.msg.startswith("Unterminated string"):
            end_line = body.count("\n") + 1
            end_column = len(body) - (body.rfind("\n") + 1)
            raise RecipeError(
                f"truncated JSON: the document ends at line {end_line}, column {end_column} before it is "
                f"complete ({exc.msg} {where})",
                source=source,
            ) from exc
        raise RecipeError(f"not valid JSON: {exc.msg} ({where})", source=source) from exc
    if not isinstance(doc, dict):
        raise RecipeError(f"expected a JSON object, got a JSON {type(doc).__name__}", source=source)
    return doc


_NOT_A_LAUNCH_CONTRACT = "upstream-reference-not-a-launch-contract"
"""The registry's `launch.container.reason` for a reference to an upstream launcher that is not the recipe's
command."""

_NO_COMMAND_KINDS = frozenset({"docker-compose", "controller", "script"})
"""Launch kinds whose command lives in a file the recipe names (compose file, script) when it gives no arguments."""


def _registry_command(
    data: Mapping[str, Any],
    engine: str,
    localmaxxing: Mapping[str, Any],
    tokenized: Mapping[str, Any],
    launch: Mapping[str, Any],
    draft_launch: Mapping[str, Any],
    source: str,
    hardware_count: int,
) -> Command:
    """The launch command, from the most faithful source the document has (see parse_registry)."""
    if "argv" in data:
        tokens = string_list(data["argv"], source, "argv")
        return read_command(tokens, source, "argv", declared_engine=engine)

    observed_field = f"{_REGISTRY_LM}.observed_command"
    tokenized_field = f"{_REGISTRY_LM}.tokenized.arguments"
    raw_observed = localmaxxing.get("observed_command")
    observed: list[str] | None = None
    if raw_observed is not None:
        if not isinstance(raw_observed, str):
            raise RecipeError(
                f"expected a command line (a string), got {raw_observed!r}", source=source, field=observed_field
            )
        if not is_placeholder(raw_observed):
            observed = split_command(raw_observed, source, observed_field) or None
    listed = None
    if tokenized.get("arguments") is not None:
        listed = string_list(tokenized["arguments"], source, tokenized_field)
    environment = check_environment(
        mapping(tokenized.get("environment"), source, f"{_REGISTRY_LM}.tokenized.environment"),
        source,
        f"{_REGISTRY_LM}.tokenized.environment",
    )

    chat: list[str] = []
    if listed is not None:
        listed, chat = around_a_command(listed)
    if observed is not None:
        observed, cut = around_a_command(observed)
        chat = chat or cut
    chosen: tuple[str, list[str]] | None = None
    if listed is not None and observed is not None:
        # The registry keeps leading VAR=value words in tokenized.environment and drops them from the list.
        listed_environment, listed_rest = split_environment(listed, source, tokenized_field)
        observed_environment, observed_rest = split_environment(observed, source, observed_field)
        environment = {**environment, **listed_environment, **observed_environment}
        chosen = _more_faithful(tokenized_field, listed_rest, observed_field, observed_rest, source, engine=engine)
    elif listed is not None:
        chosen = (tokenized_field, listed)
    elif observed is not None:
        chosen = (observed_field, observed)
    step_note: str | None = None
    wrapper_note: str | None = None
    if chosen is not None:
        unwrapped, wrapper_note = through_a_wrapper(chosen[1])
        chosen = (chosen[0], unwrapped)
        chosen, step_note = _server_step(chosen, source)
    if wrapper_note is not None:
        step_note = f"{wrapper_note}; {step_note}" if step_note else wrapper_note
    prose_note: str | None = None
    if chosen is not None and _prose_without_settings(chosen[1]):
        # Rule "a prose note without settings": `LM Studio serving MODEL on port 1234` names no option, so a
        # command built from the engine and the recipe's model instance drops nothing the note says (a context or
        # cache type said in words is held by _held_to_prose); the note is named, never run.
        prose_note = f"{chosen[0]} is a note, not a command ({' '.join(chosen[1])[:80]!r}), and names no setting"
        chosen = None
    if chat:
        left_out = "; ".join(text[:100] for text in chat)
        step_note = f"{step_note}; " if step_note else ""
        step_note += f"chat text around the command was left out: {left_out!r}"
    deferred: RecipeError | None = None
    if chosen is not None and _tool_role(engine, chosen[1]) == "client":
        # Rule "a llama-cli run": the interactive client loaded the model the way the server would, with the same
        # common options; the server is launched with them, and the client's own (its prompt) are left out.
        return _with_environment(_noted(_from_tool(engine, chosen, source), step_note), environment)
    if chosen is not None and _benchmark_tool(chosen[1]) is not None:
        # The run was measured with a benchmark tool (llama-bench), not a server: the registry's launch or
        # draft launch says how to serve the same model; without one, the tool's refusal stands.
        deferred = _not_a_server(chosen, source)
    elif chosen is not None and _step_model(engine, chosen[1]) is not None:
        pass  # `ollama pull MODEL` / `ollama run MODEL`: the model, named plainly; the server is the engine's own
    elif chosen is not None and _step_model(engine, chosen[1][:3]) is not None:
        # `ollama run qwen3.6:35b -c 32768`: the model is plain, but what follows it is no setting Ollama reads
        # there (`ollama run` sets no context; `-c` is no flag of it): as recorded the command fails, and which
        # context ran is unknown. Launching the model with a guessed context would be another run.
        raise RecipeError(
            f"{' '.join(chosen[1][:3])!r} names its model, then {' '.join(chosen[1][3:])[:60]!r}, which "
            f"`{executable_name(chosen[1][0])} {chosen[1][1]}` does not take (that step names the model and nothing "
            f"else; {ENGINES[engine].prose_name} sets the context with {ENGINES[engine].step_context}): what ran "
            "cannot be told from the command",
            source=source,
            field=chosen[0],
        )
    elif chosen is not None and _only_options(chosen[1]):
        # A page that recorded only the options it added (`-b 1024 -ub 1024 ...`): the recipe's engine's server
        # with them, its model the recipe's instance.
        command = read_command(chosen[1], source, chosen[0], declared_engine=engine, arguments_only=True)
        note = f"the recorded command holds only options ({' '.join(chosen[1])[:80]!r}): {engine}'s server with them"
        return _with_environment(_noted(_noted(command, step_note), note), environment)
    elif chosen is not None and is_docker_run(chosen[1]):
        command = from_docker_run(chosen[1], engine, source, chosen[0])
        return _with_environment(_noted(command, step_note), environment)
    elif (
        chosen is not None
        and not starts_a_server(split_environment(chosen[1], source, chosen[0])[1])
        and not mentions_an_engine(chosen[1])
    ):
        # Not a server command at all (a note, a benchmark script, prose): the launch or draft launch says how
        # to serve the run's model; without one, the refusal of what was recorded stands. A line that names an
        # engine anywhere (`nohup vllm serve ...`, `uv run vllm serve ...`) is a command the farm cannot read,
        # refused as such: falling back would run another command than the recorded one.
        deferred = _not_a_server(chosen, source)
    elif chosen is not None:
        tokens, words = _words_before_options(engine, chosen[1], source, chosen[0])
        command = read_command(tokens, source, chosen[0], declared_engine=engine)
        if words:
            command = _noted(
                command,
                f"the words {' '.join(words)!r} between the server and its first option are a sentence around the "
                f"options, not arguments ({engine}'s server takes none before its options): left out",
            )
        return _with_environment(_noted(command, step_note), environment)

    flags_field = f"{_REGISTRY_LM}.engine_flags"
    flags = mapping(localmaxxing.get("engine_flags"), source, flags_field)
    unread = _unread_command(data, source) if listed is None and observed is None else None
    for field_name, section in (("launch", launch), ("draft_launch", draft_launch)):
        arguments = section.get("arguments")
        if arguments is None:
            continue
        generated = field_name == "draft_launch" and bool(section.get("synthesized"))
        if generated and unread is not None:
            raise unread
        if generated and deferred is not None and chosen is not None and _tool_role(engine, chosen[1]) == "benchmark":
            # What ran beats what was generated: the registry wrote its draft from the instance and its own
            # defaults (a context of its choosing, no cache types or offload split), the recording is the run.
            recorded = _noted(_from_tool(engine, chosen, source), step_note)
            return _with_environment(
                _noted(
                    recorded,
                    f"the recorded llama-bench command is what ran; the registry's synthesized draft "
                    f"({' '.join(map(str, arguments))[:80]!r}) is not used: it would replace the recorded model "
                    "and options with its own",
                ),
                environment,
            )
        arguments = string_list(arguments, source, f"{field_name}.arguments", allow_empty=True)
        entrypoint = _entrypoint(section.get("entrypoint"), source, f"{field_name}.entrypoint")
        if not arguments and not entrypoint:
            continue
        tokens = [*entrypoint, *arguments]
        image = section.get("image")
        if (
            entrypoint
            and _passes_through(entrypoint, image, engine)
            and starts_a_server(split_environment(arguments, source, f"{field_name}.arguments")[1])
        ):
            # The official image's own entrypoint runs its arguments (NVIDIA's base images' wrapper execs "$@"):
            # the arguments are the command, the wrapper is named in a note and never judged as one.
            notes_through = (
                f"{field_name}.entrypoint {' '.join(entrypoint)!r} is {image}'s own entrypoint, which runs its "
                "arguments: the arguments are the command",
            )
            command = read_command(arguments, source, f"{field_name}.arguments", declared_engine=engine)
            command = dataclasses.replace(command, notes=(*command.notes, *notes_through))
            if generated:
                command = _generated_draft(command, data, flags, source, flags_field)
            return _with_environment(command, environment)
        if entrypoint and not starts_a_server(tokens):
            launcher = ENGINE_LAUNCHERS[engine]
            if len(entrypoint) == 1 and posixpath.basename(entrypoint[0]) == launcher[0] and len(launcher) == 2:
                tokens = [*entrypoint, launcher[1], *arguments]  # `vllm` + arguments without `serve`
            else:
                raise RecipeError(
                    f"the container's entrypoint {' '.join(entrypoint)!r} is not {engine}'s server "
                    f"({' '.join(launcher)}): the farm cannot judge what it runs",
                    source=source,
                    field=f"{field_name}.entrypoint",
                )
        try:
            command = read_command(
                tokens, source, f"{field_name}.arguments", declared_engine=engine, arguments_only=not entrypoint
            )
        except RecipeError as exc:
            kind = section.get("kind")
            if exc.detail.startswith("names no model") and isinstance(kind, str) and kind in _NO_COMMAND_KINDS:
                # The real cause: the arguments are a few options the compose file's (or script's) command takes;
                # the command itself, with its model, lives in that file.
                raise RecipeError(
                    f"a {kind} launch whose arguments ({' '.join(arguments)[:80]!r}) are options only, naming no "
                    f"model: the command lives in {_command_file(section)}, which the recipe does not carry"
                    + _configured_by(section),
                    source=source,
                    field=f"{field_name}.arguments",
                ) from exc
            raise
        _refuse_unfilled_model(engine, command, section, source, f"{field_name}.arguments")
        if generated:
            command = _generated_draft(command, data, flags, source, flags_field)
        if deferred is not None and chosen is not None:
            shown = " ".join(chosen[1])[:80]
            command = _noted(
                command, f"the recorded command ({shown!r}) serves nothing the farm runs: {deferred.detail}"
            )
        return _with_environment(command, environment)

    if deferred is not None:
        assert chosen is not None
        if _tool_role(engine, chosen[1]) == "benchmark":
            return _with_environment(_noted(_from_tool(engine, chosen, source), step_note), environment)
        raise deferred
    if unread is not None:
        raise unread
    uncarried = _uncarried_command(launch, engine, source, data.get("metadata"))
    if raw_observed is not None and observed is None and isinstance(raw_observed, str) and raw_observed.strip():
        detail = f" (observed_command is a note, {raw_observed.strip()[:60]!r})"
    else:
        detail = ""
    model = _repository(data)
    model_source = "huggingface.repository" if data.get("model_id") is None else "model_id"
    named = _named_step_model(engine, chosen, launch)
    if model is None and named is not None:
        model, model_source = named
    instance = data.get("model_instance_id")
    if model is None and isinstance(instance, str):
        try:
            model = instances.model_for(engine, instance, _model_hint(data, draft_launch, engine))
        except instances.CannotLoad as exc:
            if uncarried is not None:
                raise RecipeError(
                    f"{uncarried.detail}; nor can the farm build one: the recipe names its model only by its "
                    f"registry instance, and {exc}",
                    source=source,
                    field=uncarried.field,
                ) from exc
            why = _why_no_server_command(data, launch)
            if why is not None:
                # The real cause is the missing command; the instance snapshot only says why no command is built.
                raise RecipeError(
                    f"the recipe carries no server command: {why}; nor can the farm build one from its engine and "
                    f"model instance, since {exc}",
                    source=source,
                    field="launch",
                ) from exc
            raise RecipeError(
                f"no launch command{detail}; the recipe names its model only by its registry instance, and {exc}",
                source=source,
                field="model_instance_id",
            ) from exc
        model_source = "model_instance_id"
    elif model is None:
        raise RecipeError(
            f"no launch command{detail}: give argv, {tokenized_field}, {observed_field}, launch.arguments, "
            "draft_launch.arguments, or a model repository (model_id, huggingface.repository) to build one from "
            "the engine and engine_flags",
            source=source,
            field="argv",
        )
    serving = mapping(data.get("serving"), source, "serving")
    argv = synthesize(engine, model, flags, source, flags_field, serving=serving, hardware_count=hardware_count)
    notes: tuple[str, ...] = () if prose_note is None else (f"{prose_note}: {engine}'s server with the recipe's model",)
    if uncarried is not None:
        notes = (
            f"{uncarried.detail}: the farm launches {engine}'s server with the recipe's model and its serving block "
            "(parallel size, context length, memory fraction), and engine defaults otherwise",
        )
    if model is None:
        notes = (*notes, f"the model is registry instance {instance!r}; the host maps it to its own file")
    elif named is not None and model_source == named[1]:
        notes = (
            *notes,
            f"{named[1]} pulls {named[0]!r}: the model is named plainly there, and {engine}'s server serves it",
        )
    return Command(
        engine=engine,
        argv=argv,
        environment=environment,
        source_field=_SYNTHESIZED,
        source_tokens=(),
        model=model if model is not None else instance,
        model_source=model_source,
        notes=notes,
    )


_SYNTHESIZED = "engine+model+engine_flags"


def _once_each(engine: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """argv with an option the command gives more than once read as the engine's own parser reads it, and rendered
    once, with a note: argparse (vLLM, SGLang) and llama.cpp's parser keep a single-valued option's last value, and a
    switch given twice is the switch. Options the engine takes repeatedly (lists) and options it does not know are
    left as written, for the judge."""
    from farm.engines.argspec import ValueKind, is_flag
    from farm.engines.policy import DEFAULT_POLICY

    try:
        spec = DEFAULT_POLICY.spec_for(engine)
    except ArgumentPolicyError:  # an engine without a shipped spec: judged as written
        return argv, []
    launcher = len(ENGINE_LAUNCHERS[engine])
    spans: list[tuple[str, int, int]] = []  # (option name, start, end) of each single-valued option's occurrence
    index = launcher
    while index < len(argv):
        token = argv[index]
        if not is_flag(token):
            index += 1
            continue
        name, equals, _ = token.partition("=")
        if spec.underscores and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        option = spec.lookup(name)
        if option is None or option.repeatable or option.nargs not in (None, 0):
            index += 1
            continue
        switch = option.kind in (ValueKind.FLAG, ValueKind.BOOL) or option.nargs == 0
        end = index + 1 if equals or switch or index + 1 >= len(argv) or is_flag(argv[index + 1]) else index + 2
        spans.append((option.name, index, end))
        index = end
    last: dict[str, tuple[int, int]] = {}
    for name, start, end in spans:
        last[name] = (start, end)
    drop: set[int] = set()
    notes: list[str] = []
    for name, start, end in spans:
        kept = last[name]
        if (start, end) == kept:
            continue
        drop.update(range(start, end))
        dropped, chosen = " ".join(argv[start:end]), " ".join(argv[kept[0] : kept[1]])
        notes.append(
            f"{name} is given more than once; {engine}'s parser keeps the last ({chosen!r}), so {dropped!r} is left "
            "out and the option is rendered once"
        )
    return [token for position, token in enumerate(argv) if position not in drop], notes


def _takes_json(engine: str, option: str) -> bool:
    """Whether `option` (the token before a value) is an option of the engine's that takes a JSON value: a bracketed
    word after anything else is no JSON value that lost its quotes, but a remark."""
    from farm.engines.argspec import ValueKind, is_flag
    from farm.engines.policy import DEFAULT_POLICY

    if not is_flag(option) or "=" in option:
        return False
    try:
        spec = DEFAULT_POLICY.spec_for(engine)
    except ArgumentPolicyError:
        return True  # no spec to tell: the JSON reading stands
    name = "--" + option[2:].replace("_", "-") if spec.underscores and option.startswith("--") else option
    found = spec.lookup(name)
    return found is None or found.kind in (ValueKind.JSON, ValueKind.JSON_OR_WORD, ValueKind.CONFIG, ValueKind.LORA)


def _refuse_gguf_repository(engine: str, argv: list[str], source: str, field_name: str) -> None:
    """A vLLM or SGLang command naming a GGUF repository (`unsloth/Qwen3.6-35B-A3B-GGUF`) without one of its files:
    these engines load one GGUF file (with the base model's tokenizer), and a repository of several quantizations
    names none of them, so the command would load nothing that ran (the registry's synthesized drafts name the
    instance's repository this way)."""
    if engine not in ENGINES or not ENGINES[engine].gguf_file_only:
        return
    model = model_in_argv(engine, argv)
    if model is None or not instances.REPO_ID.match(model) or "gguf" not in model.lower():
        return
    raise RecipeError(
        f"names the GGUF repository {model!r} without its file: {engine} loads one GGUF file, which the recipe does "
        "not name, so the command would not load the weights that ran",
        source=source,
        field=field_name,
    )


def _repair_json_values(argv: list[str], damaged: list[int]) -> tuple[list[str], list[str]]:
    """Option values that lost their JSON quotes (`--speculative-config {method:mtp,num_speculative_tokens:4}`),
    each repaired where it has exactly one reading (commands.repair_unquoted_json), and a note for each. Only an
    option's value is repaired (`--opt VALUE` or `--opt=VALUE`): a bracketed word standing alone is no option's
    value, and stays for the judge to refuse."""
    out = list(argv)
    notes: list[str] = []
    for index in damaged:
        token = out[index]
        name, equals, inline = token.partition("=")
        if token.startswith("-") and equals:
            fixed = repair_unquoted_json(inline.strip())
            if fixed is not None:
                out[index] = f"{name}={fixed}"
        elif index > 0 and out[index - 1].startswith("--") and "=" not in out[index - 1]:
            fixed = repair_unquoted_json(token.strip())
            if fixed is not None:
                out[index] = fixed
        else:
            fixed = None
        if fixed is not None:
            notes.append(
                f"the value {token[:80]!r} lost its JSON quotes; it has one reading, {fixed[:120]!r}, which is used"
            )
    return out, notes


_PASS_THROUGH_ENTRYPOINTS = frozenset({"/opt/nvidia/nvidia_entrypoint.sh"})
"""Entrypoints of official engine images that print a banner and exec their arguments (`exec "$@"`): NVIDIA's base
images, which lmsysorg/sglang and the CUDA vLLM builds start from."""


def _passes_through(entrypoint: list[str], image: object, engine: str) -> bool:
    """Whether a launch's entrypoint is its official image's own wrapper that runs the arguments it is given."""
    return (
        len(entrypoint) == 1
        and entrypoint[0] in _PASS_THROUGH_ENTRYPOINTS
        and isinstance(image, str)
        and image_engine(image) == engine
    )


_SPECULATIVE_OPTIONS = (
    "--speculative-config",
    "--speculative-algorithm",
    "--speculative-model",
    "-md",
    "--model-draft",
)


def _generated_draft(
    command: Command, data: Mapping[str, Any], flags: Mapping[str, Any], source: str, flags_field: str
) -> Command:
    """A draft launch the registry synthesized, held to what the recipe states elsewhere: the draft fills in what
    nothing recorded, and never replaces what the metadata records.

    - Its model must be the recipe's checkpoint: a draft naming a base publisher's plain repository for a quantized
      instance (`zai-org/GLM-4.5-Air` for `...--awq-4bit`) would load other weights (instances.base_for_quantized).
    - `metadata.localmaxxing.engine_flags` (the run's own settings: KV cache type, attention back-end, tensor
      parallelism, flash attention, GPU layers) win over the draft: a setting the draft lacks is added, one it
      gives otherwise is replaced, each named in a note.
    - MTP or speculative decoding the flags record and the draft drops cannot be rebuilt (which draft model, how
      many tokens): refused, as a command built from the flags alone would be."""
    engine = command.engine
    field_name = command.source_field
    instance_id = data.get("model_instance_id")
    model = model_in_argv(engine, command.argv)
    if isinstance(instance_id, str) and model is not None and engine not in instances.LOCAL_ARTIFACT_ENGINES:
        instance = instances.lookup(instance_id) or instances.from_hint(instance_id, model)
        stated = instances.base_for_quantized(instance) if instance is not None else None
        if stated is not None and instance is not None and instance.repository == model:
            raise RecipeError(
                f"the registry's synthesized draft names {model!r}, the base model's repository, for instance "
                f"{instance_id!r}, a {stated} checkpoint the recipe does not name: it would launch other weights "
                "than the ones that ran",
                source=source,
                field=field_name,
            )
    command = _bare_gguf_repository(command, instance_id)
    argv = list(command.argv)
    notes: list[str] = []
    options = ENGINE_FLAG_OPTIONS.get(engine, {})
    for key, value in flags.items():
        if value is None or value is False:
            continue
        if key in ("specDecoding", "mtpEnabled"):
            if any(token.partition("=")[0] in _SPECULATIVE_OPTIONS for token in argv):
                continue
            mtp_options = ENGINES[engine].mtp_options if engine in ENGINES else None
            tokens = _mtp_tokens(data) if key == "mtpEnabled" and mtp_options is not None else None
            if tokens is not None and mtp_options is not None:
                added = mtp_options(tokens)
                argv += added
                notes.append(
                    f"{flags_field}.mtpEnabled and the recipe's notes record MTP with {tokens} tokens, which the "
                    f"registry's synthesized draft drops: {' '.join(added)} added"
                )
                continue
            raise RecipeError(
                f"{key} is on in {flags_field}, but the registry's synthesized draft has no speculative decoding, "
                "and the recipe does not say which draft: the command that ran cannot be rebuilt",
                source=source,
                field=f"{flags_field}.{key}",
            )
        names = options.get(key)
        if names is None or (isinstance(value, bool) and key != "flashAttn"):
            continue
        if key == "tensorParallel" and value == 1 and not _names_parallel(argv):
            continue
        rendered = "on" if value is True else str(value)
        for name in names:
            spellings = _PARALLEL_SPELLINGS[:4] if key == "tensorParallel" else (name,)
            argv, was = _set_option(argv, spellings, name, rendered)
            if was != rendered:
                what = "added" if was is None else f"replaces the draft's {was!r}"
                notes.append(f"{flags_field}.{key} = {value!r} is what ran: {name} {rendered} {what}")
    return dataclasses.replace(command, argv=tuple(argv), notes=(*command.notes, *notes))


def _bare_gguf_repository(command: Command, instance_id: object) -> Command:
    """A llama.cpp draft the registry synthesized naming a GGUF repository without a quantization
    (`-hf unsloth/Qwen3.8-27B-GGUF`): llama-server would download the repository's default file (Q4_K_M, or the
    first it lists), not the recipe's instance (`...--ud-q4-k-xl`). The model becomes the instance's own: `REPO:QUANT`
    when the farm's snapshot of the registry knows it, or none, for the host to map the instance id to its own file
    (as for any recipe that names its model only by its instance), with a note."""
    engine = command.engine
    repository_options = ENGINES[engine].repository_options if engine in ENGINES else None
    if repository_options is None or not isinstance(instance_id, str):
        return command
    argv = list(command.argv)
    model = model_in_argv(engine, argv)
    named_files = {token.partition("=")[0] for token in argv} & {"--hf-file", "-hff"}
    if model is None or ":" in model or named_files or instances.REPO_ID.match(model) is None:
        return command
    instance = instances.lookup(instance_id)
    replacement = instances.instance_model(engine, instance) if instance is not None else None
    new = [repository_options[0], replacement] if replacement is not None else []
    argv = with_model(engine, argv, new)
    what = f"the instance's {replacement!r}" if replacement is not None else "the host's file for the instance"
    note = (
        f"the registry's synthesized draft names the GGUF repository {model!r} without a quantization, so {engine} "
        f"would download its default file, not instance {instance_id!r}: the model is {what}"
    )
    return dataclasses.replace(
        command,
        argv=tuple(argv),
        model=replacement if replacement is not None else instance_id,
        model_source="model_instance_id",
        notes=(*command.notes, note),
    )


_KV_TYPE = r"(f32|f16|fp16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|fp8(?:_e4m3|_e5m2)?)"
_KV_STATED = (
    # "q4_0/q4_1 KV", "q8_0 K/V cache", "f16 KV cache"
    re.compile(rf"(?<![\w/]){_KV_TYPE}(?:\s*/\s*{_KV_TYPE})?\s+(?:KV|K/V)\b", re.IGNORECASE),
    # "KV q8_0", "kv cache: q8_0/q4_0", "KV cache type q4_0"
    re.compile(rf"\b(?:KV|K/V)(?:[ -]cache)?(?:[ -]type)?\s*[:=]?\s*{_KV_TYPE}(?:\s*/\s*{_KV_TYPE})?(?![\w])", re.I),
    # "-ctk q4_0 -ctv q4_1" in prose
    re.compile(rf"(?:-ctk|--cache-type-k)[ =]{_KV_TYPE}(?:\s+(?:-ctv|--cache-type-v)[ =]{_KV_TYPE})?", re.I),
)
_NOT_A_SIZE = r"(?!\d|\.\d|\s*(?:t/s|tok/s|tokens?/s|ms\b|s\b|%|x\b))"
"""A number followed by a rate or a time (`8K ctx = 1383 t/s`) is a measurement, not a context size."""
_CONTEXT_STATED = (
    # "c=131072", "ctx=4096", "served ctx=4096", "context: 32768" (never "prompt/context=16384", a prompt size)
    re.compile(
        r"(?<![\w/-])(?:c|ctx|ctx-size|ctx_size|n_ctx|context(?:[ -](?:size|length))?)\s*[=:]\s*(\d{3,7})\b"
        + _NOT_A_SIZE,
        re.IGNORECASE,
    ),
    # "131072 context", "full 262144 context"
    re.compile(r"(?<![\w.,])(\d{3,7})(?:-token)?\s+context\b", re.IGNORECASE),
)
_CONTEXT_STATED_K = re.compile(r"(?<![\w.,])(\d{1,4})\s?K(?:-token)?\s+(?:ctx|context)\b", re.IGNORECASE)
"""`8K ctx`, `256K context`: N x 1024 tokens."""
_CONTEXT_OPTIONS = {
    name: kind.serving_options["max_context_tokens"]
    for name, kind in ENGINES.items()
    if "max_context_tokens" in kind.serving_options
}
"""The option a context stated in the notes is carried with (each engine's serving option for it)."""
_CONTEXT_SPELLINGS = {name: (*ENGINES[name].context_flags, option) for name, option in _CONTEXT_OPTIONS.items()}
"""Every spelling of that option a command may already hold (the engine's `context_flags`)."""


def _prose(data: Mapping[str, Any]) -> str:
    parts = (data.get("notes"), dig(data, f"{_REGISTRY_LM}.notes"))
    return " | ".join(part for part in parts if isinstance(part, str))


def _stated_kv(text: str) -> tuple[str, str] | bool | None:
    """The KV cache types (K, V) the recipe's prose states: None when it states none, False when it states more
    than one reading."""
    found: set[tuple[str, str]] = set()
    for pattern in _KV_STATED:
        for k, v in pattern.findall(text):
            k = "f16" if k.lower() == "fp16" else k.lower()
            v = ("f16" if v.lower() == "fp16" else v.lower()) if v else k
            found.add((k, v))
    if not found:
        return None
    return found.pop() if len(found) == 1 else False


def _stated_context(text: str) -> int | bool | None:
    found = {int(value) for pattern in _CONTEXT_STATED for value in pattern.findall(text)}
    found |= {int(value) * 1024 for value in _CONTEXT_STATED_K.findall(text)}
    if not found:
        return None
    return found.pop() if len(found) == 1 else False


def _held_to_prose(
    engine: str, argv: list[str], data: Mapping[str, Any], source: str, field_name: str
) -> tuple[list[str], list[str]]:
    """A command the farm or the registry generated (no recording), held to the context size and KV cache types
    the recipe's notes state in prose (`c=131072, kv q8_0`, `q4_0/q4_1 KV`): what the notes state is what ran, so it
    is carried into the command (llama.cpp's --ctx-size, --cache-type-k/-v; vLLM's and SGLang's context length and
    an fp8 --kv-cache-dtype), each named in a note. Where the engine has no option for it, the notes state two
    readings, or a vLLM/SGLang recipe states a llama.cpp cache type, the generated command would launch another
    option set than the one that ran: refused."""
    text = _prose(data)
    if not text:
        return argv, []
    notes: list[str] = []
    where = "the recipe's notes" if isinstance(data.get("notes"), str) else f"{_REGISTRY_LM}.notes"
    kv = _stated_kv(text)
    context = _stated_context(text)
    for what, stated in (("KV cache types", kv), ("context sizes", context)):
        if stated is False:
            raise RecipeError(
                f"{where} state more than one of {what}, and the command was generated, not recorded: which ran "
                "cannot be told",
                source=source,
                field=field_name,
            )
    if isinstance(kv, tuple):
        k, v = kv
        kind = ENGINES.get(engine)
        split = kind.kv_cache_split if kind is not None else None
        dtype_option = kind.kv_cache_dtype_option if kind is not None else None
        if split is not None:
            for spellings, value in zip(split, (k, v), strict=True):
                name = spellings[0]
                argv, was = _set_option(argv, spellings, name, value)
                if was != value:
                    what = "added" if was is None else f"replaces {was!r}"
                    notes.append(
                        f"{where} state a {value} KV cache, which the generated command lacks: {name} {value} {what}"
                    )
        elif dtype_option is not None and k == v and k.startswith("fp8"):
            argv, was = _set_option(argv, (dtype_option,), dtype_option, k)
            if was != k:
                notes.append(f"{where} state an {k} KV cache, which the generated command lacks: {dtype_option} {k}")
        elif not (dtype_option is not None and k == v and k in ("f16", "bf16")):
            raise RecipeError(
                f"{where} state a {k}/{v} KV cache, which a {engine} command the farm generates cannot carry: the "
                "command would launch another cache type than the one that ran",
                source=source,
                field=field_name,
            )
    if isinstance(context, int) and not isinstance(context, bool):
        option = _CONTEXT_OPTIONS.get(engine)
        if option is None:
            raise RecipeError(
                f"{where} state a context of {context} tokens, which a {engine} command the farm generates cannot "
                "carry: the command would launch another context than the one that ran",
                source=source,
                field=field_name,
            )
        argv, was = _set_option(argv, _CONTEXT_SPELLINGS[engine], option, str(context))
        if was != str(context):
            what = "added" if was is None else f"replaces the generated {was!r}"
            notes.append(f"{where} state a context of {context} tokens: {option} {context} {what}")
    return argv, notes


_MTP_TOKENS = re.compile(r"\bMTP(?:\s*[=:]?\s*|\s+k\s*=\s*)(\d{1,2})\b", re.IGNORECASE)


def _mtp_tokens(data: Mapping[str, Any]) -> int | None:
    """The number of MTP draft tokens the recipe's notes state (`using MTP 8`, `MTP k=4`), when they state exactly
    one."""
    notes = data.get("notes") if data.get("notes") is not None else dig(data, f"{_REGISTRY_LM}.notes")
    if not isinstance(notes, str):
        return None
    found = {int(match) for match in _MTP_TOKENS.findall(notes)}
    return found.pop() if len(found) == 1 and 0 < min(found) <= 16 else None


def _set_option(argv: list[str], spellings: tuple[str, ...], name: str, value: str) -> tuple[list[str], str | None]:
    """argv with the option (any of its spellings) set to value, and the value it had (None: it was absent)."""
    for index, token in enumerate(argv):
        head, equals, inline = token.partition("=")
        if head.replace("_", "-") not in spellings:
            continue
        if equals:
            return [*argv[:index], f"{head}={value}", *argv[index + 1 :]], inline
        if index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            return [*argv[: index + 1], value, *argv[index + 2 :]], argv[index + 1]
        return [*argv[:index], name, value, *argv[index + 1 :]], "on"
    return [*argv, name, value], None


_PROD_CHECKED = re.compile(
    r"^https://huggingface\.co/api/models/(?P<repository>[A-Za-z0-9][\w.-]*/[\w.-]+)/revision/[0-9a-f]{40}(?:[?#].*)?$"
)
"""The Hugging Face API address the registry's production check (`metadata.prod_checks.source`) read the model's
weights from: it names the repository it pinned."""

_CHECKPOINT_PAGE = re.compile(r"^https://huggingface\.co/(?P<repository>[A-Za-z0-9][\w.-]*/[\w.-]+)/?$")
"""A Hugging Face model page, as the registry's credits name a checkpoint's publisher (`metadata.credits`)."""


def _model_hint(data: Mapping[str, Any], draft_launch: Mapping[str, Any], engine: str) -> str | None:
    """The repository the registry itself names for the recipe's model, for an instance the farm's snapshot lacks:
    its synthesized draft launch's model, else the repository its production check pinned, else the checkpoint its
    credits name. The last two count only where the instance id names that repository (its part before `--`
    ends with the repository's slug), so a credit for some other component is never taken for the model."""
    hinted = draft_model(draft_launch, engine)
    if hinted is not None:
        return hinted
    instance = data.get("model_instance_id")
    if not isinstance(instance, str):
        return None
    candidates: list[str] = []
    source = dig(data, "metadata.prod_checks.source")
    if isinstance(source, str) and (found := _PROD_CHECKED.match(source)) is not None:
        candidates.append(found["repository"])
    credits = dig(data, "metadata.credits")
    for credit in credits if isinstance(credits, list) else []:
        url = credit.get("url") if isinstance(credit, Mapping) else None
        if isinstance(url, str) and (found := _CHECKPOINT_PAGE.match(url)) is not None:
            candidates.append(found["repository"])
    named = instance.partition("--")[0].lower()
    return next((repo for repo in candidates if named.endswith(_slug(repo))), None)


def _slug(repository: str) -> str:
    """A repository id as the registry's instance ids spell it (`Org/Model-3.5B` -> `org-model-3-5b`)."""
    return re.sub(r"[^a-z0-9]+", "-", repository.lower()).strip("-")


def _config_asset(
    argv: list[str],
    kind: EngineKind,
    launch: Mapping[str, Any],
    draft_launch: Mapping[str, Any],
    source: str,
) -> tuple[list[str], assets.Asset | None]:
    """A TabbyAPI command's `--config PATH` where the recipe's container mounts a registry asset at PATH: the
    asset's config document in place of the path (the farm's snapshot has the asset), or a refusal naming it. Any
    other `--config` is left as written, for the policy to refuse."""
    option = kind.config_option
    if option is None:
        return argv, None
    names = [i for i, word in enumerate(argv) if word == option or word.startswith(f"{option}=")]
    if len(names) != 1:
        return argv, None
    index = names[0]
    inline = argv[index].startswith(f"{option}=")
    path = argv[index].partition("=")[2] if inline else (argv[index + 1] if index + 1 < len(argv) else "")
    for field_name, section in (("launch", launch), ("draft_launch", draft_launch)):
        mounts = section.get("mounts")
        if not isinstance(mounts, list):
            continue
        for number, mount in enumerate(mounts):
            if not isinstance(mount, Mapping) or mount.get("target") != path:
                continue
            mount_source = mount.get("source")
            if not isinstance(mount_source, str) or not assets.is_asset(mount_source):
                return argv, None
            asset = assets.lookup(mount_source)
            if asset is None:
                raise RecipeError(
                    f"{kind.prose_name}'s {option} {path} is registry asset {mount_source!r}, which the farm's "
                    f"snapshot of the registry's config assets ({assets.snapshot_size()}; deploy/refresh-assets.py "
                    "updates it) lacks: the config holds the whole command",
                    source=source,
                    field=f"{field_name}.mounts[{number}].source",
                )
            # Where the engine listens is the worker's: the recipe's config carries no listen address.
            document = json.dumps(assets.without_listen(asset.document), separators=(",", ":"), ensure_ascii=False)
            if inline:
                return [*argv[:index], f"{option}={document}", *argv[index + 1 :]], asset
            return [*argv[: index + 1], document, *argv[index + 2 :]], asset
    return argv, None


def _configured_by(section: Mapping[str, Any]) -> str:
    """`; its environment (DCP, MODEL, ...) configures the image's own command`, where the launch gives one."""
    environment = section.get("environment")
    if not isinstance(environment, Mapping) or not environment:
        return ""
    names = ", ".join(sorted(str(name) for name in environment)[:8])
    return f"; its environment ({names}{', ...' if len(environment) > 8 else ''}) configures the image's own command"


def _refuse_unfilled_model(
    engine: str, command: Command, section: Mapping[str, Any], source: str, field_name: str
) -> None:
    """A container launch whose model is a template's blank (`$IMAGE`, `${MODEL}`, `<model>`): in a container the
    farm has no instance to put in its place (the image's own paths), and `$IMAGE` is how a `docker run` line names
    its image, so the arguments after it are no command of the engine's. Refused, naming the blank."""
    if section.get("kind") not in ("docker", "docker-compose") and not section.get("image"):
        return  # run as a process: a blank stands for the recipe's instance (commands.resolve_model)
    model = model_in_argv(engine, command.argv)
    if model is None or not is_template_blank(model):
        return
    image = "the image, as a `docker run` line names it: the arguments are the image and what follows it, not a "
    image += f"{engine} command"
    if model.strip("${}").upper() == "IMAGE":
        what = image + _configured_by(section)
    else:
        what = "a blank the paste never filled in, and in a container the farm cannot put a model of its own there"
    raise RecipeError(
        f"the model is {model!r}, {what}: what ran cannot be told from the recipe",
        source=source,
        field=field_name,
    )


def _uncarried_command(
    launch: Mapping[str, Any], engine: str, source: str, metadata: object = None
) -> RecipeError | None:
    """Why a launch without arguments shows no command. An official engine image's default command names none of
    the recipe's model (`vllm serve` alone serves vLLM's own default model): the recipe then gives nothing else, and
    the command is built from the engine, the model and the serving block, as for a reference launch (this reason
    is kept for a refusal when that cannot be done either). A container whose image is not the engine's official
    one, or that replaces its entrypoint, runs what the farm cannot judge; a compose file or script holds the
    command and its settings (their environment templates, custom images), which the recipe does not carry and an
    engine-and-model command would not reproduce: refused. So is a reference launch the registry itself marks
    as not a launch contract (`launch.container.reason`): the run used an upstream launcher (a compose file, a
    serve script baked into a custom image) with its own settings (`metadata.upstream_defaults`: MTP, DCP, MoE
    modes, kernel back-ends), and a command built from the engine and the model would measure another setup
    under the recipe's name."""
    kind = launch.get("kind")
    container = launch.get("container")
    reason = container.get("reason") if isinstance(container, Mapping) else None
    if kind == "reference" and reason == _NOT_A_LAUNCH_CONTRACT:
        defaults = metadata.get("upstream_defaults") if isinstance(metadata, Mapping) else None
        settings = ""
        if isinstance(defaults, Mapping) and defaults:
            shown = ", ".join(
                f"{key}={value}" for key, value in sorted(defaults.items(), key=lambda item: str(item[0]))
            )
            settings = f" with its settings {shown[:200]}"
        where = launch.get("url") if isinstance(launch.get("url"), str) else "an upstream file"
        raise RecipeError(
            f"a reference launch the registry marks {reason!r}: the run used the upstream launcher in {where}"
            f"{settings}, which the recipe does not carry as a command; one built from the engine and the model "
            "would measure another setup",
            source=source,
            field="launch.container.reason",
        )
    if kind == "docker" and launch.get("image"):
        image = launch["image"]
        if not isinstance(image, str) or image_engine(image) != engine or launch.get("entrypoint"):
            raise RecipeError(
                f"a docker launch without arguments of {str(image)[:100]!r}, not {engine}'s official image (or "
                "with its own entrypoint): what it runs is the image's own command, which the recipe does not show",
                source=source,
                field="launch.arguments",
            )
        return RecipeError(
            f"a docker launch of {image} without arguments: it runs the image's default command, which names no "
            "model of the recipe's",
            source=source,
            field="launch.arguments",
        )
    if isinstance(kind, str) and kind in _NO_COMMAND_KINDS:
        raise RecipeError(
            f"a {kind} launch without arguments: its command lives in {_command_file(launch)}, which the recipe "
            "does not carry",
            source=source,
            field="launch.arguments",
        )
    return None


def _step_model(engine: str, tokens: list[str]) -> str | None:
    """The model of a recorded step that names it for the engine's server, and nothing else (`[path/]ollama pull
    MODEL`, `ollama run MODEL`: the table's `model_steps` and `model_name`): the recipe names its model plainly
    (`hf.co/unsloth/Qwen3.6-35B-A3B-GGUF:UD-Q4_K_M`, `qwen3.6:35b`), whatever the snapshot of instances holds."""
    kind = ENGINES.get(engine)
    if kind is None or not kind.model_steps or kind.model_name is None or len(tokens) != 3:
        return None
    if executable_name(tokens[0]) != kind.launcher[0] or tokens[1] not in kind.model_steps:
        return None
    return tokens[2] if re.match(kind.model_name, tokens[2]) else None


def _named_step_model(
    engine: str, chosen: tuple[str, list[str]] | None, launch: Mapping[str, Any]
) -> tuple[str, str] | None:
    """(model, field) where a recipe's recorded command, or its launch's `observed_command`, is a step that names one
    model for its engine's server (`ollama pull MODEL`: the table's `model_steps`)."""
    if chosen is not None and (found := _step_model(engine, chosen[1])) is not None:
        return found, chosen[0]
    observed = launch.get("observed_command")
    if isinstance(observed, str) and (found := _step_model(engine, observed.split())) is not None:
        return found, "launch.observed_command"
    return None


_PROSE_TOKEN = re.compile(r"^[\w][\w.:/,()'-]*$")


_PROBE_CONTEXT = re.compile(r"\bnum_ctx\s*[=:]?\s*(\d{3,7})\b")


def _context_of_the_run(
    serving: ServingLimits, data: Mapping[str, Any], source: str
) -> tuple[ServingLimits, str | None]:
    """Rule "a context ceiling is not the run's context": where `serving.max_context_tokens` is the largest context
    a separate ceiling search reached (`metadata.ctx_ceiling.max_ok_ctx`), the run itself was measured at the
    context its probe states (`metadata.validation.probe`: "num_ctx 32768"); that is the context the farm serves,
    noted. A ceiling with no stated context of the run is refused: serving the ceiling would be another run."""
    ceiling = dig(data, "metadata.ctx_ceiling.max_ok_ctx")
    if not isinstance(ceiling, int) or serving.max_context_tokens != ceiling:
        return serving, None
    probe = dig(data, "metadata.validation.probe")
    stated = _PROBE_CONTEXT.search(probe) if isinstance(probe, str) else None
    if stated is None:
        raise RecipeError(
            f"is {ceiling}, the largest context metadata.ctx_ceiling reached, not the context the run was measured "
            "at, which the recipe does not state (metadata.validation.probe names no num_ctx)",
            source=source,
            field="serving.max_context_tokens",
        )
    context = int(stated.group(1))
    note = (
        f"serving.max_context_tokens {ceiling} is metadata.ctx_ceiling's largest working context; the run was "
        f"measured at num_ctx {context} (metadata.validation.probe), which is served"
    )
    return serving.model_copy(update={"max_context_tokens": context}), note


_UNREAD_FIELD = "metadata.observed_command"


def _unread_command(data: Mapping[str, Any], source: str) -> RecipeError | None:
    """Rule "a recorded command the farm does not read": metadata.observed_command (a discord message, a page's
    text) that names an engine's server (`... export X=1 vllm serve MODEL --kv-cache-dtype fp8 ...`) records what
    ran, but the farm reads commands only from argv, tokenized arguments and launches. Building one from the
    registry's draft or the engine and instance would launch another option set than the recorded one, so the
    recipe is refused, naming the field. None: the field is absent or names no server."""
    metadata = data.get("metadata")
    observed = metadata.get("observed_command") if isinstance(metadata, Mapping) else None
    if not isinstance(observed, str) or not observed.strip():
        return None
    words = observed.split()
    at = next((index for index in range(len(words)) if starts_a_server(words[index:])), None)
    if at is None:
        return None
    shown = " ".join(words[at : at + 6])[:100]
    return RecipeError(
        f"{_UNREAD_FIELD} records a server command ({shown!r} ...) in a form the farm does not read as a command; "
        "a command built from the registry's draft or from the engine and model instance would launch another "
        "option set than the one that ran: put the command in argv",
        source=source,
        field=_UNREAD_FIELD,
    )


def _why_no_server_command(data: Mapping[str, Any], launch: Mapping[str, Any]) -> str | None:
    """Why a recipe that records no server command has none, where the document says it: the only command it
    records (metadata.observed_command) runs something else (a benchmark client), or its launch contract lives
    upstream (launch.container.reason). None: the document does not say."""
    metadata = data.get("metadata")
    observed = metadata.get("observed_command") if isinstance(metadata, Mapping) else None
    if isinstance(observed, str) and observed.strip():
        try:
            tokens = split_environment(split_command(observed, "", ""), "", "")[1]
        except RecipeError:
            tokens = []
        if tokens and not starts_a_server(tokens):
            shown = " ".join(tokens[:3])[:80]
            return f"the only command it records, metadata.observed_command, runs {shown!r}, which serves nothing"
    container = launch.get("container")
    reason = container.get("reason") if isinstance(container, Mapping) else None
    if isinstance(reason, str) and "upstream" in reason:
        upstream = metadata.get("upstream_recipe_id") if isinstance(metadata, Mapping) else None
        where = f" ({upstream})" if isinstance(upstream, str) else ""
        return f"launch.container.reason is {reason!r}: the launch lives in another recipe{where}"
    return None


def _prose_without_settings(tokens: list[str]) -> bool:
    """Whether a recorded 'command' is a sentence that names no setting: at least three words, none an option
    (`-x`, `--x`), an assignment (`a=b`), a shell operator or a path to an executable, and its first word not an
    engine's or a benchmark tool's executable. Such a line says which server ran, in words; it is no command."""
    if len(tokens) < 3 or starts_a_server(tokens) or mentions_an_engine(tokens) or _benchmark_tool(tokens):
        return False
    if "/" in tokens[0] or "." in tokens[0] or tokens[0].islower():
        return False  # `./run.sh`, `llama-cli`, `python3`: an executable, not the first word of a sentence
    return all(_PROSE_TOKEN.match(token) and not token.startswith("-") and "=" not in token for token in tokens)


_FUNCTION_WORDS = frozenset({"on", "with", "using", "via", "for", "at", "and", "in", "from", "over", "against"})


def _words_before_options(engine: str, tokens: list[str], source: str, field_name: str) -> tuple[list[str], list[str]]:
    """Rule "options inside a sentence": `llama-server on GPU0/one B70 with --parallel 1 ...` is the server and its
    options, told in a sentence. The words between the launcher and the first option are cut (and returned, for a
    note) only where the engine takes no argument before its options (no positional model), they are at most six,
    and one of them is a function word of English (`on`, `with`, `using`, ...), so that they cannot be a value.
    Otherwise the tokens are returned whole, for read_command and the judge to refuse what is stray."""
    if engine in POSITIONAL_MODEL_ENGINES or ENGINES[engine].optional_positional_model:
        return tokens, []
    rest = split_environment(tokens, source, field_name)[1]
    if not starts_a_server(rest):
        return tokens, []
    prefix = tokens[: len(tokens) - len(rest)]  # the VAR=value words before the executable, as they were
    launcher = len(ENGINE_LAUNCHERS[engine])
    words: list[str] = []
    for token in rest[launcher:]:
        if token.startswith("-"):
            break
        words.append(token)
    if not words or len(words) > 6 or len(words) == len(rest) - launcher:
        return tokens, []
    if not any(word.lower() in _FUNCTION_WORDS for word in words):
        return tokens, []
    return [*prefix, *rest[:launcher], *rest[launcher + len(words) :]], words


def _only_options(tokens: list[str]) -> bool:
    """Whether a recorded command is options alone (`-b 1024 --cache-type-k q8_0`), with no executable."""
    return bool(tokens) and tokens[0].startswith("-") and len(tokens[0]) > 1


def _benchmark_tool(tokens: list[str]) -> str | None:
    """The tool's name when a command runs a benchmark tool rather than a server (after any VAR=value words)."""
    for token in tokens:
        if "=" in token and not token.startswith("-") and token.split("=", 1)[0].isidentifier():
            continue
        name = executable_name(token)
        return name if name in NOT_SERVERS else None
    return None


def _in_container(argv_field: str, launch: Mapping[str, Any], draft_launch: Mapping[str, Any]) -> bool:
    """Whether the command runs in the recipe's container launch, where a path names that container's mounts (a
    docker-compose launch's file is not carried: no container is built from it, and its command runs as a
    process, where a path like any other is the submitter's)."""
    section = {"launch.arguments": launch, "draft_launch.arguments": draft_launch}.get(argv_field)
    return section is not None and section.get("kind") == "docker" and bool(section.get("image"))


_SEPARATORS = frozenset({"&&", ";", "||", "&"})

_MAX_HOST_DEVICES = 8
"""The most accelerators one worker host has (an 8-GPU node): an inferred rig is never taken past it."""


_PARALLEL_SPELLINGS = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp", "--pipeline-parallel-size", "-pp")


def _names_parallel(argv: list[str]) -> bool:
    """Whether a command names a parallel size itself (in any spelling, `--opt=value` included)."""
    return any(token.partition("=")[0].replace("_", "-") in _PARALLEL_SPELLINGS for token in argv)


def _server_step(chosen: tuple[str, list[str]], source: str) -> tuple[tuple[str, list[str]], str | None]:
    """A recorded command line of several commands (`server ...; bench.py ...`, `start && load`): the one step
    that starts a server or a benchmark tool the farm translates, and a note of what was left out. Never more than
    one server step; otherwise the tokens as they are (read_command refuses what it cannot read)."""
    field_name, tokens = chosen
    steps = [_after_label(step, source, field_name) for step in _steps(tokens)]
    for step in steps:
        maker = _checkpoint_maker(split_environment(step, source, field_name)[1])
        if maker is not None:
            # Rule "a recording that makes its own checkpoint": the run's model is the file that step wrote (a
            # custom quantization, a conversion), which the recipe does not carry; the registry's draft or the
            # instance's published file would be another checkpoint than the one that ran.
            raise RecipeError(
                f"the recording makes its own checkpoint with {maker} ({' '.join(step)[:100]!r}): the model that "
                "ran is that self-made file, which the recipe does not carry, and no other file stands for it",
                source=source,
                field=field_name,
            )
    if len(steps) < 2:
        return chosen, None
    started = [step for step in steps if starts_a_server(split_environment(step, source, field_name)[1])]
    benches = [step for step in steps if _benchmark_tool(step) is not None]
    if len(started) == 1 and benches:
        return _server_over_bench(field_name, started[0], benches, steps, source)
    servers = [
        step
        for step in steps
        if starts_a_server(split_environment(step, source, field_name)[1]) or _benchmark_tool(step) is not None
    ]
    if len(servers) != 1:
        return chosen, None
    others = [" ".join(step)[:80] for step in steps if step is not servers[0]]
    return (
        field_name,
        servers[0],
    ), f"the recorded line runs several commands; the server's alone is read (left out: {'; '.join(others)})"


_CHECKPOINT_MAKERS = frozenset({"llama-quantize", "quantize", "llama-gguf-split"})
"""Tools that write a model file (llama.cpp's quantizer): a recording that runs one made its own checkpoint."""

_CONVERT_SCRIPT = re.compile(r"^convert[-_][A-Za-z0-9_-]*\.py$")
"""llama.cpp's conversion scripts (`convert_hf_to_gguf.py`, `convert_lora_to_gguf.py`, ...)."""


def _checkpoint_maker(tokens: list[str]) -> str | None:
    """The tool or script a command runs when it writes a model checkpoint (llama-quantize, a convert script run
    directly or by python), else None."""
    if not tokens:
        return None
    name = executable_name(tokens[0])
    if name in _CHECKPOINT_MAKERS or _CONVERT_SCRIPT.match(name):
        return name
    if re.match(r"^python(\d+(\.\d+)?)?$", name) and len(tokens) > 1:
        script = executable_name(tokens[1])
        if _CONVERT_SCRIPT.match(script):
            return script
    return None


_MAX_LABEL_WORDS = 3
"""The most words a label before a command takes (`server check:`, `bench:`)."""


def _after_label(step: list[str], source: str, field_name: str) -> list[str]:
    """A step without a short label in front of its command (`server check: llama-server ...`, `bench:
    llama-bench ...`): the words through the last one ending in `:`, when what follows starts a server or a
    benchmark tool and the label has no option in it."""
    for index, word in enumerate(step[:_MAX_LABEL_WORDS]):
        if word.startswith("-"):
            break
        rest = step[index + 1 :]
        if word.endswith(":") and rest:
            runs = split_environment(rest, source, field_name)[1]
            if starts_a_server(runs) or _benchmark_tool(rest) is not None or _checkpoint_maker(runs) is not None:
                return rest
    return step


_BENCH_MODEL_OPTIONS = ("-m", "--model")
"""How llama-bench names the model file it loads."""

_SERVER_MODEL_OPTIONS = ("-m", "--model", "-hf", "-hfr", "--hf-repo", "-mu", "--model-url")
"""How llama-server names the model it loads."""


def _server_over_bench(
    field_name: str, server: list[str], benches: list[list[str]], steps: list[list[str]], source: str
) -> tuple[tuple[str, list[str]], str]:
    """Rule "a recorded server command beats a benchmark's conversion": a recording with a benchmark tool's run and
    a server command (`llama-bench ...; server check: llama-server -c 106496 ...`) is served as that server command
    ran, with its own options (the benchmark's are not merged in). Where the server command names no model, the
    benchmark's model file (the one file the same recording loaded) is the model; two benchmarks naming different
    files, or one naming none, leave the server command as it is (read_command refuses it if it names no model)."""
    note = "the recording holds a benchmark run and a server command; the server command is what served"
    others = [" ".join(step)[:80] for step in steps if step is not server]
    note += f" (left out: {'; '.join(others)})"
    words = split_environment(server, source, field_name)[1]
    names_model = any(token.split("=", 1)[0] in _SERVER_MODEL_OPTIONS for token in words)
    if not names_model:
        files = set()
        for bench in benches:
            for index, token in enumerate(bench[:-1]):
                if token in _BENCH_MODEL_OPTIONS:
                    files.add(bench[index + 1])
        if len(files) == 1:
            model = files.pop()
            server = [*server, "--model", model]
            note += f"; it names no model, so the benchmark's model file {model!r} (the same recording's) is added"
    return (field_name, server), note


def _noted(command: Command, note: str | None) -> Command:
    return command if note is None else dataclasses.replace(command, notes=(*command.notes, note))


def _tool_role(engine: str, tokens: list[str]) -> str | None:
    """How the engine's table reads a recorded run of one of its project's tools ("benchmark", "client"), if the
    command runs one (EngineKind.tools)."""
    tool = _benchmark_tool(tokens)
    return ENGINES[engine].tools.get(tool) if tool is not None and engine in ENGINES else None


def _from_tool(engine: str, chosen: tuple[str, list[str]], source: str) -> Command:
    """A recorded run of one of the engine's tools (llama-bench, what LocalMaxxing records for llama.cpp runs;
    llama-cli) as the server command that loads the same model the same way: the engine's adapter translates it
    (`tool_to_server`), and a note says what was dropped and what was made explicit."""
    import importlib

    from farm.errors import ArgumentPolicyError

    field_name, tokens = chosen
    kind = ENGINES[engine]
    environment, rest = split_environment(tokens, source, field_name)
    tool = executable_name(rest[0])
    role = kind.tools[tool]
    assert kind.adapter is not None, f"{engine} reads tools but has no adapter to translate them"
    translate = importlib.import_module(kind.adapter).tool_to_server
    try:
        server, dropped, defaults = translate(rest)
    except ArgumentPolicyError as exc:
        raise RecipeError(
            f"a {tool} command the farm cannot serve the same way: {exc.detail}", source=source, field=field_name
        ) from exc
    command = read_command(list(server), source, field_name, declared_engine=engine)
    launcher = " ".join(kind.launcher)
    if role == "client":
        note = f"{tool} ({NOT_SERVERS[tool]}) ran the model: read as {launcher} with the same options"
        if dropped:
            note += f"; the client's own ({' '.join(dropped)[:100]}) were left out: the sweep plan sends its prompts"
    else:
        note = f"translated from {tool} to {launcher}"
        if dropped:
            note += f"; its benchmark options ({' '.join(dropped)}) were dropped: the sweep plan replaces them"
        if defaults:
            note += f"; {tool}'s defaults made explicit: {' '.join(defaults)}"
    return Command(
        engine=command.engine,
        argv=command.argv,
        environment={**environment, **command.environment},
        source_field=field_name,
        source_tokens=tuple(tokens),
        notes=(note,),
    )


def _not_a_server(chosen: tuple[str, list[str]], source: str) -> RecipeError:
    field_name, tokens = chosen
    try:
        read_command(tokens, source, field_name, declared_engine=None)
    except RecipeError as exc:
        return exc
    return RecipeError("runs a benchmark tool, not a server", source=source, field=field_name)


def _repository(data: Mapping[str, Any]) -> str | None:
    """The model repository a recipe names outside its command: the farm's `model_id`, or the registry API's
    `huggingface.repository` (the model instance's identity, present in the API's expanded records)."""
    model_id = data.get("model_id")
    if isinstance(model_id, str) and model_id.strip():
        return model_id
    huggingface = data.get("huggingface")
    if isinstance(huggingface, Mapping):
        repository = huggingface.get("repository")
        if isinstance(repository, str) and repository.strip() and huggingface.get("status", "known") == "known":
            return repository
    return None


def _more_faithful(
    listed_field: str,
    listed: list[str],
    observed_field: str,
    observed: list[str],
    source: str,
    *,
    engine: str | None = None,
) -> tuple[str, list[str]]:
    """Of two copies of one command, the one that keeps JSON values valid (or a Windows path's backslashes, or a
    path with a space whole) where they differ only there; otherwise they must agree."""
    if listed == observed:
        return listed_field, listed
    if engine is not None and len(listed) > len(observed):
        # One copy split a path with a space that the other kept whole (quoted): the same command once the split
        # path is joined again (pasted_words.rejoin_split_paths), and the whole copy is the faithful one.
        joined, _ = rejoin_split_paths(engine, listed)
        if joined == observed:
            return observed_field, observed
    if engine is not None and len(observed) > len(listed):
        joined, _ = rejoin_split_paths(engine, observed)
        if joined == listed:
            return listed_field, listed
    if "&&" in observed and listed in _steps(observed):
        # `lms server start ... && lms load MODEL ...`: the token list keeps the one step that names the model.
        return listed_field, listed
    if len(listed) == len(observed):
        differing = {index for index, (a, b) in enumerate(zip(listed, observed, strict=True)) if a != b}
        listed_damage, observed_damage = set(json_damage(listed)), set(json_damage(observed))
        if differing <= listed_damage and not differing & observed_damage:
            return observed_field, observed
        if differing <= observed_damage and not differing & listed_damage:
            return listed_field, listed
        if all(observed[index] == listed[index].replace("\\", "") for index in differing):
            # A Windows path (`C:\models\m.gguf`) split as a POSIX shell would lose its backslashes; the token
            # list kept them.
            return listed_field, listed
    cross_check(listed, listed_field, observed, observed_field, source)
    return listed_field, listed


def _steps(tokens: list[str]) -> list[list[str]]:
    """A command line's commands, split where a shell would split them (`&&`, `||`, `&`, `;`, and a word ending in
    `;`), without the empty ones."""
    steps: list[list[str]] = [[]]
    for word in tokens:
        if word in _SEPARATORS:
            steps.append([])
        elif word.endswith(";") and len(word) > 1:
            steps[-1].append(word[:-1])
            steps.append([])
        else:
            steps[-1].append(word)
    return [step for step in steps if step]


def _with_environment(command: Command, environment: Mapping[str, str]) -> Command:
    if not environment:
        return command
    return dataclasses.replace(command, environment={**environment, **command.environment})


def _entrypoint(value: object, source: str, field_name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return split_command(value, source, field_name)
    return string_list(value, source, field_name)


def _command_file(launch: Mapping[str, Any]) -> str:
    for key in ("compose", "script"):
        section = launch.get(key)
        if isinstance(section, Mapping) and isinstance(section.get("file"), str):
            return repr(section["file"])
    return "a file"


def _canonical_arguments(engine: str) -> bool:
    """Whether the registry's container arguments for the engine are its canonical command after the launcher."""
    images = ENGINES[engine].images if engine in ENGINES else None
    return images is not None and images.canonical_arguments


def _running(
    container: ContainerLaunch, engine: str, argv: list[str], environment: Mapping[str, str]
) -> ContainerLaunch | None:
    """The draft launch's container running the recipe's own command, when that command came from another field:
    the registry synthesizes a draft from the recipe (a subset of its options), so its arguments are not what
    the recipe ran. For vLLM the image's entrypoint is `vllm serve`, so the canonical argv's arguments are the
    container's; other engines' images take a whole command the draft wrote its own way, so the container is left
    out and the recipe runs as the process its command is."""
    if not _canonical_arguments(engine):
        return None
    launcher = ENGINE_LAUNCHERS[engine]
    # The draft's entrypoint, environment, ports and mounts stay, and are judged as the draft wrote them.
    return container.model_copy(
        update={"arguments": tuple(argv[len(launcher) :]), "environment": {**container.environment, **environment}}
    )


def _container(draft_launch: Mapping[str, Any], source: str, prefix: str) -> ContainerLaunch:
    keys = (
        "image",
        "arguments",
        "entrypoint",
        "environment",
        "ipc",
        "shm_size",
        "mounts",
        "container_port",
        "host_port",
        "accelerator_backend",
    )
    fields = {key: draft_launch[key] for key in keys if draft_launch.get(key) is not None}
    if isinstance(fields.get("arguments"), list) and all(isinstance(item, str) for item in fields["arguments"]):
        # The same closing chat fence and flattened `args:`/`env:` lists the argv reads (farm.recipes.commands)
        # are read the same way for the image.
        arguments, listed = from_yaml_items(without_closing_fence(fields["arguments"]))
        fields["arguments"] = without_closing_fence(before_prose_fence(arguments))
        if listed and isinstance(fields.get("environment", {}), dict):
            fields["environment"] = {**listed, **fields.get("environment", {})}
    if isinstance(fields.get("mounts"), list):
        fields["mounts"] = [
            {k: m[k] for k in ("source", "target", "read_only") if k in m} if isinstance(m, dict) else m
            for m in fields["mounts"]
        ]
    try:
        return ContainerLaunch.model_validate(fields)
    except ValidationError as exc:
        raise from_validation(exc, source, prefix) from exc


def _serving(value: object, source: str) -> ServingLimits:
    fields = mapping(value, source, "serving")
    known = {key: fields[key] for key in ServingLimits.model_fields if fields.get(key) is not None}
    try:
        return ServingLimits.model_validate(known)
    except ValidationError as exc:
        raise from_validation(exc, source, "serving") from exc


def _sources(value: object, source: str) -> list[SourceRef]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecipeError(f"expected a list, got {value!r}", source=source, field="provenance.sources")
    refs = []
    for index, item in enumerate(value):
        field = f"provenance.sources[{index}]"
        entry = mapping(item, source, field)
        try:
            refs.append(SourceRef.model_validate({k: entry.get(k) for k in ("kind", "url", "captured_at")}))
        except ValidationError as exc:
            raise from_validation(exc, source, field) from exc
    return refs
