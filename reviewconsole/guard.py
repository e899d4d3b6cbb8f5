"""The audit tables' database guard: what it is, and whether a database still has it.

The migrations install it (0003, 0006 and 0011 the triggers and their functions, 0013 makes the
PostgreSQL triggers fire always, whatever ``session_replication_role`` a session set). Whoever
owns the tables can still drop or disable it, so ``verify_audit`` checks that the live database
has it and ``restore`` refuses a backup without it (see docs/operations.md, "What the audit guard
protects against").
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import import_module

from django.db.backends.base.base import BaseDatabaseWrapper

AUDIT_TABLES = ("reviewconsole_event", "reviewconsole_chainhead")

# Each PostgreSQL trigger: the table it guards and the function it runs.
POSTGRESQL_TRIGGERS = {
    "reviewconsole_event_append_only": ("reviewconsole_event", "reviewconsole_event_append_only"),
    "reviewconsole_chainhead_append_only": (
        "reviewconsole_chainhead",
        "reviewconsole_chainhead_append_only",
    ),
    "reviewconsole_event_no_truncate": ("reviewconsole_event", "reviewconsole_audit_no_truncate"),
    "reviewconsole_chainhead_no_truncate": (
        "reviewconsole_chainhead",
        "reviewconsole_audit_no_truncate",
    ),
}
# pg_trigger.tgenabled of a trigger that fires in every session ("A": ENABLE ALWAYS); "O" fires
# only while session_replication_role is origin or local, so a superuser's "replica" skips it.
ALWAYS = "A"

GUARD_MISSING = "the audit tables' guard is missing or altered ({names})"
GUARD_NOT_ALWAYS = (
    "the audit tables' guard does not fire in every session ({names}): "
    "a session with session_replication_role = replica would pass it"
)


def _migration(name: str) -> object:
    return import_module(f"reviewconsole.migrations.{name}")


@cache
def sqlite_triggers() -> dict[str, str]:
    """Each SQLite trigger's name and the exact statement the migrations created it with."""
    triggers: Mapping[str, str] = _migration("0011_audit_guard_no_escape").SQLITE_TRIGGERS  # type: ignore[attr-defined]
    return {name: f"CREATE TRIGGER {name} {body}" for name, body in triggers.items()}


_FUNCTION = re.compile(r"FUNCTION (\w+)\(\) RETURNS trigger AS \$\$(.*?)\$\$", re.S)


@cache
def postgresql_functions() -> dict[str, str]:
    """Each trigger function's name and body as the latest migration defining it wrote it."""
    sources = [
        _migration("0003_event_hash_chain").REFUSE_CHANGES,  # type: ignore[attr-defined]
        _migration("0006_audit_integrity").POSTGRESQL_GUARDS,  # type: ignore[attr-defined]
        _migration("0011_audit_guard_no_escape").POSTGRESQL_NO_TRUNCATE,  # type: ignore[attr-defined]
    ]
    bodies: dict[str, str] = {}
    for sql in sources:
        bodies.update(_FUNCTION.findall(sql))
    return bodies


def _named(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def sqlite_guard_problem(conn: sqlite3.Connection) -> str | None:
    """What is wrong with the guard of the SQLite database ``conn`` opens; None when intact."""
    found = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (?, ?)",
            AUDIT_TABLES,
        ).fetchall()
    )
    wrong = [name for name, sql in sqlite_triggers().items() if found.get(name) != sql]
    return GUARD_MISSING.format(names=_named(wrong)) if wrong else None


def _postgresql_guard_problem(connection: BaseDatabaseWrapper) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.tgname, c.relname, p.proname, p.prosrc, t.tgenabled "
            "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_proc p ON p.oid = t.tgfoid "
            "WHERE NOT t.tgisinternal AND c.relname IN (%s, %s) "
            "AND c.relnamespace = to_regnamespace(current_schema())",
            list(AUDIT_TABLES),
        )
        found = {row[0]: row[1:] for row in cursor.fetchall()}
    functions = postgresql_functions()
    wrong, not_always = [], []
    for name, (table, function) in POSTGRESQL_TRIGGERS.items():
        row = found.get(name)
        if row is None or row[:3] != (table, function, functions[function]):
            wrong.append(name)
        elif row[3] != ALWAYS:
            not_always.append(name)
    if wrong:
        return GUARD_MISSING.format(names=_named(wrong))
    if not_always:
        return GUARD_NOT_ALWAYS.format(names=_named(not_always))
    return None


def guard_problem(connection: BaseDatabaseWrapper) -> str | None:
    """What is wrong with the live database's guard; None when intact (or on another vendor)."""
    if connection.vendor == "postgresql":
        return _postgresql_guard_problem(connection)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        raw = connection.connection
        assert isinstance(raw, sqlite3.Connection)
        return sqlite_guard_problem(raw)
    return None
