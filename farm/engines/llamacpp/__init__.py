"""llama.cpp (llama-server): its argument spec and adapter (adapter.py), newer options (supplement.py)."""
