"""Recipes and sweep specs: what to run (a recipe) and how to measure it (a sweep spec)."""
