"""Moved to farm.worker.celery (the worker's Celery runtime); these names stay importable from here."""

from farm.worker.celery import (
    SKIP_PAUSE_S,
    ConsumerSwitch,
    FarmRuntime,
    OnSigterm,
    Outcome,
    install,
    register,
    run_job,
    runtime,
)

__all__ = [
    "SKIP_PAUSE_S",
    "ConsumerSwitch",
    "FarmRuntime",
    "OnSigterm",
    "Outcome",
    "install",
    "register",
    "run_job",
    "runtime",
]
