"""farm/recipes reads what it knows of each engine from the table (issue 21): its server's spellings, the tools of
its project that serve nothing, the registry's engine flags and its official images come from the engine's own
line (farm/engines/<engine>/__init__.py), so that a spelling added there is read here with no other change."""

from __future__ import annotations

import pytest

from farm.engines.registry import ENGINES
from farm.errors import RecipeError
from farm.recipes.commands import ENGINE_FLAG_OPTIONS, image_engine, read_command, starts_a_server

SPELLINGS = [
    (kind.name, spelling)
    for kind in ENGINES.values()
    for spelling in (kind.launcher, *kind.launcher_spellings)
    if spelling[0] != "python" or spelling[1] == "-m"
]


@pytest.mark.parametrize(("engine", "spelling"), SPELLINGS)
def test_every_spelling_in_the_table_starts_its_engines_server(engine: str, spelling: tuple[str, ...]) -> None:
    """Each launcher and launcher spelling of each engine's line is read as that engine's server."""
    tokens = [*spelling, "--model", "org/model"]
    if ENGINES[engine].positional_model:
        tokens = [*spelling, "org/model"]
    assert starts_a_server(tokens)
    assert read_command(tokens, "table.json", "argv", declared_engine=None).engine == engine


@pytest.mark.parametrize(
    ("name", "what"), [(name, what) for kind in ENGINES.values() for name, what in kind.not_servers.items()]
)
def test_a_tool_that_serves_nothing_is_refused_with_what_it_is(name: str, what: str) -> None:
    """The table's `not_servers` (llama-bench, llama-cli, ...) are refused naming what each is."""
    with pytest.raises(RecipeError, match=f"is {what}, not a server"):
        read_command([f"/opt/bin/{name}", "-m", "m.gguf"], "table.json", "argv", declared_engine=None)


def test_registry_flags_and_images_come_from_the_table() -> None:
    """The registry's engine flags and the official images are each engine's own line, nothing more."""
    assert {k.name: dict(k.registry_flags) for k in ENGINES.values() if k.registry_flags} == ENGINE_FLAG_OPTIONS
    assert image_engine("lmsysorg/sglang:v0.5.2") == "sglang"
    assert image_engine("vllm/vllm-openai@sha256:" + "0" * 64) == "vllm"
    assert image_engine("ghcr.io/ggml-org/llama.cpp:server-cuda") == "llama.cpp"
    assert image_engine("example/vllm-openai:latest") is None


@pytest.mark.parametrize(
    ("engine", "tool", "role"),
    [(kind.name, tool, role) for kind in ENGINES.values() for tool, role in kind.tools.items()],
)
def test_every_tool_the_table_reads_is_translated_by_the_engines_adapter(engine: str, tool: str, role: str) -> None:
    """A tool in an engine's `tools` is one of its `not_servers`, read as a benchmark or a client, and its adapter
    rewrites a run of it as the server's command (`tool_to_server`)."""
    import importlib

    kind = ENGINES[engine]
    assert tool in kind.not_servers
    assert role in ("benchmark", "client")
    assert kind.adapter is not None
    server, _, _ = importlib.import_module(kind.adapter).tool_to_server([tool, "-m", "/models/m.gguf"])
    assert tuple(server[: len(kind.launcher)]) == kind.launcher
