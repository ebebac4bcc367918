"""SGLang: its argument spec (spec.py) and adapter (adapter.py)."""
