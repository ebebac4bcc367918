"""`farm db upgrade`: create or migrate the store's schema."""

from __future__ import annotations

import typer

from farm.cli.common import console, farm_errors, settings
from farm.store import Store

app = typer.Typer(help="The store's schema.")


@app.command("upgrade")
def upgrade() -> None:
    """Migrate the database named by FARM_DATABASE_URL (default: the embedded SQLite file) to the newest schema."""
    s = settings()
    with farm_errors():
        store = Store.open(s.resolved_database_url, auto_upgrade=False, check_schema=False)
        store.upgrade()
    console.print(f"schema up to date: {store.url_for_display}", markup=False, highlight=False)
