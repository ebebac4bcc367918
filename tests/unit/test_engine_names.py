"""Each engine is named in its own folder (`farm/engines/<engine>/`), the simulator (`farm/sim/`) and at most two
other files of `farm`: the table that imports every engine's line, and the worker profile's schema. Every other
room asks the table (farm.engines.registry).

A name is any of the engine's names, aliases, `python -m` modules and launchers (its executable alone too, unless
that is an interpreter) in code: a string (not a docstring), an imported module, a name or an attribute, matched
as a whole word, regardless of case. vLLM's counter names (`vllm:prompt_tokens`) are the farm's own vocabulary
of counters (stored with every result), not a mention of vLLM: a string that is exactly one of them is not
counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import farm
from farm.bench import metrics
from farm.engines.base import EngineKind
from farm.engines.registry import ENGINES

ROOT = Path(farm.__file__).resolve().parent
"""The package's directory."""

ALLOWED: dict[str, str] = {
    "farm/engines/registry.py": "the table: it imports each engine's line from its folder",
    "farm/worker/profile.py": "the worker profile's TOML schema: a typed `[engine.<name>]` section per engine with "
    "its default executable, the `engine.kind` choices, and the keys of the spec lists generated on a host",
}
"""The files outside the engines' folders and the simulator that may name an engine, each with why."""

RECIPES = "farm/recipes/"
"""The recipes room, checked on its own below (it names no engine either)."""

INTERPRETERS = frozenset({"python", "python3"})

FARM_COUNTERS = frozenset(
    {
        *metrics.TOKEN_COUNTERS,
        *metrics.PREFIX_CACHE_COUNTERS,
        metrics.SPEC_DRAFTS,
        metrics.SPEC_DRAFT_TOKENS,
        metrics.SPEC_ACCEPTED_TOKENS,
    }
)
"""The farm's counter names (vLLM's spelling, the farm's vocabulary)."""


def engine_words(kind: EngineKind) -> tuple[str, ...]:
    """Every spelling that names the engine."""
    words = {kind.name, *kind.aliases, *kind.python_modules, " ".join(kind.launcher)}
    if kind.launcher[0] not in INTERPRETERS:
        words.add(kind.launcher[0])
    return tuple(sorted(words))


def code_texts(source: str) -> list[tuple[int, str]]:
    """The texts of a module's code that could name an engine, with their lines: strings that are not docstrings
    (f-string parts included), imported modules, names and attributes."""
    tree = ast.parse(source)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    texts: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value not in FARM_COUNTERS:
                texts.append((node.lineno, node.value))
        elif isinstance(node, ast.ImportFrom):
            texts += [(node.lineno, f"{node.module or ''}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            texts += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Name):
            texts.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            texts.append((node.lineno, node.attr))
    return texts


def naming(words: tuple[str, ...], source: str) -> list[tuple[int, str]]:
    """Where `source` names one of `words` in code: (line, text)."""
    patterns = [re.compile(r"(?<![A-Za-z0-9_-])" + re.escape(w) + r"(?![A-Za-z0-9_-])", re.IGNORECASE) for w in words]
    return [(line, text) for line, text in code_texts(source) if any(p.search(text) for p in patterns)]


def files_naming(kind: EngineKind) -> dict[str, list[tuple[int, str]]]:
    """The files of farm outside the engine's folder and the simulator that name the engine, with where."""
    folder = (ROOT / "engines" / (kind.adapter or "").split(".")[2]) if kind.adapter else None
    words = engine_words(kind)
    found: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if (folder is not None and folder in path.parents) or ROOT / "sim" in path.parents:
            continue
        hits = naming(words, path.read_text(encoding="utf-8"))
        if hits:
            found[path.relative_to(ROOT.parent).as_posix()] = hits
    return found


def test_the_scan_sees_a_name_in_code_and_not_in_prose() -> None:
    """The scan finds an engine in a string, an import and an f-string, skips a docstring and the farm's counter
    names, and matches whole words only (so the test below can fail)."""
    words = engine_words(ENGINES["llama.cpp"])
    source = (
        '"""llama.cpp in a docstring."""\n'
        'import farm.engines.llamacpp.adapter\nX = "llama-server"\nY = f"{X} then llama.cpp"\nZ = "llama-servers"\n'
    )
    assert [line for line, _ in naming(words, source)] == [2, 3, 4]
    assert naming(engine_words(ENGINES["vllm"]), 'A = "vllm:prompt_tokens"\nB = "vllm"\n') == [(2, "vllm")]
    assert "farm/engines/registry.py" in files_naming(ENGINES["mlx"])


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_each_engine_is_named_in_at_most_two_files(name: str) -> None:
    """Outside its folder, the simulator and the recipes room (checked below), an engine is named only in the
    allowed files, at most two."""
    found = {path: hits for path, hits in files_naming(ENGINES[name]).items() if not path.startswith(RECIPES)}
    unexpected = {path: hits[:3] for path, hits in found.items() if path not in ALLOWED}
    assert not unexpected, f"{name} is named outside its folder in {unexpected}"
    assert len(found) <= 2


def test_the_recipes_room_names_no_engine() -> None:
    """The recipes room asks the table too: farm/recipes/ names no engine."""
    named = {
        name: sorted(path for path in files_naming(kind) if path.startswith(RECIPES)) for name, kind in ENGINES.items()
    }
    assert not any(named.values()), named


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_the_images_the_recipes_room_knows_are_the_ones_the_container_judge_allows(name: str) -> None:
    """An engine's line says its images twice, for two rooms: `official_images` (patterns the recipes room
    recognises an image's engine by) and `images` (the repositories and tag prefix the container judge allows).
    Every pattern must match one of the allowed repositories, so the two cannot drift apart."""
    kind = ENGINES[name]
    if not kind.official_images:
        return
    assert kind.images is not None, f"{name} recognises images the container judge does not know"
    suffix = f":{kind.images.tag_prefix}" if kind.images.tag_prefix else ""
    references = [f"{repository}{suffix}" for repository in kind.images.repositories]
    for pattern in kind.official_images:
        assert any(re.search(pattern, reference) for reference in references), (pattern, references)
