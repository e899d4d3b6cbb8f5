"""Restore checks a backup before replacing anything, and records itself in the audit log.

These run real processes against SQLite files, as an operator's shell would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.helpers import copy_database, manage_many_on_sqlite, manage_on_sqlite


def manage(db: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return manage_on_sqlite(db, *args, **extra_env)


def all_ok(db: Path, *commands: list[str], **extra_env: str) -> None:
    """``commands`` one after another in one process, each succeeding: the steps before the
    backup or restore a test is about need not each start a process of their own."""
    for result in manage_many_on_sqlite(db, *commands, **extra_env):
        ok(result)


def ok(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr + result.stdout
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def refused(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """A refusal under ``--json``: non-zero exit and exactly one JSON object on stdout."""
    assert result.returncode != 0, result.stdout
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    payload: dict[str, object] = json.loads(lines[0])
    assert payload["ok"] is False
    assert "Traceback" not in result.stderr, result.stderr
    return payload


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute(sql).fetchall())


def state(db: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    return (
        rows(db, "SELECT username FROM auth_user ORDER BY id"),
        rows(db, "SELECT id, hash FROM reviewconsole_event ORDER BY id"),
    )


def tamper(db: Path, *statements: str) -> None:
    """Raw edits by someone who first drops the audit tables' triggers."""
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
        for name in names:
            conn.execute(f'DROP TRIGGER "{name}"')
        for statement in statements:
            conn.execute(statement)


@pytest.fixture(scope="module")
def template(migrated_sqlite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = copy_database(migrated_sqlite, tmp_path_factory.mktemp("template") / "console.sqlite3")
    all_ok(
        db,
        ["add_user", "olivia", "--role", "operator", "--json"],
        ["add_user", "rita", "--role", "reviewer", "--json"],
    )
    return db


@pytest.fixture
def live(template: Path, tmp_path: Path) -> Path:
    db = tmp_path / "live" / "console.sqlite3"
    db.parent.mkdir()
    shutil.copy(template, db)
    return db


@pytest.fixture
def backup(live: Path, tmp_path: Path) -> Path:
    """A backup of ``live``, after which ``live`` moves on (one more user)."""
    path = tmp_path / "backups" / "console-backup.sqlite3"
    path.parent.mkdir()
    all_ok(live, ["backup", str(path), "--json"], ["add_user", "late", "--role", "agent", "--json"])
    return path


def test_a_backup_with_an_edited_audit_row_is_refused(live: Path, backup: Path) -> None:
    tamper(backup, "UPDATE reviewconsole_event SET reason = 'rewritten' WHERE id = 1")
    before = state(live)

    payload = refused(manage(live, "restore", str(backup), "--yes", "--json"))

    assert payload["field"] == "FILE"
    assert "audit" in str(payload["error"])
    assert state(live) == before


def test_a_backup_missing_its_last_event_is_refused(live: Path, backup: Path) -> None:
    tamper(
        backup,
        "DELETE FROM reviewconsole_event WHERE id = (SELECT max(id) FROM reviewconsole_event)",
    )
    before = state(live)

    payload = refused(manage(live, "restore", str(backup), "--yes", "--json"))

    assert payload["field"] == "FILE"
    assert state(live) == before


@pytest.mark.parametrize("content", ["random", "truncated"])
def test_a_file_that_is_not_an_intact_database_is_refused(
    live: Path, backup: Path, tmp_path: Path, content: str
) -> None:
    bad = tmp_path / "bad.sqlite3"
    if content == "random":
        bad.write_bytes(os.urandom(64 * 1024))
    else:
        data = backup.read_bytes()
        bad.write_bytes(data[: len(data) // 2])
    before = state(live)

    payload = refused(manage(live, "restore", str(bad), "--yes", "--json"))

    assert payload["field"] == "FILE"
    assert state(live) == before


def test_a_restore_is_recorded_in_the_restored_audit_log(live: Path, backup: Path) -> None:
    digest = hashlib.sha256(backup.read_bytes()).hexdigest()
    backed_up_events = rows(backup, "SELECT id, hash FROM reviewconsole_event ORDER BY id")

    ok(manage(live, "restore", str(backup), "--yes", "--json"))

    events = rows(live, "SELECT id, hash, action, details FROM reviewconsole_event ORDER BY id")
    assert [e[:2] for e in events[:-1]] == backed_up_events
    _, _, action, details = events[-1]
    assert action == "reviewconsole.backup.restore"
    assert json.loads(str(details))["sha256"] == digest
    assert rows(live, "SELECT username FROM auth_user WHERE username = 'late'") == []
    assert ok(manage(live, "verify_audit", "--json"))["ok"] is True


@pytest.mark.parametrize("name", ["nightly#1.sqlite3", "what?mode=ro.sqlite3", "a#b?c.sqlite3"])
def test_backup_file_names_with_uri_characters(live: Path, tmp_path: Path, name: str) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    path = folder / name

    ok(manage(live, "backup", str(path), "--json"))
    assert sorted(p.name for p in folder.iterdir()) == [name]

    ok(manage(live, "add_user", "late", "--role", "agent", "--json"))
    ok(manage(live, "restore", str(path), "--yes", "--json"))

    assert sorted(p.name for p in folder.iterdir()) == [name]
    assert rows(live, "SELECT username FROM auth_user WHERE username = 'late'") == []


def test_a_restore_restarts_the_anchor_file_at_the_backup(live: Path, tmp_path: Path) -> None:
    # The anchor file records heads the older backup does not reach; the restore says so in it.
    anchor = {"AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl")}
    backup = tmp_path / "backup.sqlite3"
    all_ok(
        live,
        ["add_user", "early", "--role", "agent", "--json"],
        ["backup", str(backup), "--json"],
        ["add_user", "late", "--role", "agent", "--json"],
        **anchor,
    )

    ok(manage(live, "restore", str(backup), "--yes", "--json", **anchor))

    assert ok(manage(live, "verify_audit", "--json", **anchor))["ok"] is True
    records = [json.loads(line) for line in Path(anchor["AUDIT_ANCHOR_FILE"]).read_text().split()]
    # early's head, the backup's record of it, late's head, the restart, the restore's event
    kinds = [
        "backup" if r.get("backup") else "restore" if r.get("restore") else "head" for r in records
    ]
    assert kinds == ["head", "backup", "head", "restore", "head"]
    assert records[1]["event_id"] == records[0]["event_id"] == records[3]["event_id"]
