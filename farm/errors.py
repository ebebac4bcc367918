"""Every exception the farm raises on purpose, under one root.

    FarmError
    ├── InputError                 bad input from a user; names the file and the field
    │   ├── RecipeError            a recipe document that cannot be parsed or validated
    │   ├── SweepSpecError         a sweep spec (TOML in jobs/) that cannot be parsed or validated
    │   ├── ProfileError           a worker profile that cannot be parsed or validated
    │   ├── ArgumentPolicyError    an engine argument refused by the engine's list or the host's policy
    │   └── SettingsError          a FARM_* environment variable (or Settings argument) that cannot be used
    ├── StoreError                 the database could not be reached or refused a write
    │   ├── StoreRefused           the database answered and refused the content (integrity or data error)
    │   ├── JobNotFound            no job with that id
    │   ├── InvalidTransition      a job state change that the state machine forbids (cancel a finished job)
    │   └── LeaseLost              the caller no longer owns the job's lease (stale owner or attempt)
    ├── BrokerError                the farm's broker (Redis) could not be reached or refused a message
    ├── EngineError                the engine under test failed; carries a failure class and the log tail
    ├── MeasurementError           a measurement could not produce a figure (every request failed, no usage)
    ├── SigningError               a host key that cannot be read or made, a key that cannot be parsed
    │   └── BundleRefused          a results bundle refused at import (a run that does not verify); nothing stored
    └── OutputError                an output file or directory (`-o`) cannot be written; names the path

A failed request inside a sweep is not an exception: it is recorded as data and counted.
"""

from __future__ import annotations

from pathlib import Path


class FarmError(Exception):
    """Root of every error the farm raises on purpose."""


class InputError(FarmError):
    """Bad input from a user. The message names the source (file) and the field."""

    def __init__(self, message: str, *, source: str | Path | None = None, field: str | None = None) -> None:
        self.source = str(source) if source is not None else None
        self.field = field
        self.detail = message
        parts = []
        if self.source:
            parts.append(self.source)
        if field:
            parts.append(f"field {field!r}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class RecipeError(InputError):
    """A recipe document that cannot be parsed or validated."""


class SweepSpecError(InputError):
    """A sweep spec that cannot be parsed or validated."""


class ProfileError(InputError):
    """A worker profile that cannot be parsed or validated."""


class ArgumentPolicyError(InputError):
    """An engine argument refused by the engine's argument list or by the host's policy."""


class SettingsError(InputError, ValueError):
    """A setting that cannot be used: a FARM_* variable that does not parse, or a value out of its range."""


class StoreError(FarmError):
    """The database could not be reached or refused a write."""


class StoreRefused(StoreError):
    """The database answered and refused what was written (a constraint, a value it cannot hold): the same write
    gets the same answer, unlike an outage."""


class JobNotFound(StoreError):
    """No job with that id."""


class InvalidTransition(StoreError):
    """A job state change that the state machine forbids."""


class LeaseLost(StoreError):
    """The caller no longer owns the job's lease: another worker, a newer attempt, or a cancelled job."""


class BrokerError(FarmError):
    """The broker that wakes workers could not be reached or refused a message (the job stays stored)."""


class EngineError(FarmError):
    """The engine under test failed. `failure_class` is one of farm.domain.FailureClass."""

    def __init__(self, message: str, *, failure_class: str, log_tail: str = "") -> None:
        self.failure_class = failure_class
        self.log_tail = log_tail
        text = f"{failure_class}: {message}"
        if log_tail:
            text += f"\n--- engine log (tail) ---\n{log_tail}"
        super().__init__(text)


class MeasurementError(FarmError):
    """A measurement could not produce a figure."""


class OutputError(FarmError):
    """An output (`-o FILE` or `-o DIR/`) that cannot be written: a directory given for a file, no permission."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        super().__init__(message)


class SigningError(FarmError):
    """A host key that cannot be read or made, or a public key or fingerprint that cannot be parsed."""


class BundleRefused(SigningError):
    """A results bundle refused at import: the message names each run that does not verify. Nothing is stored."""
