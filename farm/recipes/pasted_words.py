"""Words of a pasted command that the engine's own parser would read wrongly, read as the person who pasted it meant
them: an unquoted path with a space, split in two (rule "a path split at a space"), and a one-word remark after a
complete command (`(edited)`). Each rule asks the engine's argument spec (its table line's `spec`) what
an option takes, and changes only what that spec says is a stray word; what comes out is still parsed and judged
as any command (farm.engines.argspec, farm.engines.judge)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from farm.engines.registry import engine_kind
from farm.errors import ArgumentPolicyError

_PATH_START = re.compile(r"^(?:/|~/|\.{1,2}/|[A-Za-z]:[\\/])")
"""How a value that names a file or directory begins (absolute, home, relative, a Windows drive)."""
_FILE_TYPE = re.compile(
    r"\.(?:gguf|safetensors|bin|pt|pth|jinja2?|json|ya?ml|gbnf|txt|model|mlmodel|onnx)$", re.IGNORECASE
)
"""The endings of the files path options take (a model, a template, a grammar, a config)."""
_NOT_A_PATH_PIECE = re.compile(r"[\"'`$;|&<>(){}\[\]*?]|^=")
_PATH_KINDS = frozenset({"repo", "path", "template"})
"""Option kinds (farm.engines.argspec.ValueKind) whose value is a file or a directory."""


def _last_part(path: str) -> str:
    return re.split(r"[\\/]", path)[-1]


def _joined_path(value: str, run: Sequence[str], kind: str) -> str | None:
    """`value` and the words after it read as one path split at its spaces, when that is what the option takes:
    `value` begins like a path and its last part is not yet a file (`/Volumes/Extreme`), and the joined path ends
    like a file the option takes (`... Pro/models/Qwen3-8B-Q4_K_M.gguf`) or, for a directory option, the words go
    on with a path separator (`Models/Qwen3-8B`). Otherwise None: the words stay, for the judge to refuse."""
    if not run or not _PATH_START.match(value) or _FILE_TYPE.search(_last_part(value)):
        return None
    if any(_NOT_A_PATH_PIECE.search(word) or is_option_like(word) for word in run):
        return None
    joined = " ".join([value, *run])
    if _FILE_TYPE.search(_last_part(joined)):
        return joined
    if kind != "template" and all(re.search(r"[\\/]", word) for word in run[-1:]):
        return joined
    return None


def rejoin_split_paths(engine: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Rule "a path split at a space": an unquoted path with a space (`-m /Volumes/Extreme Pro/m.gguf`) reaches the
    recipe as two words, and the engine would read the second as a stray argument. Where an option that takes a
    file or directory (the engine's spec says which) is followed by words up to the next option, and they join into
    the path the option takes (_joined_path), they are one value again, with a note. `args` are the arguments after
    the launcher; anything else is returned as given."""
    try:
        spec = engine_kind(engine).spec()
    except ArgumentPolicyError:  # an engine without a shipped spec: read as written
        return list(args), []
    out: list[str] = []
    notes: list[str] = []
    index = 0
    first = True
    while index < len(args):
        token = args[index]
        value_at: int | None = None
        kind = ""
        if is_option_like(token):
            name, equals, _ = token.partition("=")
            if spec.underscores and name.startswith("--"):
                name = "--" + name[2:].replace("_", "-")
            option = spec.lookup(name)
            if option is not None and option.kind.value in _PATH_KINDS and option.nargs is None:
                kind = option.kind.value
                value_at = index if equals else index + 1
        elif first and spec.positional_model:
            value_at, kind = index, "repo"
        first = False
        if value_at is None or value_at >= len(args):
            out.append(token)
            index += 1
            continue
        end = value_at + 1
        while end < len(args) and not is_option_like(args[end]):
            end += 1
        value = args[value_at].partition("=")[2] if value_at == index and is_option_like(token) else args[value_at]
        joined = _joined_path(value, args[value_at + 1 : end], kind)
        if joined is None:
            out.extend(args[index : value_at + 1])
            index = value_at + 1
            continue
        if value_at == index and is_option_like(token):
            out.append(f"{token.partition('=')[0]}={joined}")
        else:
            out.extend([*args[index:value_at], joined])
        notes.append(
            f"a path split at its spaces ({' '.join(args[value_at:end])[:200]!r}) is read as the one path the "
            f"{'model' if value_at == index and not is_option_like(token) else token.partition('=')[0]} value "
            "takes (an unquoted path with a space)"
        )
        index = end
    return out, notes


_REMARK_WORD = re.compile(r"^(?:\([A-Za-z][\w.'!-]*\)|\[[A-Za-z][\w.'!-]*\])$")


def one_word_remark(engine: str, args: Sequence[str]) -> str | None:
    """A last word such as `(edited)` or `[fixed]` after a complete command, where the engine's parser would find
    it a stray value (it follows a switch or an option's value, not an option that takes a value): chat text, cut.
    A bracketed word an option takes (`--x [gpu]`) stays."""
    if not args or not _REMARK_WORD.match(args[-1]):
        return None
    try:
        spec = engine_kind(engine).spec()
    except ArgumentPolicyError:
        return None
    index = 0
    open_list = False
    while index < len(args) - 1:
        token = args[index]
        index += 1
        if not is_option_like(token):
            continue
        name, equals, _ = token.partition("=")
        if spec.underscores and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        option = spec.lookup(name)
        if option is None:
            return None  # the judge decides what an unknown option takes
        open_list = option.takes_value and not equals and option.nargs not in (None, 1)
        if option.takes_value and not equals and not open_list:
            index += 1
    if open_list or index != len(args) - 1 or len(args) == 1:
        return None  # the word may be a value of the list option before it, or the positional model
    return args[-1]


def is_option_like(token: str) -> bool:
    """Whether a word is an option (`-m`, `--ctx-size=8192`) rather than a value (`-1` is a value)."""
    return token.startswith("-") and len(token) > 1 and not _NUMBER_WORD.match(token)


_NUMBER_WORD = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
