"""The LocalMaxxing run page (its text as the site shows it), read into a Recipe."""

from __future__ import annotations

from farm import hardware
from farm.errors import RecipeError
from farm.recipes.fields import (
    build,
    check_launch,
    cross_check,
    max_model_len,
    model_from_argv,
    observed_tokens,
    parallel_sizes,
    read_recipe_id,
    sha256_text,
)
from farm.recipes.model import (
    KNOWN_ENGINES,
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


def parse_localmaxxing_page(text: str, source: str, *, content_sha256: str | None = None) -> Recipe:
    """Parse a LocalMaxxing run page saved as text.

    The page is an id line, then headers each followed by a blank line and a value: `localmaxxing · notes`,
    `localmaxxing · tokenized · arguments` (a comma-and-space separated token list), `provenance` /
    `captured at`, ... The hardware id comes from the hardware label through the catalogue; the device count
    from the argv's parallel sizes; the engine from the argv's executable.
    """
    recipe_id, sections = _page_sections(text, source)
    label_field = "localmaxxing.hardware_label"
    label = sections.get(label_field)
    if not label:
        raise RecipeError("missing: the page names no hardware", source=source, field=label_field)
    hardware_id = hardware.id_for_label(label)
    if hardware_id is None:
        raise RecipeError(f"no hardware in the catalogue matches {label!r}", source=source, field=label_field)

    argv_field = "localmaxxing.tokenized.arguments"
    observed_field = "localmaxxing.observed_command"
    observed = observed_tokens(sections.get(observed_field), source, observed_field)
    listed = sections.get(argv_field)
    if listed:
        if observed is not None and ", ".join(observed) == listed:
            # The list's separator also occurs inside tokens; the observed command settles where tokens end.
            argv = observed
        else:
            argv = split_token_list(listed)
            if observed is not None:
                cross_check(argv, argv_field, observed, observed_field, source)
    elif observed is not None:
        argv_field, argv = observed_field, observed
    else:
        raise RecipeError(
            f"missing: the page has neither tokenized arguments nor an observed command ({observed_field})",
            source=source,
            field=argv_field,
        )
    if not argv:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=argv_field)
    if argv[0] not in KNOWN_ENGINES:
        raise RecipeError(
            f"executable {argv[0]!r} is not a known engine (known: {', '.join(sorted(KNOWN_ENGINES))})",
            source=source,
            field=argv_field,
        )
    engine = Engine(name=argv[0])
    check_launch(argv, engine.name, source, argv_field)
    model_id = model_from_argv(argv, source, argv_field)
    sizes = parallel_sizes(argv, source=source, field=argv_field)
    captured_at = sections.get("provenance.captured_at")
    return build(
        source,
        id=recipe_id,
        model_id=model_id,
        hardware_id=hardware_id,
        hardware_count=sizes["tensor"] * sizes["pipeline"] * sizes["data"],
        engine=engine,
        argv=tuple(argv),
        serving={
            "tensor_parallel": sizes["tensor"],
            "max_context_tokens": max_model_len(argv),
        },
        notes=sections.get("localmaxxing.notes"),
        provenance={
            "source_format": PAGE_FORMAT,
            "captured_at": captured_at,
            "sources": [{"kind": PAGE_FORMAT, "captured_at": captured_at}],
            "run_id": sections.get("localmaxxing.run_id"),
            "argv_fidelity": sections.get("localmaxxing.tokenized.fidelity"),
            "content_sha256": content_sha256 or sha256_text(text),
        },
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
