"""MLX (mlx-lm): its argument spec (spec.py)."""
