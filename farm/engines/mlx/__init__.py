"""MLX (mlx-lm): its line of the table (`ENGINE`), its argument spec (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineKind

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.mlx.spec import MLX

    return MLX


ENGINE = EngineKind(
    name="mlx",
    spec=_spec,
    spec_source="ml-explore/mlx-lm mlx_lm/server.py",
    launcher=("mlx_lm.server",),
    aliases=("mlx-lm", "mlx_lm"),
    python_modules=("mlx_lm.server",),
    model_flags=("--model",),
    context_flags=("--max-kv-size",),
    artifact="mlx",
    adapter="farm.engines.mlx.adapter",
)
