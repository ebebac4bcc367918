"""Trust is (repository, revision): which code a host runs when a recipe turns on remote code.

A host's trust list (`engine.policy.allow_trust_remote_code_models` in its profile) names each repository with the
revision it trusts: `org/model@<40-hex commit>`, or `org/model@<name>` for a tag the host's operator has checked.
A bare `org/model` is refused when the profile is read. It cannot mean "any revision" (a branch moves), nor "any
full commit": a hub serves every commit of a repository by its hash, the commits of its pull requests included,
and anyone may open a pull request on a public repository, so "any commit of a trusted repository" would trust
whoever opened one. The shipped profiles trust nothing, so this reading costs them nothing.

When remote code is trusted, every repository the engine loads must be pinned by the command (`--revision`,
`--code-revision`, `--tokenizer-revision`, SGLang's `--speculative-draft-model-revision`, a `revision` key beside a
`model` inside a JSON config) to a revision the list names for it. A pull-request ref (`refs/pr/N`, or any
`refs/...`) is refused in every revision, trusted or not: it holds whatever its opener pushed last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from farm.errors import ArgumentPolicyError

COMMIT = re.compile(r"^[0-9a-f]{40}$")
"""A full commit hash: the only revision that cannot move."""
_NAME = re.compile(r"^[A-Za-z0-9][\w.+-]*$")
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

ANY_COMMIT = "*commit*"
"""At submit, where no host's list is known: a repository pinned to any full commit may pass (the worker judges
again with its real list)."""

REVISION_KEY = re.compile(r"(?:^|_)revision$", re.I)
"""JSON keys that carry a revision (`revision`, `code_revision`, `tokenizer_revision`)."""


@dataclass(frozen=True)
class TrustEntry:
    repository: str
    revision: str


def parse_entry(entry: str) -> TrustEntry:
    """One trust-list entry, `org/model@revision`; ValueError naming what is wrong."""
    repository, at, revision = entry.strip().partition("@")
    if not at:
        raise ValueError(
            f"{entry!r}: name the revision this host trusts, as {entry}@<40-hex commit>: a bare repository would "
            "trust any commit of it, a pull request's included"
        )
    if not _REPO.match(repository):
        raise ValueError(f"{entry!r}: expected a repository id org/name before '@'")
    if is_pull_request(revision):
        raise ValueError(f"{entry!r}: a pull-request ref holds whatever its opener pushed; name a commit")
    if not COMMIT.match(revision) and not _NAME.match(revision):
        raise ValueError(f"{entry!r}: expected a full 40-hex commit (or a tag name) after '@'")
    return TrustEntry(repository, revision)


def parse_trust_list(entries: Iterable[str]) -> frozenset[str]:
    """The list as `repository@revision` strings, each entry checked."""
    return frozenset(f"{e.repository}@{e.revision}" for e in map(parse_entry, entries))


def is_pull_request(revision: str) -> bool:
    return revision.startswith("refs/") or bool(re.match(r"^(?:pr|pull)/\d+$", revision, re.I))


def refuse_pull_request(where: str, revision: str) -> None:
    if is_pull_request(revision):
        raise ArgumentPolicyError(
            f"{where} {revision!r}: a pull-request ref holds whatever its opener pushed last; pin a commit",
            field="argv",
        )


@dataclass(frozen=True)
class Loaded:
    """A repository the engine loads, and the revisions that pin it (None where the command names none)."""

    where: str
    repository: str
    revisions: tuple[tuple[str, str | None], ...]
    """(the option or key that carries it, its value): the first one is the one that must be given."""


def check_pinned(loaded: Iterable[Loaded], trusted: frozenset[str]) -> None:
    """Remote code is trusted: each loaded repository must be pinned to a revision the list names for it."""
    listed = ", ".join(sorted(t.replace(ANY_COMMIT, "<any full commit>") for t in trusted)) or "no repository"
    for item in loaded:
        if not _REPO.match(item.repository.partition(":")[0]):
            raise ArgumentPolicyError(
                f"{item.where} {item.repository!r}: remote code is trusted, and this is no repository a revision "
                "pins (a local path or a bare name): the engine would run whatever code it holds",
                field="argv",
            )
        if not item.revisions:
            raise ArgumentPolicyError(
                f"{item.where} {item.repository!r}: remote code is trusted, and nothing on the command pins this "
                "repository's revision: the engine would load whatever it holds now",
                field="argv",
            )
        first_option, first = item.revisions[0]
        if first is None:
            raise ArgumentPolicyError(
                f"{item.where} {item.repository!r}: remote code is trusted: pin the repository with {first_option} "
                f"<40-hex commit> on this host's trust list ({listed})",
                field="argv",
            )
        for option, revision in item.revisions:
            if revision is None:
                continue
            if f"{item.repository}@{revision}" in trusted:
                continue
            if COMMIT.match(revision) and f"{item.repository}@{ANY_COMMIT}" in trusted:
                continue
            raise ArgumentPolicyError(
                f"{item.where} {item.repository}@{revision} ({option}): remote code is trusted, and this host trusts "
                f"only {listed}: every repository the engine loads must be pinned to a revision its trust list "
                "names (a branch moves, a pull request holds whoever opened it)",
                field="argv",
            )


def json_loaded(name: str, value: Any, repo_key: re.Pattern[str], path: str = "") -> Iterator[Loaded]:
    """Repositories named inside a JSON value (`{"model": "org/draft", "revision": "..."}`), each with the
    revision keys beside it in the same object."""
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(item, str) and repo_key.match(str(key)):
                prefix = "tokenizer_" if str(key).endswith("tokenizer") else ""
                keys = (f"{prefix}revision", "code_revision") if not prefix else ("tokenizer_revision", "revision")
                pins = tuple((k, _str(value.get(k))) for k in keys if k in value or k == keys[0])
                yield Loaded(f"{name} {sub}", item, pins)
            else:
                yield from json_loaded(name, item, repo_key, sub)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_loaded(name, item, repo_key, f"{path}[{index}]")


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def option_revisions(names: tuple[str, ...], values: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    """The revision options that pin one repository, with the command's values (the first always listed)."""
    return tuple((n, values.get(n)) for i, n in enumerate(names) if i == 0 or values.get(n) is not None)
