"""`farm sim ...`: the simulator's commands, defined with the simulator (farm.sim.command) and mounted here."""

from __future__ import annotations

from farm.sim.command import app

__all__ = ["app"]
