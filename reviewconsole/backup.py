"""Online backup and restore of the SQLite database (PostgreSQL uses pg_dump / pg_restore).

A restore checks the backup before touching the live database: it must be an intact SQLite
database of this console with the audit tables' guard (the triggers as the migrations made
them), whose audit chain verifies, head signature included, whose log is not empty beside
audited data, and which, when an anchor file is kept, ends where a backup that file recorded
ended (``backup`` records the head of each copy it writes), so a copy cut at its end is refused.
The restore is then recorded as an event in the restored audit log.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from reviewconsole.audit import (
    UNREADABLE_ANCHOR,
    anchor_records,
    audit_key,
    audited_models,
    event_record,
    record_backup_anchor,
    record_restore_anchor,
)
from reviewconsole.chain import (
    FORGED_ANCHOR,
    NOT_ANCHORED,
    ChainedEvent,
    Head,
    backup_tail_problem,
    empty_log_problem,
    first_broken_link,
    latest_anchor,
    passes_through_anchor,
)
from reviewconsole.cli import readable_file
from reviewconsole.errors import ValidationFailure
from reviewconsole.guard import sqlite_guard_problem
from reviewconsole.models import Action

NOT_SQLITE = (
    "online backup is built in for SQLite only; for PostgreSQL use "
    "pg_dump --format=custom and pg_restore --clean (see the README)"
)
NOT_A_DATABASE = "is not an intact SQLite database"
NOT_A_BACKUP = "is not a backup of this console"
TOO_OLD = "is a backup made before the audit chain was signed; restore it with that release"
BROKEN_CHAIN = "its audit chain does not verify"
NO_GUARD = "it lacks the audit guard every database of this console has"

REQUIRED_TABLES = {"django_migrations", "reviewconsole_event", "reviewconsole_chainhead"}


def _live_sqlite() -> sqlite3.Connection:
    if connection.vendor != "sqlite":
        raise ValidationFailure("DATABASE_URL", NOT_SQLITE)
    connection.ensure_connection()
    raw = connection.connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def database_backup(*, destination: Path) -> tuple[int, bool]:
    """Copy the live database page by page while others keep reading and writing: (pages,
    whether the anchor file recorded the copy's chain head)."""
    if destination.exists():
        raise ValidationFailure("OUTPUT", f"{destination} exists; choose a new file")
    if not destination.parent.is_dir():
        raise ValidationFailure("OUTPUT", f"{destination.parent} is not a directory")
    source = _live_sqlite()
    try:
        # A plain path, never a ``file:`` URI: '#' and '?' are ordinary characters in a name.
        target = sqlite3.connect(destination)
        try:
            source.backup(target)
            # One self-contained file: no write-ahead log beside it.
            target.execute("PRAGMA journal_mode=DELETE")
            pages = target.execute("PRAGMA page_count").fetchone()[0]
            check = target.execute("PRAGMA integrity_check").fetchone()[0]
            head = _backup_head(target) if check == "ok" else None
        finally:
            target.close()
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    if check != "ok":
        destination.unlink(missing_ok=True)
        raise ValidationFailure("OUTPUT", f"the copy failed its integrity check: {check}")
    # The copy's head, as it ends: a restore takes only a copy ending where a recorded one did.
    return int(pages), record_backup_anchor(head)


def _read_only(path: Path) -> sqlite3.Connection:
    # A URI, for its parameters, with the path percent-encoded so that '#' and '?' in the name
    # stay part of it. Read-only never creates the file; immutable (a backup is a closed file)
    # keeps SQLite from leaving a shared-memory or log file beside it.
    return sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)


def _instant(value: Any) -> datetime:
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _backup_events(backup: sqlite3.Connection) -> Iterator[ChainedEvent]:
    rows = backup.execute(
        "SELECT id, created_at, actor_id, actor_name, action, target, reason, details, "
        "hash_version, prev_hash, hash FROM reviewconsole_event ORDER BY id"
    )
    for row in rows:
        yield ChainedEvent(
            id=row[0],
            created_at=_instant(row[1]),
            actor_id=row[2],
            actor_name=row[3],
            action=row[4],
            target=row[5],
            reason=row[6],
            details=json.loads(row[7]),
            hash_version=row[8],
            prev_hash=row[9],
            hash=row[10],
        )


def _backup_head(backup: sqlite3.Connection) -> Head | None:
    row = backup.execute(
        "SELECT count, event_id, hash, signature FROM reviewconsole_chainhead "
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return Head(int(row[0]), int(row[1]), str(row[2]), str(row[3])) if row else None


def _backup_audited_rows(backup: sqlite3.Connection, tables: set[str]) -> dict[str, int]:
    held = {}
    for model in audited_models():
        table = model._meta.db_table
        if table in tables:
            held[model._meta.label_lower] = int(
                backup.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]  # noqa: S608
            )
    return held


def _anchor_problem(backup: sqlite3.Connection) -> str | None:
    records = anchor_records()
    if records is None:
        return UNREADABLE_ANCHOR
    _, forged = latest_anchor(audit_key(), records)
    if forged is not None:
        return FORGED_ANCHOR
    if not passes_through_anchor(_backup_events(backup), records):
        return NOT_ANCHORED
    return backup_tail_problem(_backup_head(backup), records)


def _checked_backup(backup: sqlite3.Connection) -> tuple[int, Head | None]:
    """(events in the backup, its signed head) once everything about it checks out."""
    check = backup.execute("PRAGMA integrity_check").fetchone()[0]
    if check != "ok":
        raise ValidationFailure("FILE", f"{NOT_A_DATABASE}: {check}")
    tables = {r[0] for r in backup.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"django_migrations", "reviewconsole_event"} <= tables:
        raise ValidationFailure("FILE", NOT_A_BACKUP)
    columns = {r[1] for r in backup.execute("PRAGMA table_info(reviewconsole_event)")}
    if not tables >= REQUIRED_TABLES or "hash_version" not in columns:
        raise ValidationFailure("FILE", TOO_OLD)
    unguarded = sqlite_guard_problem(backup)
    if unguarded is not None:
        raise ValidationFailure("FILE", f"{NO_GUARD}: {unguarded}")
    head = _backup_head(backup)
    checked, broken = first_broken_link(_backup_events(backup), key=audit_key(), head=head)
    if broken is not None:
        raise ValidationFailure(
            "FILE", f"{BROKEN_CHAIN}: event {broken.event_id}: {broken.problem}"
        )
    emptied = empty_log_problem(checked, head, _backup_audited_rows(backup, tables))
    if emptied is not None:
        raise ValidationFailure("FILE", f"{BROKEN_CHAIN}: {emptied.problem}")
    anchor_problem = _anchor_problem(backup)
    if anchor_problem is not None:
        raise ValidationFailure(
            "FILE", f"{BROKEN_CHAIN} against AUDIT_ANCHOR_FILE: {anchor_problem}"
        )
    return checked, head


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _operating_system_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""


def database_restore(*, source_file: Path) -> dict[str, Any]:
    """Replace the live database's content with a backup's, in one step, and record it."""
    readable_file(source_file, field="FILE")
    live = _live_sqlite()
    digest = _sha256(source_file)
    try:
        backup = _read_only(source_file)
        try:
            events, head = _checked_backup(backup)
            backup.backup(live)
            pages = int(backup.execute("PRAGMA page_count").fetchone()[0])
        finally:
            backup.close()
    except ValidationFailure:
        raise
    except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
        # Nothing was replaced: the copy is the last step and SQLite applies it all or nothing.
        raise ValidationFailure("FILE", f"{NOT_A_DATABASE}: {exc}") from None
    record_restore_anchor(head)
    with transaction.atomic():
        event_record(
            actor=None,
            action=Action.BACKUP_RESTORE,
            target=f"backup:{source_file.name}"[:200],
            details={
                "file": str(source_file),
                "sha256": digest,
                "events": events,
                "pages": pages,
                "os_user": _operating_system_user(),
            },
        )
    return {"pages": pages, "events": events, "sha256": digest}
