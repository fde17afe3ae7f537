"""Schema migrations of the store (Alembic), run by :meth:`Database.create_schema`.

Every table of the store (audit decisions, escalations, label jobs and their items,
review votes) is created and changed only here, one revision per change, in
``versions/``: a database created by an older Tribunal is brought to the current
schema at the next start, rows kept. Revision ``0001`` is the schema Tribunal created
before it had migrations (with ``create_all``); it creates only the tables a database
lacks, so such a database upgrades in place.

Write a new revision by hand in ``versions/`` (``down_revision`` = the previous head) and
add its change to the table classes; ``tests/integration/test_storage_migrations.py``
checks that the migrated schema and the classes agree, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

__all__ = ["current_revision", "head_revision", "upgrade"]

_HERE = Path(__file__).resolve().parent


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Bring the database behind ``connection`` to ``revision`` (in its transaction)."""
    command.upgrade(_config(connection), revision)


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None: never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    if head is None:  # pragma: no cover - the package ships its revisions
        raise RuntimeError("no migration revisions found")
    return head
