"""Measurement: the load generator (timed path), the measurement math (no I/O) and the sweep runner."""
