"""`python -m farm` is the `farm` command (the worker starts the simulator this way, with its own Python)."""

from farm.cli.app import main

main()
