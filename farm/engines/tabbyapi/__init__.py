"""TabbyAPI: its argument spec and config schema (spec.py)."""
