"""The registry's "validated" status, computed from its trust rules kept as data (farm/signing/validated.toml):
a digest-pinned image, a full model revision, an acceptance run (a run verified here), no eager mode. Pure: the
rules, a recipe document and a run's provenance and verdict in, each rule's outcome out."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

RULES_FILE = Path(__file__).with_name("validated.toml")


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    fields: tuple[str, ...]
    match: str | None = None
    equals: Any = None
    none_of: tuple[str, ...] = ()

    def holds(self, document: Mapping[str, Any]) -> bool:
        return any(self._passes(_field(document, path)) for path in self.fields)

    def _passes(self, value: Any) -> bool:
        if value is None:
            return False
        if self.match is not None:
            return isinstance(value, str) and re.search(self.match, value) is not None
        if self.none_of:
            if not isinstance(value, list | tuple):
                return False
            names = {str(item).split("=", 1)[0] for item in value}
            return not names & set(self.none_of)
        return bool(value == self.equals)


def _field(document: Mapping[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


@cache
def rules(path: Path = RULES_FILE) -> tuple[Rule, ...]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return tuple(
        Rule(
            name=str(rule["name"]),
            why=str(rule["why"]),
            fields=tuple(rule["fields"]),
            match=rule.get("match"),
            equals=rule.get("equals"),
            none_of=tuple(rule.get("none_of", ())),
        )
        for rule in data["rule"]
    )


def outcomes(
    recipe: Mapping[str, Any], provenance: Mapping[str, Any], verified: bool, found: Sequence[Rule] | None = None
) -> dict[str, bool]:
    """Each rule's name → whether the run meets it."""
    document = {"recipe": dict(recipe), "run": {"provenance": dict(provenance), "verified": verified}}
    return {rule.name: rule.holds(document) for rule in (found if found is not None else rules())}


def validated(recipe: Mapping[str, Any], provenance: Mapping[str, Any], verified: bool) -> bool:
    """Whether the run meets every rule."""
    return all(outcomes(recipe, provenance, verified).values())
