"""The audit guard holds against every session the application may have, on PostgreSQL too.

A superuser's ``SET session_replication_role = replica`` skips triggers that are merely
``ENABLE``d; the guard's fire always (migration 0013). The application connects as a role that
``grant_app_role`` checked and granted: it cannot lift the guard by any documented means
(docs/operations.md, "Database roles"). ``verify_audit`` names a guard that was dropped or no
longer fires always.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction

from reviewconsole.guard import AUDIT_TABLES, GUARD_MISSING, guard_problem
from reviewconsole.roles import Role
from tests.helpers import audit_guards_lifted, run_json

only_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="roles and replication roles are PostgreSQL's"
)


def raw(sql: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def audit_rows() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM reviewconsole_event),"
            " (SELECT COUNT(*) FROM reviewconsole_chainhead)"
        )
        events, heads = cursor.fetchone()
    return int(events), int(heads)


CHANGES = {
    "UPDATE": "UPDATE {table} SET hash = hash",
    "DELETE": "DELETE FROM {table}",
    "TRUNCATE": "TRUNCATE {table}",
}


@only_postgresql
@pytest.mark.django_db
@pytest.mark.parametrize("table", AUDIT_TABLES)
@pytest.mark.parametrize("verb", sorted(CHANGES))
def test_a_superuser_in_replica_mode_still_meets_the_guard(
    make_user: Callable[[str, str], User], table: str, verb: str
) -> None:
    make_user("rita", Role.REVIEWER)
    raw("SET CONSTRAINTS ALL IMMEDIATE")  # let the trigger, not a pending FK check, answer
    before = audit_rows()

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw("SET LOCAL session_replication_role = replica")
        raw(CHANGES[verb].format(table=table))

    assert audit_rows() == before


@only_postgresql
@pytest.mark.django_db
def test_truncating_a_table_the_events_reference_cannot_cascade_into_them(
    make_user: Callable[[str, str], User],
) -> None:
    make_user("rita", Role.REVIEWER)
    raw("SET CONSTRAINTS ALL IMMEDIATE")
    before = audit_rows()

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw("SET LOCAL session_replication_role = replica")
        raw("TRUNCATE auth_user CASCADE")

    assert audit_rows() == before


@pytest.mark.django_db
def test_the_harness_puts_the_guard_back_as_the_migrations_left_it() -> None:
    # Transactional tests' flush lifts the guard as the owner would; it must come back firing
    # always, or every later test would run against a weaker guard than production's.
    assert guard_problem(connection) is None
    with transaction.atomic(), audit_guards_lifted(connection):
        assert guard_problem(connection) is not None

    assert guard_problem(connection) is None


# verify_audit names a guard that is gone or no longer fires always.


def _sqlite_trigger_dropped() -> None:
    raw("DROP TRIGGER reviewconsole_event_no_delete")


@pytest.mark.django_db
def test_verify_audit_names_a_dropped_guard(make_user: Callable[[str, str], User]) -> None:
    make_user("rita", Role.REVIEWER)
    assert run_json("verify_audit")[0] == 0
    if connection.vendor == "postgresql":
        raw("DROP TRIGGER reviewconsole_event_append_only ON reviewconsole_event")
        dropped = "reviewconsole_event_append_only"
    else:
        raw("DROP TRIGGER reviewconsole_event_no_delete")
        dropped = "reviewconsole_event_no_delete"

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert result["problem"] == GUARD_MISSING.format(names=dropped)


@only_postgresql
@pytest.mark.django_db
def test_verify_audit_names_a_guard_that_a_replica_session_would_pass(
    make_user: Callable[[str, str], User],
) -> None:
    make_user("rita", Role.REVIEWER)
    raw("ALTER TABLE reviewconsole_chainhead ENABLE TRIGGER reviewconsole_chainhead_no_truncate")

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert "reviewconsole_chainhead_no_truncate" in result["problem"]
    assert "session_replication_role" in result["problem"]


@only_postgresql
@pytest.mark.django_db
def test_verify_audit_names_a_trigger_function_that_was_replaced(
    make_user: Callable[[str, str], User],
) -> None:
    make_user("rita", Role.REVIEWER)
    raw(
        "CREATE OR REPLACE FUNCTION reviewconsole_event_append_only() RETURNS trigger AS $$"
        " BEGIN RETURN OLD; END; $$ LANGUAGE plpgsql"
    )

    status, result = run_json("verify_audit")

    assert status != 0
    assert result["problem"] == GUARD_MISSING.format(names="reviewconsole_event_append_only")


# The application's role.


def _role_drop(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name])
        if cursor.fetchone():
            cursor.execute(f'DROP OWNED BY "{name}"')
            cursor.execute(f'DROP ROLE "{name}"')


@pytest.fixture
def app_role() -> Iterator[str]:
    """A login role made as the docs make the application's, dropped afterwards."""
    name = f"console_app_test_{uuid.uuid4().hex[:12]}"
    raw(f'CREATE ROLE "{name}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT')
    try:
        yield name
    finally:
        _role_drop(name)


def app_connection(role: str) -> psycopg.Connection[Any]:
    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        dbname=settings["NAME"],
        user=role,
        autocommit=True,
    )


# Every documented way to lift or get past the guard, as the application's role would try it.
LIFTING = {
    "replica session": [
        "SET session_replication_role = replica",
        "DELETE FROM reviewconsole_event",
    ],
    "the old flush setting": [
        "SET reviewconsole.allow_audit_flush = 'on'",
        "TRUNCATE reviewconsole_event",
    ],
    "truncate": ["TRUNCATE reviewconsole_event, reviewconsole_chainhead"],
    "truncate cascading": ["TRUNCATE auth_user CASCADE"],
    "update": ["UPDATE reviewconsole_event SET reason = 'x'"],
    "delete heads": ["DELETE FROM reviewconsole_chainhead"],
    "disable triggers": ["ALTER TABLE reviewconsole_event DISABLE TRIGGER USER"],
    "disable one trigger": [
        "ALTER TABLE reviewconsole_event DISABLE TRIGGER reviewconsole_event_append_only"
    ],
    "fire only at origin": [
        "ALTER TABLE reviewconsole_event ENABLE TRIGGER reviewconsole_event_append_only"
    ],
    "drop trigger": ["DROP TRIGGER reviewconsole_event_append_only ON reviewconsole_event"],
    "replace the function": [
        "CREATE OR REPLACE FUNCTION reviewconsole_event_append_only() RETURNS trigger AS $$"
        " BEGIN RETURN OLD; END; $$ LANGUAGE plpgsql"
    ],
    "rename the table": ["ALTER TABLE reviewconsole_event RENAME TO old_events"],
    "drop the table": ["DROP TABLE reviewconsole_event CASCADE"],
    "become the owner": ["SET ROLE postgres"],
    "take ownership": ["ALTER TABLE reviewconsole_event OWNER TO CURRENT_USER"],
    "make a trigger of its own": [
        "CREATE FUNCTION lift() RETURNS trigger AS $$ BEGIN RETURN NULL; END; $$ LANGUAGE plpgsql",
    ],
}


@only_postgresql
@pytest.mark.django_db(transaction=True)
def test_the_application_role_cannot_lift_the_guard_by_any_documented_means(
    make_user: Callable[[str, str], User], app_role: str
) -> None:
    make_user("rita", Role.REVIEWER)
    status, granted = run_json("grant_app_role", app_role)
    assert status == 0, granted
    before = audit_rows()

    answers = {}
    with app_connection(app_role) as conn:
        # The grants are enough for the application's own work: reading and appending.
        conn.execute("SELECT count(*) FROM reviewconsole_event").fetchone()
        conn.execute("SELECT count(*) FROM auth_user").fetchone()
        for means, statements in LIFTING.items():
            try:
                with conn.transaction():
                    for statement in statements:
                        conn.execute(statement)
            except psycopg.Error as exc:
                answers[means] = str(exc).splitlines()[0]
            else:
                answers[means] = "done"

    refused = re.compile(r"permission denied|must be owner|append-only")
    assert {m: a for m, a in answers.items() if not refused.search(a)} == {}
    assert audit_rows() == before
    assert guard_problem(connection) is None


@only_postgresql
@pytest.mark.django_db
def test_grant_app_role_refuses_a_role_that_could_lift_the_guard() -> None:
    name = f"console_owner_test_{uuid.uuid4().hex[:12]}"
    raw(f'CREATE ROLE "{name}" LOGIN SUPERUSER')

    status, result = run_json("grant_app_role", name)

    assert status != 0 and result["ok"] is False
    assert result["field"] == "ROLE"
    assert "is a superuser" in result["error"]


@pytest.mark.django_db
def test_grant_app_role_on_sqlite_names_the_database() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite has no roles")
    status, result = run_json("grant_app_role", "anyone")

    assert status != 0
    assert result["field"] == "DATABASE_URL"
