"""The read-only HTTP API over the store (`farm serve`): see farm.api.app and /openapi.json."""

from farm.api.app import build_app, serve

__all__ = ["build_app", "serve"]
