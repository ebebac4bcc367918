"""`farm catalogue`: the hardware ids the farm knows, with vendor, memory and backend."""

from __future__ import annotations

import typer
from rich.table import Table

from farm import hardware
from farm.cli.common import console, print_json


def catalogue(
    as_json: bool = typer.Option(False, "--json", help="print the catalogue as JSON"),
    vendor: str | None = typer.Option(None, "--vendor", help="only this vendor: nvidia, amd, intel, apple"),
) -> None:
    """List the hardware catalogue: the registry's hardware documents and the farm's own ids."""
    kinds = sorted(hardware.catalogue().values(), key=lambda kind: (kind.vendor, kind.id))
    if vendor is not None:
        kinds = [kind for kind in kinds if kind.vendor == vendor.lower()]
    if as_json:
        print_json(
            [
                {
                    "id": kind.id,
                    "name": kind.name,
                    "vendor": kind.vendor,
                    "memory_gib": kind.memory_gib,
                    "accelerator_backend": kind.accelerator_backend,
                    "kind": kind.kind,
                    "source": kind.source,
                }
                for kind in kinds
            ]
        )
        return
    table = Table("id", "vendor", "memory", "backend", "name", "source")
    for kind in kinds:
        table.add_row(
            kind.id,
            kind.vendor,
            f"{kind.memory_gib} GB",
            kind.accelerator_backend or "-",
            kind.name,
            kind.source,
        )
    console.print(table)
    console.print(f"{len(kinds)} hardware ids", highlight=False)
