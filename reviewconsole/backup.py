"""Online backup and restore of the SQLite database (PostgreSQL uses pg_dump / pg_restore)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from django.db import connection

from reviewconsole.errors import ValidationFailure

NOT_SQLITE = (
    "online backup is built in for SQLite only; for PostgreSQL use "
    "pg_dump --format=custom and pg_restore --clean (see the README)"
)


def _live_sqlite() -> sqlite3.Connection:
    if connection.vendor != "sqlite":
        raise ValidationFailure("DATABASE_URL", NOT_SQLITE)
    connection.ensure_connection()
    raw = connection.connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def database_backup(*, destination: Path) -> int:
    """Copy the live database page by page while others keep reading and writing."""
    if destination.exists():
        raise ValidationFailure("OUTPUT", f"{destination} exists; choose a new file")
    if not destination.parent.is_dir():
        raise ValidationFailure("OUTPUT", f"{destination.parent} is not a directory")
    source = _live_sqlite()
    target = sqlite3.connect(destination)
    try:
        source.backup(target)
        pages = target.execute("PRAGMA page_count").fetchone()[0]
        check = target.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        target.close()
    if check != "ok":
        destination.unlink(missing_ok=True)
        raise ValidationFailure("OUTPUT", f"the copy failed its integrity check: {check}")
    return int(pages)


def database_restore(*, source_file: Path) -> int:
    """Replace the live database's content with a backup's, in one step."""
    if not source_file.is_file():
        raise ValidationFailure("FILE", f"{source_file} does not exist")
    backup = sqlite3.connect(f"file:{source_file}?mode=ro", uri=True)
    try:
        check = backup.execute("PRAGMA integrity_check").fetchone()[0]
        if check != "ok":
            raise ValidationFailure("FILE", f"is not an intact SQLite database: {check}")
        tables = {r[0] for r in backup.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "django_migrations" not in tables or "reviewconsole_event" not in tables:
            raise ValidationFailure("FILE", "is not a backup of this console")
        backup.backup(_live_sqlite())
        pages = backup.execute("PRAGMA page_count").fetchone()[0]
    finally:
        backup.close()
    return int(pages)
