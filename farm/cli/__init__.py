"""The `farm` command: one Typer app, one module per command group. Commands parse input and call the library."""
