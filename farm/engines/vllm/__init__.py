"""vLLM: its argument spec (spec.py), its adapter (adapter.py), vLLM on the CPU (cpu.py, tinymodel.py)."""
