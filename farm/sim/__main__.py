"""`python -m farm.sim serve ...`: the simulator's commands without importing the rest of the farm's CLI."""

from farm.cli.sim import app

app(prog_name="farm sim")
