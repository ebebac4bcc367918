"""Schema migrations run from code.

The Alembic config ships in the package; `upgrade` migrates, and `ensure_current` checks that a database is at
the revision this farm expects.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, exc, text

from farm.errors import StoreError
from farm.store.db import READ_ONLY, retry_busy, translate_errors

if TYPE_CHECKING:
    from alembic.config import Config

ALEMBIC_INI = Path(__file__).with_name("alembic.ini")


VERSIONS = ALEMBIC_INI.with_name("migrations") / "versions"
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.MULTILINE)


@cache
def head_from_files() -> str | None:
    """The head revision read from the migration files themselves (no Alembic import: a command that finds its
    database current starts faster), or None when the files do not say it plainly (then Alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS.glob("*.py"):
        found = dict(_ASSIGNMENT.findall(path.read_text(encoding="utf-8")))
        revision, parent = found.get("revision", ""), found.get("down_revision", "")
        if not re.fullmatch(r"[\"'][^\"']+[\"']", revision):
            return None
        revisions.add(revision[1:-1])
        if re.fullmatch(r"[\"'][^\"']+[\"']", parent):
            parents.add(parent[1:-1])
        elif parent != "None":
            return None
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def alembic_config() -> Config:
    """The package's Alembic config, with the script location resolved inside the installed package."""
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(ALEMBIC_INI.with_name("migrations")))
    return config


def head_revision() -> str:
    """The newest migration this farm ships."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the farm ships at least one migration"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    with (
        translate_errors("cannot read the schema revision"),
        engine.connect().execution_options(**READ_ONLY) as conn,
    ):
        return MigrationContext.configure(conn).get_current_revision()


def _stored_revision(engine: Engine) -> str | None:
    """The revision in `alembic_version`, read with one plain query; None when it cannot be (Alembic then reads
    it the careful way)."""
    try:
        with engine.connect().execution_options(**READ_ONLY) as conn:
            value = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except exc.SQLAlchemyError:
        return None
    return str(value) if value is not None else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to `revision` in one transaction.

    On PostgreSQL a migration that changed the revision ends with ANALYZE of the farm's tables, in the same
    transaction: a migration may write every row of a table (0002 backfilled a summary for every run), and the
    readers' plans need statistics (without them an export at 10,000 runs scanned every measurement per sweep
    group: 34 s instead of 8). Autovacuum keeps them fresh afterwards (docs/farm-mode.md)."""
    from alembic import command

    config = alembic_config()
    before = _stored_revision(engine)
    with translate_errors("cannot migrate the database"), engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        if conn.dialect.name == "postgresql":
            after = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            if after != before:
                from sqlalchemy import inspect

                from farm.store.models import metadata

                present = sorted(set(metadata.tables) & set(inspect(conn).get_table_names()))  # at this revision
                quote = conn.dialect.identifier_preparer.quote
                if present:
                    conn.execute(text(f"ANALYZE {', '.join(quote(name) for name in present)}"))


def ensure_current(engine: Engine, *, auto_upgrade: bool, where: str) -> None:
    """Upgrade (when allowed) or refuse a database that is not at this farm's head revision.

    On SQLite the first read of the revision and the upgrade are retried on SQLITE_BUSY (bounded), so that any
    number of processes opening one brand-new store at once all succeed; the upgrade runs under BEGIN IMMEDIATE,
    so only the first migrates and the others find the schema current.
    """
    if engine.dialect.name == "sqlite":
        retry_busy(lambda: _ensure_current(engine, auto_upgrade=auto_upgrade, where=where), "first open")
        return
    _ensure_current(engine, auto_upgrade=auto_upgrade, where=where)


def _ensure_current(engine: Engine, *, auto_upgrade: bool, where: str) -> None:
    if head_from_files() is not None and _stored_revision(engine) == head_from_files():
        return
    from alembic.script import ScriptDirectory

    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    known = {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current is not None and current not in known:
        raise StoreError(
            f"the database {where} is at schema revision {current!r}, which this farm does not know: "
            "it was migrated by a newer farm; upgrade the farm"
        )
    if auto_upgrade:
        upgrade(engine)
        return
    state = "not initialised" if current is None else f"at schema revision {current!r}, not {head!r}"
    raise StoreError(f"the database {where} is {state}: run `farm db upgrade`")
