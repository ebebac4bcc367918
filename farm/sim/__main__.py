"""`python -m farm.sim serve ...`: the simulator's own command line, without the farm's CLI."""

from farm.sim.command import app

app(prog_name="python -m farm.sim")
