"""Migrations 0014 and 0015 of experience: every existing run keeps its stored id, and its name is
that id, so what was one run stays one run for the same owner and tenant; afterwards one owner has
one run per name and tenant. Run on a migrated SQLite file of its own, moved back and forth."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import manage_on_sqlite

BEFORE = "0013_merge_prompt_skills"
OPENED = "2026-10-01 04:00:00"


def migrate(database: Path, *target: str) -> None:
    result = manage_on_sqlite(database, "migrate", *target, "--noinput", "--verbosity", "0")
    assert result.returncode == 0, result.stderr + result.stdout


def test_existing_runs_are_named_by_their_stored_ids(sqlite_database: Path) -> None:
    migrate(sqlite_database, "experience", BEFORE)
    with closing(sqlite3.connect(sqlite_database)) as db, db:
        db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,"
            " email, is_staff, is_active, date_joined) VALUES ('!', 0, 'agent-1', '', '', '',"
            " 0, 1, ?)",
            [OPENED],
        )
        (owner,) = db.execute("SELECT id FROM auth_user WHERE username = 'agent-1'").fetchone()
        db.executemany(
            "INSERT INTO experience_runowner (run_id, owner_id, tenant, first_read_at)"
            " VALUES (?, ?, ?, ?)",
            [
                ("run-1", owner, "teahouse", OPENED),
                ("run-2", owner, "", OPENED),
                ("legacy-run", None, "teahouse", OPENED),
            ],
        )

    migrate(sqlite_database)

    with closing(sqlite3.connect(sqlite_database)) as db:
        rows = db.execute(
            "SELECT run_id, name, owner_id, tenant FROM experience_runowner ORDER BY run_id"
        ).fetchall()
        assert rows == [
            ("legacy-run", "legacy-run", None, "teahouse"),
            ("run-1", "run-1", owner, "teahouse"),
            ("run-2", "run-2", owner, ""),
        ]
        # The same name in another tenant is another run; the same owner, name and tenant twice
        # is refused by the database.
        db.execute(
            "INSERT INTO experience_runowner (run_id, name, owner_id, tenant, first_read_at)"
            " VALUES ('run-1~0badc0de', 'run-1', ?, 'other-tenant', ?)",
            [owner, OPENED],
        )
        with pytest.raises(sqlite3.IntegrityError):
            db.execute(
                "INSERT INTO experience_runowner (run_id, name, owner_id, tenant, first_read_at)"
                " VALUES ('run-1~12345678', 'run-1', ?, 'teahouse', ?)",
                [owner, OPENED],
            )
