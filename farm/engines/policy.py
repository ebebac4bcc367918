"""Engine argument policy: which commands a recipe may carry, judged at submit and again at the worker.

A recipe's command is parsed with its engine's own argument spec into a canonical command
(farm.engines.argspec), whose values are judged against the host's policy (farm.engines.judge); the worker then
launches that canonical command, re-rendered from the judged values, never the recipe's tokens.

Two lists decide. The engine's spec says which options exist and what their values are (vLLM's is generated from
its parser, llama.cpp's from its `--help`, the others are read from their sources: farm.engines.registry). The
host's policy (`EnginePolicy`, from the worker profile) says what this host allows beyond the defaults: models
trusted with remote code, code-loading options, extra options of a newer engine, its model and cache roots.

Before any parsing every raw token is checked: no shell syntax (no shell is ever used, but a token that looks like
shell is someone's mistake or someone's attack) and no secret-shaped value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from farm.engines.argspec import ArgSpec, CanonicalCommand, ValueKind, parse_command
from farm.engines.environment import check_recipe_environment, recipe_environment
from farm.engines.judge import DEFAULT_PATH_ROOTS, Judgement, check_model_id, judge
from farm.engines.readback import check_round_trip
from farm.engines.registry import engine_kind
from farm.engines.trust import ANY_COMMIT
from farm.errors import ArgumentPolicyError
from farm.recipes.fields import CREDENTIAL_VALUE

if TYPE_CHECKING:
    from farm.recipes.model import Recipe

_SHELL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[\x00]"), "a NUL byte"),
    (re.compile(r"[\r\n]"), "a newline"),
    (re.compile(r";"), "a ';' (command separator)"),
    (re.compile(r"\$\("), "a '$(' (command substitution)"),
    (re.compile(r"`"), "a backtick (command substitution)"),
    (re.compile(r"&&"), "'&&' (command chaining)"),
    (re.compile(r"^\s*\|"), "a leading '|' (a pipe)"),
)
_SECRET_VALUE = re.compile(rf"\b{CREDENTIAL_VALUE}\b")


@dataclass(frozen=True)
class EnginePolicy:
    """What one host allows beyond the engine's own list. The default allows nothing risky."""

    allow_trust_remote_code_models: frozenset[str] = frozenset()
    """`repository@revision` pairs that may run with remote code trusted (farm.engines.trust.parse_trust_list):
    every repository the engine loads must be pinned to a listed revision."""
    allow_local_media: bool = False
    """Whether --allowed-local-media-path (the engine reads files of the host) is allowed."""
    allowed_extra_flags: frozenset[str] = frozenset()
    """Options not in the engine's spec that this host accepts (a newer engine); each takes one value."""
    allowed_risky_flags: frozenset[str] = frozenset()
    """Code-loading options this host accepts."""
    allow_image_tags: bool = False
    """Container images: whether an image pinned by tag, not digest, may run."""
    allowed_images: frozenset[str] = frozenset()
    """Container images: repositories this host runs beside each engine's official ones (farm.engines.container)."""
    allowed_mount_sources: frozenset[str] = frozenset()
    """Container mounts: host paths a recipe may mount besides the model cache."""
    mount_roots: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Container mounts: the host directories the registry's `${MODEL_ROOT}` and `${CACHE_ROOT}` stand for."""
    path_roots: tuple[str, ...] = DEFAULT_PATH_ROOTS
    """The host's model and cache roots: every path an engine is given must lie under one."""
    specs: Mapping[str, ArgSpec] = field(default_factory=dict, compare=False)
    """The engines' specs on this host (by canonical engine name: the version it runs, or a list generated on
    it); missing: the shipped default."""
    spec_notes: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Which spec judges each engine on this host, and why that one (the worker's provenance says it)."""

    def spec_for(self, engine: str) -> ArgSpec:
        kind = engine_kind(engine)
        if kind.name in self.specs:
            return self.specs[kind.name]
        return kind.spec()

    def judgement(self, *, device_count: int | None = None, resolve_links: bool = False) -> Judgement:
        return Judgement(
            trusted_models=self.allow_trust_remote_code_models,
            path_roots=self.path_roots,
            allowed_code_options=self.allowed_risky_flags,
            allow_local_media=self.allow_local_media,
            device_count=device_count,
            resolve_links=resolve_links,
        )


DEFAULT_POLICY = EnginePolicy()
"""The strictest policy: the engine's list and nothing risky."""


def check_token(token: str) -> None:
    """Refuse a token that carries shell syntax or a secret, whatever its place."""
    for pattern, what in _SHELL_PATTERNS:
        if pattern.search(token):
            raise ArgumentPolicyError(
                f"{token!r}: contains {what}; engine arguments are never given to a shell", field="argv"
            )
    if _SECRET_VALUE.search(token):
        raise ArgumentPolicyError(
            "'<redacted>': looks like a secret token; secrets come from the worker's environment", field="argv"
        )


def canonical_command(
    argv: Sequence[str],
    engine: str,
    policy: EnginePolicy = DEFAULT_POLICY,
    *,
    device_count: int | None = None,
    resolve_links: bool = False,
) -> CanonicalCommand:
    """Parse `argv` with the engine's spec and judge it: the command the worker may launch, or
    ArgumentPolicyError naming the token and the reason."""
    spec = policy.spec_for(engine)
    command = parse_command(argv, spec, extra_options=policy.allowed_extra_flags, value_check=check_token)
    judge(command, policy.judgement(device_count=device_count, resolve_links=resolve_links))
    check_round_trip(command)
    return command


def check_argv(argv: Sequence[str], policy: EnginePolicy = DEFAULT_POLICY, *, engine: str) -> None:
    """Refuse a recipe command (its launcher, the model, its options) the engine or this host would not accept."""
    canonical_command(argv, engine, policy)


def recipe_command(
    recipe: Recipe, policy: EnginePolicy, *, resolve_links: bool = False, check_devices: bool = True
) -> CanonicalCommand:
    """A recipe's canonical command under a host's policy: its engine's spec, its environment, its devices."""
    engine = engine_kind(recipe.engine.name)
    recipe_environment(recipe, engine.name)
    if recipe.container is not None:
        check_recipe_environment(dict(recipe.container.environment), engine.name)
    command = canonical_command(
        recipe.argv,
        engine.name,
        policy,
        device_count=recipe.hardware_count if check_devices else None,
        resolve_links=resolve_links,
    )
    if command.model is None and engine.loads_model_id:
        # its adapter hands the engine the recipe's model_id to load when the command names no model
        check_model_id(recipe.model_id, policy.judgement(resolve_links=resolve_links))
    return command


def submit_policy(recipe: Recipe) -> EnginePolicy:
    """What some host may allow, since a host's own policy is not known at submit: remote code for the recipe's
    own model only, local media, code-loading options. The worker judges again with its real policy."""
    return EnginePolicy(
        allow_trust_remote_code_models=frozenset({f"{recipe.model_id}@{ANY_COMMIT}"}),
        allow_local_media=True,
        allowed_risky_flags=code_loading_options(engine_kind(recipe.engine.name).spec()),
    )


def code_loading_options(spec: ArgSpec) -> frozenset[str]:
    """The options of an engine's spec that load code (kind CODE): refused unless a host allows them."""
    return frozenset(option.name for option in spec.options if option.kind is ValueKind.CODE)
