"""MLX (mlx-lm): its line of the table (`ENGINE`), its argument spec per release (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineKind
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _mlx_repository(repository: str) -> bool:
    """A repository of an MLX conversion: mlx-community's, or one whose name says `mlx` as a word."""
    owner, _, name = repository.lower().partition("/")
    return owner == "mlx-community" or "mlx" in name.replace("_", "-").split("-")


def _spec() -> ArgSpec:
    from farm.engines.mlx.spec import MLX

    return MLX


def _spec_0_28() -> ArgSpec:
    from farm.engines.mlx.spec import MLX_0_28

    return MLX_0_28


ENGINE = EngineKind(
    name="mlx",
    spec=_spec,
    spec_source="ml-explore/mlx-lm mlx_lm/server.py (0.32.2, from its wheel; 0.28)",
    spec_versions={"0.28": _spec_0_28, "0.32.2": _spec},
    default_version="0.32.2",
    launcher=("mlx_lm.server",),
    launcher_spellings=(("mlx_lm", "server"),),
    aliases=("mlx-lm", "mlx_lm"),
    python_modules=("mlx_lm.server",),
    model_flags=("--model",),
    context_flags=("--max-kv-size",),
    artifact="mlx",
    artifact_repository=_mlx_repository,
    adapter="farm.engines.mlx.adapter",
    loads_model_id=True,
    demo=EngineDemo(
        spec="demo-mlx.toml",
        profile="demo-mlx.toml",
        what="simulated: the simulator standing in for MLX behind its adapter",
    ),
    read_version=version_reader(command=("--version",), package="mlx-lm", modules=("mlx_lm.server",)),
    # MLX's attention is always its fused kernel, and every layer runs on the (unified-memory) GPU
    inherent_flags={
        "flashAttn": lambda value: value is True,
        "gpuLayers": lambda value: isinstance(value, int) and value >= 99,
    },
    other_servers={
        r"\bomlx\b": "oMLX, a server of its own on MLX with its own scheduler, caches and API, not mlx_lm.server",
    },
)
