"""The audit guard has no switch a session can turn, and an emptied log is never taken as intact.

The guards (reviewconsole migration 0011) refuse every ordinary statement that would change or
empty the audit tables, whatever the session set; what only the tables' owner can do (disable or
drop the triggers) is caught by verification: an empty log beside data that is only ever written
with events fails ``verify_audit`` and is refused by ``restore``, and with an anchor file both
check the chain against it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction

from reviewconsole.chain import EMPTY_LOG, NOT_ANCHORED
from reviewconsole.guard import AUDIT_TABLES, GUARD_MISSING
from reviewconsole.roles import Role
from tests.helpers import (
    audit_guards_lifted,
    copy_database,
    manage_many_on_sqlite,
    manage_on_sqlite,
    run_json,
)

EMPTY_LOG_START = EMPTY_LOG.split("(")[0]
OLD_ESCAPE_FUNCTION = "reviewconsole_audit_flush_allowed"
OLD_ESCAPE_SETTING = "reviewconsole.allow_audit_flush"


def raw(sql: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def event_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM reviewconsole_event")
        return int(cursor.fetchone()[0])


@pytest.fixture
def audited_world(make_user: Callable[[str, str], User]) -> User:
    """A user given a role: a row only ever written beside its audit event."""
    return make_user("rita", Role.REVIEWER)


# The guard: no session setting lifts it.


@pytest.mark.django_db
@pytest.mark.parametrize("table", AUDIT_TABLES)
def test_the_old_session_setting_does_not_let_truncate_through(
    audited_world: User, table: str
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("TRUNCATE and session settings are PostgreSQL's")
    raw("SET CONSTRAINTS ALL IMMEDIATE")  # let the trigger, not a pending FK check, answer
    before = event_count()

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(f"SET LOCAL {OLD_ESCAPE_SETTING} = 'on'")
        raw(f"TRUNCATE {table}")

    assert event_count() == before


@pytest.mark.django_db
@pytest.mark.parametrize("table", AUDIT_TABLES)
def test_the_application_connection_cannot_delete_audit_rows(
    audited_world: User, table: str
) -> None:
    if connection.vendor == "postgresql":
        raw(f"SET {OLD_ESCAPE_SETTING} = 'on'")
    before = event_count()

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw(f"DELETE FROM {table}")  # noqa: S608

    assert event_count() == before


@pytest.mark.parametrize("table", AUDIT_TABLES)
def test_a_sqlite_connection_defining_the_old_escape_function_cannot_delete(
    sqlite_database: Path, table: str
) -> None:
    # The migrated file as any program opens it, defining what the old triggers consulted.
    with sqlite3.connect(sqlite_database) as conn:
        conn.create_function(OLD_ESCAPE_FUNCTION, 0, lambda: 1)
        conn.execute(
            "INSERT INTO reviewconsole_event (id, created_at, actor_name, action, target, reason,"
            " details, hash_version, prev_hash, hash) VALUES (1, '2026-01-01T00:00:00+00:00',"
            " 'system', 'x', 'y', '', '{}', 2, '', '')"
        )
        conn.execute(
            "INSERT INTO reviewconsole_chainhead (count, event_id, hash, signature)"
            " VALUES (1, 1, '', '')"
        )
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(f"DELETE FROM {table}")  # noqa: S608
    conn.close()


# verify_audit: an emptied log beside audited data fails.


def empty_the_audit_tables() -> None:
    """What only the tables' owner can do: lift the guards and empty both tables."""
    if connection.vendor == "postgresql":
        raw("SET CONSTRAINTS ALL IMMEDIATE")
    with audit_guards_lifted(connection):
        for table in AUDIT_TABLES:
            raw(f"DELETE FROM {table}")  # noqa: S608


@pytest.mark.django_db
def test_an_emptied_log_beside_audited_data_fails_verification(audited_world: User) -> None:
    empty_the_audit_tables()

    status, result = run_json("verify_audit")

    assert status != 0
    assert result["ok"] is False and result["checked"] == 0
    assert result["problem"].startswith(EMPTY_LOG_START)
    assert "auth.user_groups: 1" in result["problem"]


@pytest.mark.django_db
def test_with_an_anchor_file_an_emptied_log_fails_against_it(
    audited_world: User,
    make_user: Callable[[str, str], User],
    settings: Any,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "anchor.jsonl")
    with django_capture_on_commit_callbacks(execute=True):
        make_user("late", Role.AGENT)
    empty_the_audit_tables()

    status, result = run_json("verify_audit")

    assert status != 0 and result["ok"] is False
    assert "anchor" in result["problem"]


@pytest.mark.django_db
def test_a_database_holding_only_unaudited_rows_verifies_with_no_events() -> None:
    User.objects.create_superuser("root", "root@example.test", "pw")  # createsuperuser's way

    status, result = run_json("verify_audit")

    assert status == 0
    assert result == {"ok": True, "checked": 0, "broken_at": None, "problem": None}


# restore: a backup whose log was emptied, or that the anchor file never saw, is refused.


def manage_ok(db: Path, *args: str, **env: str) -> dict[str, Any]:
    result = manage_on_sqlite(db, *args, "--json", **env)
    assert result.returncode == 0, result.stderr + result.stdout
    payload: dict[str, Any] = json.loads(result.stdout)
    return payload


def manage_all_ok(db: Path, *commands: list[str], **env: str) -> list[dict[str, Any]]:
    """``commands`` one after another in one process, each succeeding: the writes before the
    backup a test tampers with need not each start a process of their own."""
    done = manage_many_on_sqlite(db, *[[*command, "--json"] for command in commands], **env)
    for result in done:
        assert result.returncode == 0, result.stderr + result.stdout
    return [json.loads(result.stdout) for result in done]


def manage_refused(db: Path, *args: str, **env: str) -> dict[str, Any]:
    result: subprocess.CompletedProcess[str] = manage_on_sqlite(db, *args, "--json", **env)
    assert result.returncode != 0, result.stdout
    [line] = result.stdout.strip().splitlines()
    payload: dict[str, Any] = json.loads(line)
    assert payload["ok"] is False and "Traceback" not in result.stderr
    return payload


def live_state(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT 'user', username FROM auth_user UNION ALL "
            "SELECT 'event', hash FROM reviewconsole_event ORDER BY 1, 2"
        ).fetchall()
    conn.close()
    return found


@pytest.fixture(scope="module")
def with_an_operator(migrated_sqlite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated file in which ``add_user`` made an operator, made once for this module."""
    db = copy_database(migrated_sqlite, tmp_path_factory.mktemp("operator") / "console.sqlite3")
    manage_ok(db, "add_user", "olivia", "--role", "operator")
    return db


@pytest.fixture
def live(with_an_operator: Path, tmp_path: Path) -> Path:
    """This test's own copy of ``with_an_operator``."""
    return copy_database(with_an_operator, tmp_path / "live" / "console.sqlite3")


def test_restore_refuses_a_backup_whose_audit_log_was_emptied(live: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup.sqlite3"
    manage_ok(live, "backup", str(backup))
    with sqlite3.connect(backup) as conn:
        guard = triggers_dropped(conn)
        for table in AUDIT_TABLES:
            conn.execute(f"DELETE FROM {table}")  # noqa: S608
        for sql in guard:  # and put back, so that only the emptied log is wrong
            conn.execute(sql)
    conn.close()
    manage_ok(live, "add_user", "late", "--role", "agent")
    before = live_state(live)

    payload = manage_refused(live, "restore", str(backup), "--yes")

    assert payload["field"] == "FILE"
    assert EMPTY_LOG_START in payload["error"]
    assert live_state(live) == before


def test_with_an_anchor_file_restore_refuses_a_backup_it_never_recorded(
    live: Path, tmp_path: Path
) -> None:
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    elsewhere = copy_database(live, tmp_path / "elsewhere" / "console.sqlite3")
    manage_ok(elsewhere, "add_user", "mallory", "--role", "admin")  # a chain of its own
    foreign = tmp_path / "foreign.sqlite3"
    manage_ok(elsewhere, "backup", str(foreign))
    manage_ok(live, "add_user", "rita", "--role", "reviewer", **anchor)
    before = live_state(live)

    payload = manage_refused(live, "restore", str(foreign), "--yes", **anchor)

    assert payload["field"] == "FILE"
    assert NOT_ANCHORED in payload["error"]
    assert live_state(live) == before


def test_with_an_anchor_file_restore_refuses_a_backup_with_no_events(
    sqlite_database: Path, tmp_path: Path
) -> None:
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    empty = tmp_path / "empty.sqlite3"
    manage_ok(sqlite_database, "backup", str(empty))  # before anything was written
    manage_ok(sqlite_database, "add_user", "rita", "--role", "reviewer", **anchor)
    before = live_state(sqlite_database)

    payload = manage_refused(sqlite_database, "restore", str(empty), "--yes", **anchor)

    assert NOT_ANCHORED in payload["error"]
    assert live_state(sqlite_database) == before


def test_with_an_anchor_file_restore_takes_a_backup_of_its_own_history(
    live: Path, tmp_path: Path
) -> None:
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    backup = tmp_path / "backup.sqlite3"
    _, backed_up, _ = manage_all_ok(
        live,
        ["add_user", "rita", "--role", "reviewer"],
        ["backup", str(backup)],
        ["add_user", "late", "--role", "agent"],
        **anchor,
    )
    assert backed_up["anchored"] is True

    restored = manage_ok(live, "restore", str(backup), "--yes", **anchor)

    assert restored["events"] >= 2
    assert manage_ok(live, "verify_audit", **anchor)["ok"] is True


# restore: a backup without the guard, or cut at its end, is refused.


def triggers_dropped(conn: sqlite3.Connection) -> list[str]:
    """Drop every trigger of ``conn``'s database; the statements that made them."""
    found = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for name, _sql in found:
        conn.execute(f'DROP TRIGGER "{name}"')
    return [sql for _name, sql in found]


def tail_cut(backup: Path, events: int, *, guard_back: bool) -> None:
    """What the tables' owner can do to a backup: cut its last ``events`` events and as many
    chain heads, so what is left is an earlier, genuinely signed state of the chain."""
    with sqlite3.connect(backup) as conn:
        guard = triggers_dropped(conn)
        for table in AUDIT_TABLES:
            conn.execute(
                f"DELETE FROM {table} WHERE id IN "  # noqa: S608
                f"(SELECT id FROM {table} ORDER BY id DESC LIMIT ?)",
                [events],
            )
        if guard_back:
            for sql in guard:
                conn.execute(sql)
    conn.close()


def test_restore_refuses_a_backup_whose_guard_was_dropped(live: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup.sqlite3"
    manage_ok(live, "backup", str(backup))
    with sqlite3.connect(backup) as conn:
        conn.execute('DROP TRIGGER "reviewconsole_chainhead_no_update"')
    conn.close()
    manage_ok(live, "add_user", "late", "--role", "agent")
    before = live_state(live)

    payload = manage_refused(live, "restore", str(backup), "--yes")

    assert payload["field"] == "FILE"
    assert GUARD_MISSING.format(names="reviewconsole_chainhead_no_update") in payload["error"]
    assert live_state(live) == before


def test_restore_refuses_a_backup_whose_guard_was_dropped_and_tail_cut(
    live: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "backup.sqlite3"
    manage_all_ok(
        live,
        *[["add_user", name, "--role", "agent"] for name in ("a1", "a2", "a3")],
        ["backup", str(backup)],
    )
    tail_cut(backup, 2, guard_back=False)
    before = live_state(live)

    payload = manage_refused(live, "restore", str(backup), "--yes")

    assert payload["field"] == "FILE" and "guard" in payload["error"]
    assert live_state(live) == before
    assert manage_ok(live, "verify_audit")["ok"] is True


def test_with_an_anchor_file_restore_refuses_a_backup_cut_at_its_end(
    live: Path, tmp_path: Path
) -> None:
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    backup = tmp_path / "backup.sqlite3"
    manage_all_ok(
        live,
        *[["add_user", name, "--role", "agent"] for name in ("a1", "a2", "a3")],
        ["backup", str(backup)],
        **anchor,
    )
    tail_cut(backup, 2, guard_back=True)
    before = live_state(live)

    payload = manage_refused(live, "restore", str(backup), "--yes", **anchor)

    assert payload["field"] == "FILE"
    assert "no backup that the anchor file records ends" in payload["error"]
    assert live_state(live) == before


def test_with_an_anchor_file_restore_refuses_a_backup_it_did_not_record(
    live: Path, tmp_path: Path
) -> None:
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    manage_ok(live, "add_user", "rita", "--role", "reviewer", **anchor)
    backup = tmp_path / "backup.sqlite3"
    assert manage_ok(live, "backup", str(backup))["anchored"] is False  # no anchor file named

    payload = manage_refused(live, "restore", str(backup), "--yes", **anchor)

    assert "no backup that the anchor file records ends" in payload["error"]
