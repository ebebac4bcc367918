"""Alembic migrations of the store (env.py, script template, versions/)."""
