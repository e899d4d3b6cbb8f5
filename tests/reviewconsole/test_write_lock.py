"""SQLite holds under its own worker (issue 39, item 15): a command run while a worker works
through a queue of writing tasks on the same file waits its turn for the write lock and
succeeds; a write that still meets the lock runs again, and a command that cannot get it says so
in one sentence, not a traceback. (That a worker's task runs the embedding model before it takes
the lock: tests/experience/lessons/test_meaning_outside_lock.py.)"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, suppress
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection, transaction

from reviewconsole.writelock import LOCKED_MESSAGE, write_retried, writer_turn
from tests.helpers import ROOT, manage_on_sqlite

DB_BACKEND = {"CONSOLE_TASKS_BACKEND": "django_tasks_db.DatabaseBackend"}
TASKS = "django_tasks_database_dbtaskresult"
# Each queued task holds the write lock this long; the queue keeps the worker busy for far longer
# than the command needs, and longer than the busy timeout (20 s).
HOLD_SECONDS = 3.0
QUEUED = 20
DEADLINE_SECONDS = 120


def ready_tasks(db: Path) -> int:
    query = f"SELECT count(*) FROM {TASKS} WHERE status = 'READY'"  # noqa: S608
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(query).fetchone()[0])


@pytest.fixture
def busy_worker(sqlite_database: Path, tmp_path: Path) -> Iterator[Path]:
    """A ``manage.py worker`` process working through ``QUEUED`` tasks that each hold the write
    lock; yields once its first task has reported from inside its transaction."""
    report = tmp_path / "busy.sock"
    code = (
        "from tests.reviewconsole.background_tasks import busy_write\n"
        f"busy_write.enqueue('first', {HOLD_SECONDS}, {str(report)!r})\n"
        f"for n in range({QUEUED - 1}): busy_write.enqueue(f'm{{n}}', {HOLD_SECONDS})\n"
    )
    queued = manage_on_sqlite(sqlite_database, "shell", "--no-imports", "-c", code, **DB_BACKEND)
    assert queued.returncode == 0, queued.stderr
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(report))
        listener.listen(1)
        listener.settimeout(DEADLINE_SECONDS)
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--interval", "0.1", "--no-startup-delay"],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": f"sqlite:///{sqlite_database}", **DB_BACKEND},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            busy, _ = listener.accept()  # the worker's first task holds the lock now
            busy.close()
            yield sqlite_database
        finally:
            with suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)


def test_a_command_racing_a_busy_worker_on_the_same_file_succeeds(busy_worker: Path) -> None:
    result = manage_on_sqlite(busy_worker, "add_tenant", "acme", "--json")

    assert result.returncode == 0, result.stderr + result.stdout
    assert '"acme"' in result.stdout
    # It raced the worker: the queue was still being worked through when it finished.
    assert ready_tasks(busy_worker) > 0
    with closing(sqlite3.connect(busy_worker)) as conn:
        assert conn.execute(
            "SELECT count(*) FROM reviewconsole_tenant WHERE name = 'acme'"
        ).fetchone() == (1,)


def test_the_worker_leaves_the_lock_free_between_tasks_longer_than_sqlites_busy_step() -> None:
    # SQLite's busy handler looks at the lock at most every 100 ms; PostgreSQL queues fairly.
    if connection.vendor == "sqlite":
        assert writer_turn() > 0.1
    else:
        assert writer_turn() == 0


# --- a write that meets the lock ----------------------------------------------------------------


def test_a_write_that_meets_the_lock_runs_again_outside_a_transaction() -> None:
    attempts = []

    @write_retried
    def write() -> str:
        attempts.append(1)
        if len(attempts) < 2:
            raise OperationalError("database is locked")
        return "written"

    with patched_atomic_depth(False):
        assert write() == "written"
    assert len(attempts) == 2


@pytest.mark.django_db
def test_inside_a_callers_transaction_a_locked_write_is_not_run_again() -> None:
    attempts = []

    @write_retried
    def write() -> None:
        attempts.append(1)
        raise OperationalError("database is locked")

    with transaction.atomic(), pytest.raises(OperationalError):
        write()
    assert len(attempts) == 1


def test_other_database_errors_are_not_retried() -> None:
    attempts = []

    @write_retried
    def write() -> None:
        attempts.append(1)
        raise OperationalError("no such table: x")

    with patched_atomic_depth(False), pytest.raises(OperationalError):
        write()
    assert len(attempts) == 1


class patched_atomic_depth:
    """``connection.in_atomic_block`` as given, for the duration (the test's own transaction
    would otherwise say True)."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def __enter__(self) -> None:
        self.saved = connection.in_atomic_block
        connection.in_atomic_block = self.value

    def __exit__(self, *exc: object) -> None:
        connection.in_atomic_block = self.saved


@pytest.mark.django_db
def test_a_command_that_cannot_get_the_lock_says_so_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reviewconsole.management.commands import add_tenant

    def locked(**options: Any) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(add_tenant.Command, "execute_json", lambda self, **o: locked(**o))
    with pytest.raises(CommandError) as refused:
        call_command("add_tenant", "acme")
    assert str(refused.value) == LOCKED_MESSAGE
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("add_tenant", "acme", "--json", stdout=out)
    assert out.getvalue().strip() == '{"ok": false, "error": "' + LOCKED_MESSAGE + '"}'
