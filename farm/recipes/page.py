"""The LocalMaxxing run page (its text as the site shows it), read into a Recipe."""

from __future__ import annotations

import re

from farm import hardware
from farm.errors import RecipeError
from farm.recipes.commands import ENGINE_ALIASES, is_placeholder, json_damage, model_in_argv, read_command
from farm.recipes.fields import (
    build,
    check_launch,
    cross_check,
    max_model_len,
    observed_tokens,
    parallel_sizes,
    read_recipe_id,
    sha256_text,
)
from farm.recipes.model import (
    Engine,
    Recipe,
)

PAGE_FORMAT = "localmaxxing-page"
"""RecipeProvenance.source_format of a recipe read from a LocalMaxxing run page."""

PAGE_PREFIX = "localmaxxing · "
_PAGE_SEPARATOR = " · "
_PAGE_GROUPS = frozenset({"facts", "metadata", "provenance"})
"""Page headers that only open a group; the fields below them follow."""
_PAGE_FIELDS = frozenset({"captured at"})
"""Page headers outside the localmaxxing namespace that carry a value (under the group that precedes them)."""


# --- the LocalMaxxing run page --------------------------------------------------------------------


PAGE_REQUIRED = (
    "localmaxxing.hardware_label",
    "localmaxxing.run_id",
    "localmaxxing.tokenized.fidelity",
    "provenance.captured_at",
)
"""Sections every LocalMaxxing run page has. A page cut part-way loses the last of them (or cuts its value)."""

_RUN_ID = re.compile(r"^c[a-z0-9]{20,31}$")
"""LocalMaxxing run ids are cuids: `c` and 24 lowercase letters or digits (cmsb828qn0061qd01l1fsm6pa)."""
_CAPTURED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_ID_SUFFIX = re.compile(r"-(?P<engine>[a-z0-9.]+(?:-cpp)?)-tp(?P<tp>\d+)$")
_FIDELITIES = frozenset({"faithful", "reconstructed", "partial", "lossy"})


def parse_localmaxxing_page(text: str, source: str, *, content_sha256: str | None = None) -> Recipe:
    """Parse a LocalMaxxing run page saved as text.

    The page is an id line, then headers each followed by a blank line and a value: `localmaxxing · notes`,
    `localmaxxing · tokenized · arguments` (a comma-and-space separated token list), `provenance` /
    `captured at`, ... The hardware id comes from the hardware label through the catalogue; the device count
    from the argv's parallel sizes; the engine from the argv's executable.

    A page must be whole: the sections in PAGE_REQUIRED are present, the capture time is a full timestamp, the
    run id a whole run id, and the sections agree with each other (the observed command with the token list,
    the id's `-<engine>-tp<N>` ending with the command), so a page cut part-way is refused, not read as a
    shorter recipe.
    """
    if "\0" in text:
        raise RecipeError("binary text (NUL character): a page is UTF-8 text", source=source)
    recipe_id, sections = _page_sections(text, source)
    for required in PAGE_REQUIRED:
        if not sections.get(required):
            raise RecipeError(
                "missing: a whole LocalMaxxing page has this section (is the page cut short?)",
                source=source,
                field=required,
            )
    label_field = "localmaxxing.hardware_label"
    label = sections[label_field]
    hardware_id = hardware.id_for_label(label)
    if hardware_id is None:
        raise RecipeError(f"no hardware in the catalogue matches {label!r}", source=source, field=label_field)
    run_id = sections["localmaxxing.run_id"]
    if not _RUN_ID.match(run_id):
        raise RecipeError(f"not a LocalMaxxing run id: {run_id!r}", source=source, field="localmaxxing.run_id")
    captured_at = sections["provenance.captured_at"]
    if not _CAPTURED_AT.match(captured_at):
        raise RecipeError(
            f"not a whole timestamp (YYYY-MM-DDTHH:MM:SSZ): {captured_at!r}",
            source=source,
            field="provenance.captured_at",
        )
    fidelity = sections["localmaxxing.tokenized.fidelity"]
    if fidelity not in _FIDELITIES:
        raise RecipeError(
            f"unknown fidelity {fidelity!r} (known: {', '.join(sorted(_FIDELITIES))})",
            source=source,
            field="localmaxxing.tokenized.fidelity",
        )

    argv_field = "localmaxxing.tokenized.arguments"
    observed_field = "localmaxxing.observed_command"
    raw_observed = sections.get(observed_field)
    observed = None
    if raw_observed is not None and not is_placeholder(raw_observed):
        observed = observed_tokens(raw_observed, source, observed_field)
    listed = sections.get(argv_field)
    if listed:
        if observed is not None and ", ".join(observed) == listed:
            # The list's separator also occurs inside tokens; the observed command settles where tokens end.
            tokens = observed
        else:
            tokens = split_token_list(listed)
            if observed is not None:
                cross_check(tokens, argv_field, observed, observed_field, source)
    elif observed is not None:
        argv_field, tokens = observed_field, observed
    else:
        raise RecipeError(
            f"missing: the page has neither tokenized arguments nor an observed command ({observed_field})",
            source=source,
            field=argv_field,
        )
    if not tokens:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=argv_field)
    command = read_command(tokens, source, argv_field, declared_engine=None)
    engine = Engine(name=command.engine)
    argv = list(command.argv)
    check_launch(argv, engine.name, source, argv_field)
    damaged = json_damage(argv)
    if damaged:
        raise RecipeError(
            f"token {damaged[0]} ({argv[damaged[0]][:80]!r}) looks like JSON but is not valid JSON",
            source=source,
            field=argv_field,
        )
    model_id = model_in_argv(engine.name, argv)
    if model_id is None:
        raise RecipeError("names no model", source=source, field=argv_field)
    sizes = parallel_sizes(argv, source=source, field=argv_field, engine=engine.name)
    _check_id_agrees(recipe_id, engine.name, sizes["tensor"], source)
    return build(
        source,
        id=recipe_id,
        model_id=model_id,
        hardware_id=hardware_id,
        hardware_count=sizes["tensor"] * sizes["pipeline"] * sizes["data"],
        engine=engine,
        argv=tuple(argv),
        environment=command.environment,
        serving={
            "tensor_parallel": sizes["tensor"],
            "max_context_tokens": max_model_len(argv, engine.name),
        },
        notes=sections.get("localmaxxing.notes"),
        provenance={
            "source_format": PAGE_FORMAT,
            "captured_at": captured_at,
            "sources": [{"kind": PAGE_FORMAT, "captured_at": captured_at}],
            "run_id": run_id,
            "argv_fidelity": fidelity,
            "command_source": argv_field,
            "source_command": tuple(tokens),
            "model_source": "argv",
            "content_sha256": content_sha256 or sha256_text(text),
        },
    )


def _check_id_agrees(recipe_id: str, engine: str, tensor: int, source: str) -> None:
    """An id ending `-<engine>-tp<N>` (as LocalMaxxing names runs) must match the command's engine and TP."""
    match = _ID_SUFFIX.search(recipe_id)
    if match is None:
        return
    named = ENGINE_ALIASES.get(match["engine"])
    if named is not None and named != engine:
        raise RecipeError(f"says {match['engine']!r}, but the command runs {engine}", source=source, field="id")
    if named is not None and int(match["tp"]) != tensor:
        raise RecipeError(
            f"says tensor parallel {match['tp']}, but the command has {tensor}", source=source, field="id"
        )


def _page_sections(text: str, source: str) -> tuple[str, dict[str, str]]:
    """The page's id line and its values keyed by dotted field (`localmaxxing.hardware_label`,
    `provenance.captured_at`)."""
    lines = [line.strip() for line in text.splitlines()]
    nonblank = [line for line in lines if line]
    if not nonblank or _page_header(nonblank[0]):
        raise RecipeError("missing: the page does not start with the run's id line", source=source, field="id")
    recipe_id = read_recipe_id(nonblank[0], source, "id")

    sections: dict[str, str] = {}
    group: str | None = None
    key: str | None = None
    body: list[str] = []

    def close() -> None:
        if key is not None:
            value = "\n".join(body).strip()
            if value:
                if key in sections:
                    raise RecipeError("appears twice on the page", source=source, field=key)
                sections[key] = value

    for line in lines[lines.index(nonblank[0]) + 1 :]:
        header = _page_header(line)
        if header is None:
            body.append(line)
            continue
        close()
        body = []
        if header in _PAGE_GROUPS:
            group, key = header, None
        elif header.startswith("localmaxxing."):
            key = header
        else:
            key = f"{group}.{header}" if group else header
    close()
    return recipe_id, sections


def _page_header(line: str) -> str | None:
    """The dotted field a header line opens, or None for a value line."""
    if line.startswith(PAGE_PREFIX):
        parts = line.split(_PAGE_SEPARATOR)
        return ".".join(part.strip().replace(" ", "_") for part in parts)
    if line in _PAGE_GROUPS:
        return line
    if line in _PAGE_FIELDS:
        return line.replace(" ", "_")
    return None


def split_token_list(listed: str) -> list[str]:
    """Split a page's comma-and-space separated token list, keeping JSON values (which may hold `, `) whole.

    The split is a best effort (a plain token may hold `, ` too); the observed command is the cross-check."""
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    in_string = False
    escaped = False
    index = 0
    while index < len(listed):
        char = listed[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif depth > 0 and char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(depth - 1, 0)
        elif depth == 0 and listed.startswith(", ", index):
            tokens.append("".join(current))
            current = []
            index += 2
            continue
        current.append(char)
        index += 1
    tokens.append("".join(current))
    return [token.strip() for token in tokens]
