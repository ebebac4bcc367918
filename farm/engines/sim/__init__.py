"""The simulator as an engine (adapter.py)."""
