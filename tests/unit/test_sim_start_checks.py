"""The simulator refuses at start what vLLM refuses at start: a recipe's --max-model-len above the model's own
limit, so a recipe can fail the same way on every simulated host (the quarantine tests need one)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from farm.engines.sim.adapter import sim_argv
from farm.recipes.model import Engine, Recipe, RecipeProvenance
from farm.sim.command import app


def _recipe(*options: str) -> Recipe:
    return Recipe(
        id="r",
        model_id="sim/m",
        hardware_id="cpu",
        hardware_count=1,
        engine=Engine(name="vllm"),
        argv=("vllm", "serve", "sim/m", *options),
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((), None),
        (("--max-model-len", "4096"), "4096"),
        (("--max-model-len=8192",), "8192"),
        (("--max_model_len", "16"), "16"),
        (("--max-model-len", "auto"), None),
    ],
)
def test_the_recipes_max_model_len_reaches_the_simulator(options: tuple[str, ...], expected: str | None) -> None:
    """The simulator's command carries the recipe's --max-model-len (a number) and nothing else of its options."""
    argv = sim_argv(_recipe(*options), profile="test", host="127.0.0.1", port=1)
    if expected is None:
        assert "--max-model-len" not in argv
    else:
        assert argv[argv.index("--max-model-len") + 1] == expected


def test_a_max_model_len_beyond_the_model_exits_at_start_as_vllm_does() -> None:
    """Above max_position_embeddings the simulator exits 1 with vLLM's message before it listens."""
    result = CliRunner().invoke(
        app, ["serve", "--set", "max_position_embeddings=1024", "--max-model-len", "2048", "--port", "1"]
    )
    assert result.exit_code == 1
    assert "User-specified max_model_len (2048) is greater than the derived max_model_len" in result.stderr
