"""A judged command read back by its engine's own parser, at submit and at the worker: which parser is the
engine's table line's (`EngineKind.read_back`, built in the engine's folder from its declarations with the
machinery of farm.engines.reparse); what is compared is farm.engines.reparse.check_parses_back."""

from __future__ import annotations

from collections.abc import Sequence

from farm.engines.argspec import ArgSpec, CanonicalCommand
from farm.engines.registry import ENGINES, canonical_engine_name
from farm.engines.reparse import Mirror, check_parses_back, with_extras
from farm.errors import ArgumentPolicyError


def mirror_for(spec: ArgSpec) -> Mirror | None:
    """The engine's own parser for a spec (its table line's `read_back`), or None for an engine the farm has no
    declarations of."""
    kind = ENGINES.get(canonical_engine_name(spec.engine))
    if kind is None or kind.read_back is None:
        return None
    return kind.read_back(spec)


def recipe_tokens(command: CanonicalCommand) -> tuple[tuple[str, ...], Mirror | None]:
    """The judged command as the engine gets it after its executable (the model, then the options), and the
    engine's parser; no parser: an engine the farm has no declarations of."""
    mirror = mirror_for(with_extras(command.spec, command))
    if mirror is None:
        return command.render_options(), None
    model: tuple[str, ...] = ()
    if command.model is not None:
        model = (command.model,) if mirror.model_dest is None else (_model_option(command.spec), command.model)
    return (*model, *command.render_options()), mirror


def _model_option(spec: ArgSpec) -> str:
    return spec.model_option or "--model"


def check_round_trip(command: CanonicalCommand) -> None:
    """Refuse a judged command whose rendering the engine's own parser would read as anything else."""
    tokens, mirror = recipe_tokens(command)
    if mirror is None:
        return
    check_parses_back(command, tokens, mirror.parser, model=command.model, model_dest=mirror.model_dest)


def check_launch(
    command: CanonicalCommand,
    tokens: Sequence[str],
    *,
    model: str | None,
    worker_tokens: Sequence[str],
) -> None:
    """At the worker, the argv after the executable (`tokens`): the engine's parser must read the judged options
    of `command` with their judged values, the model the worker chose, and beyond them only the options in the
    worker's own `worker_tokens` (its listen address, served name, the profile's extra arguments)."""
    mirror = mirror_for(with_extras(command.spec, command))
    if mirror is None:
        return
    try:
        worker = mirror.parser.read(worker_tokens)
    except ArgumentPolicyError:
        # The host's own arguments (its profile's extra_args) are not the recipe's: where the engine's parser
        # would not read them, the engine itself refuses them at start (bad_argument, a host fault), so only the
        # recipe's part is read back here, alone, as at submit.
        check_round_trip(command)
        return
    check_parses_back(
        command,
        tokens,
        mirror.parser,
        model=model,
        model_dest=mirror.model_dest,
        worker_dests=frozenset(worker.occurrences),
    )
