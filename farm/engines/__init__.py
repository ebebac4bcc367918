"""Engines under test: one interface (start, wait ready, version, stop, log) over processes the worker supervises."""
