"""LM Studio: its argument spec (spec.py)."""
