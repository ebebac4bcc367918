"""Ollama: its argument spec (spec.py)."""
