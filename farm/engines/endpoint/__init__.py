"""A hosted endpoint as an engine (adapter.py)."""
