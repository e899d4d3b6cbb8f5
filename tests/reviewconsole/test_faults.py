"""Faults: a killed import leaves nothing; backup and restore; migrations both ways.

These run real processes against a SQLite file, as an operator's shell would.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, manage_many_on_sqlite, manage_on_sqlite
from tests.reviewconsole.held_command import WRITING

# The killed import: its write-ahead log gets uncommitted pages once its changes outgrow SQLite's
# page cache (about 650 of these documents), and passes WAL_BYTES some 100 documents later.
IMPORTED = 2_000
WAL_BYTES = 256 * 1024
DEADLINE_SECONDS = 300
HELD = [sys.executable, "-m", "tests.reviewconsole.held_command"]


def manage(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = manage_on_sqlite(db, *args)
    if check:
        assert result.returncode == 0, result.stderr + result.stdout
    return result


def count(db: Path, table: str) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608


@pytest.fixture
def database(sqlite_database: Path) -> Path:
    manage(sqlite_database, "add_user", "olivia", "--role", "operator")
    return sqlite_database


def big_import(tmp_path: Path, n: int) -> Path:
    items = [
        {
            "doc_key": f"bulk-{i}",
            "version": 1,
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "stores": [f"store-{i % 50:03d}"],
            "campaign": f"campaign-{i % 7}",
            "kind": "rule",
            "title": f"批量规则 {i}",
            "text": "优惠券仅限小程序下单使用，活动商品满30元可用。" * 3,
            "source": f"fixture://bulk/{i}",
            "valid_from": "2026-09-01T00:00:00+08:00",
            "valid_to": None,
            "published_at": "2026-08-31T00:00:00+08:00",
            "approved": True,
            "revoked": False,
            "requirements": {"channel": ["miniapp"]},
        }
        for i in range(n)
    ]
    path = tmp_path / "bulk.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_killed_import_leaves_nothing_behind(database: Path, tmp_path: Path) -> None:
    path = big_import(tmp_path, IMPORTED)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    # The import stops once its write-ahead log holds WAL_BYTES of uncommitted pages and says
    # so; it is killed outright there.
    process = subprocess.Popen(  # noqa: S603
        [*HELD, str(WAL_BYTES), "import_knowledge", str(path), "--as", "olivia"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    try:
        # A deadline for a hang only: the wait ends when the import says it is writing, or ends.
        ready, _, _ = select.select([process.stdout], [], [], DEADLINE_SECONDS)
        said = process.stdout.readline() if ready else ""
        assert said.strip() == WRITING, "the import finished before it could be interrupted"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        process.stdout.close()
        process.stdin.close()  # type: ignore[union-attr]

    assert count(database, "knowledge_document") == 0
    assert count(database, "knowledge_documentstore") == 0
    assert count(database, "reviewconsole_event") == 1  # only add_user's
    assert json.loads(manage(database, "verify_audit", "--json").stdout)["ok"] is True


def test_backup_then_restore_returns_to_the_backed_up_state(database: Path, tmp_path: Path) -> None:
    manage(
        database, "import_knowledge", str(ROOT / "fixtures" / "knowledge.json"), "--as", "olivia"
    )
    documents = count(database, "knowledge_document")
    backup = tmp_path / "backup.sqlite3"

    result = json.loads(manage(database, "backup", str(backup), "--json").stdout)
    assert result["ok"] is True and backup.exists()

    manage(database, "add_user", "late", "--role", "agent")
    assert count(database, "auth_user") == 2

    refused = manage(database, "restore", str(backup), "--json", check=False)
    assert refused.returncode != 0 and json.loads(refused.stdout)["field"] == "--yes"

    manage(database, "restore", str(backup), "--yes")
    assert count(database, "auth_user") == 1
    assert count(database, "knowledge_document") == documents
    assert json.loads(manage(database, "verify_audit", "--json").stdout)["ok"] is True


def test_backup_refuses_to_overwrite(database: Path, tmp_path: Path) -> None:
    existing = tmp_path / "taken.sqlite3"
    existing.write_text("keep me")

    result = manage(database, "backup", str(existing), "--json", check=False)

    assert result.returncode != 0 and json.loads(result.stdout)["field"] == "OUTPUT"
    assert existing.read_text() == "keep me"


def test_restore_refuses_a_file_that_is_not_a_console_backup(
    database: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.sqlite3"
    import sqlite3

    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")

    result = manage(database, "restore", str(other), "--yes", "--json", check=False)

    assert result.returncode != 0 and json.loads(result.stdout)["field"] == "FILE"
    assert count(database, "auth_user") == 1


def test_migrations_run_backwards_and_forwards(database: Path) -> None:
    # Once each way, in one process: the subject is the migrations, not a process per command.
    backwards = [
        ["migrate", app, "zero", "--noinput"]
        for app in ("agentapi", "experience", "knowledge", "reviewconsole")
    ]
    forwards = [["migrate", "--noinput"], ["add_user", "again", "--role", "reviewer"]]
    for done in manage_many_on_sqlite(database, *backwards, *forwards):
        assert done.returncode == 0, (done.args, done.stderr + done.stdout)
    assert count(database, "auth_group") == 4
