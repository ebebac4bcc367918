"""What `farm submit` and `farm recipe check` ask of a recipe before anything is stored: that its command and
container launch pass the policy some host may have, and that some worker of the farm runs its engine.

Apart from farm.engines.policy because it judges container launches too (farm.engines.container, which judges
with the policy's own checks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from farm.engines.argspec import CanonicalCommand
from farm.engines.base import version_key
from farm.engines.container import check_container_launch, container_path_roots
from farm.engines.policy import EnginePolicy, recipe_command, submit_policy
from farm.engines.registry import engine_kind, launchable_engines
from farm.errors import ArgumentPolicyError

if TYPE_CHECKING:
    from farm.recipes.model import Recipe


@dataclass(frozen=True)
class SubmitJudgement:
    """What submit's judge said of a recipe's command, against each engine version the farm's workers run."""

    command: CanonicalCommand
    """The command as the first accepting version's spec parsed it."""
    judged_against: tuple[str, ...]
    """The specs that accepted it (`<engine> <spec version>`), oldest first."""
    reported: tuple[str, ...] = ()
    """The versions the matching workers reported; empty: none has, and the newest shipped spec judged."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Reported versions whose spec refused the command, each with why (their workers will refuse the job)."""


def check_recipe_for_submit(recipe: Recipe, *, versions: Sequence[str] = ()) -> CanonicalCommand:
    """The check of a recipe's command before anything is stored (`farm submit`, `farm recipe check`): its engine
    has a spec, and its command and container launch pass the policy that some host may have. Whether any worker
    runs the engine is `check_runnable`'s question. `versions`: see `judge_for_submit`."""
    return judge_for_submit(recipe, versions=versions).command


def judge_for_submit(recipe: Recipe, *, versions: Sequence[str] = ()) -> SubmitJudgement:
    """Judge the recipe's command against the spec of each engine version in `versions` (those the workers of its
    engine and hardware run; each the nearest older spec shipped) or, when none is given, the newest shipped
    spec. Refused (ArgumentPolicyError naming every version and why) only when no version accepts it."""
    engine = engine_kind(recipe.engine.name)
    policy = submit_policy(recipe)
    if recipe.container is not None:
        # Some host may run the recipe in its container, where its paths name the container's mounts.
        policy = replace(policy, path_roots=container_path_roots(recipe.container, policy.path_roots))
    reported = tuple(sorted(set(versions), key=lambda v: (version_key(v), v)))
    if not reported:
        return SubmitJudgement(_judged(recipe, policy, engine.name), (f"{engine.name} {engine.spec().version}",))
    accepted: list[tuple[str, CanonicalCommand]] = []
    refused: dict[str, str] = {}
    for version in reported:
        spec, note = engine.spec_at(version)
        try:
            command = _judged(recipe, replace(policy, specs={engine.name: spec}), engine.name)
        except ArgumentPolicyError as exc:
            refused[version] = f"{note}: {exc}"
            continue
        accepted.append((f"{engine.name} {spec.version}", command))
    if not accepted:
        reasons = "; ".join(f"{version} ({why})" for version, why in refused.items())
        raise ArgumentPolicyError(
            f"no {engine.name} version the farm's workers run accepts the command: {reasons}; nothing was queued",
            field="argv",
        )
    judged = tuple(dict.fromkeys(name for name, _ in accepted))
    return SubmitJudgement(accepted[0][1], judged, reported, refused)


def _judged(recipe: Recipe, policy: EnginePolicy, engine: str) -> CanonicalCommand:
    command = recipe_command(recipe, policy)
    if recipe.container is not None:
        check_container_launch(recipe.container, policy, engine=engine, device_count=recipe.hardware_count)
    return command


def check_runnable(recipe: Recipe, *, runnable: Sequence[str] | None = None) -> None:
    """Refuse at submit a job no worker can run, rather than queue it forever.

    `runnable`: the engines the farm's workers can run (default: every engine with a launching adapter). A recipe
    whose hardware id the catalogue lacks is valid (the parser keeps a well-formed id as-is), but no worker
    profile can name that hardware, so its job is refused here too."""
    engine = engine_kind(recipe.engine.name)
    can_run = tuple(runnable) if runnable is not None else launchable_engines()
    if engine.name not in can_run:
        raise ArgumentPolicyError(
            f"the recipe is valid, but no worker of this farm runs {engine.name} "
            f"(the farm's workers run: {', '.join(can_run)}); nothing was queued",
            field="engine.name",
        )
    from farm import hardware

    if not hardware.is_known(recipe.hardware_id):
        raise ArgumentPolicyError(
            f"unknown hardware id {recipe.hardware_id!r}: the recipe is valid, but the id is not in the farm's "
            "catalogue, so no "
            "worker can declare it (a worker profile names catalogued hardware only; `farm catalogue` lists them, "
            "and farm/hardware/catalogue.toml takes more); nothing was queued",
            field="hardware_id",
        )
