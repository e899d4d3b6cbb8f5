"""Background tasks on the database backend with real worker processes: a worker killed in the
middle of a task leaves it to run again, and it writes once; a failing task retries with backoff
and every failure stays visible."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django_tasks import TaskResultStatus

from reviewconsole.background import retry_delay
from tests.helpers import ROOT, manage_on_sqlite

DB_BACKEND = {"CONSOLE_TASKS_BACKEND": "django_tasks_db.DatabaseBackend"}
TASKS = "django_tasks_database_dbtaskresult"
# How long a worker may take to reach the held task before the test fails; the wait ends when it
# gets there.
DEADLINE_SECONDS = 120


def enqueue(db: Path, code: str) -> None:
    """Enqueue a task on ``db`` from a shell process, as a deployment's code would."""
    result = manage_on_sqlite(db, "shell", "--no-imports", "-c", code, **DB_BACKEND)
    assert result.returncode == 0, result.stderr


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """What ``db`` holds, read as any program reads the file once the workers have exited."""
    with closing(sqlite3.connect(db)) as connection:
        return connection.execute(sql, params).fetchall()


def events(db: Path, marker: str) -> int:
    return int(rows(db, "SELECT count(*) FROM reviewconsole_event WHERE target = ?", marker)[0][0])


def task_status(db: Path, task_name: str) -> str:
    [(status,)] = rows(db, f"SELECT status FROM {TASKS} WHERE task_path LIKE ?", f"%.{task_name}")  # noqa: S608
    return str(status)


def killed(worker: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


@pytest.fixture
def hold(tmp_path: Path) -> Iterator[socket.socket]:
    """The socket a held task reports to (background_tasks.held), at ``hold.sock``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(tmp_path / "hold.sock"))
        listener.listen(1)
        listener.settimeout(DEADLINE_SECONDS)
        yield listener


def test_a_killed_worker_leaves_the_task_to_run_again_and_it_writes_once(
    sqlite_database: Path, hold: socket.socket
) -> None:
    address = hold.getsockname()
    enqueue(
        sqlite_database,
        "from tests.reviewconsole.background_tasks import slow_write; "
        f"slow_write.enqueue('m1', {address!r})",
    )
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "worker", "--interval", "0.1", "--no-startup-delay"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"sqlite:///{sqlite_database}", **DB_BACKEND},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        task, _ = hold.accept()  # the task is inside its transaction, waiting on us
        with task:
            task.settimeout(DEADLINE_SECONDS)
            assert task.recv(16) == b"1\n"
            killed(worker)  # while its task still waits on this connection
    finally:
        killed(worker)
    assert events(sqlite_database, "background-test:m1") == 0  # nothing of it was committed
    assert task_status(sqlite_database, "slow_write") == TaskResultStatus.RUNNING
    hold.close()
    Path(address).unlink()  # the second attempt finds no one to wait on
    result = manage_on_sqlite(
        sqlite_database, "worker", "--batch", "--lease", "0", "--no-startup-delay", **DB_BACKEND
    )
    assert result.returncode == 0, result.stderr
    assert "re-queued 1 task" in result.stdout
    assert task_status(sqlite_database, "slow_write") == TaskResultStatus.SUCCESSFUL
    assert events(sqlite_database, "background-test:m1") == 1
    # Running the queue again finds nothing to do and writes nothing more.
    manage_on_sqlite(sqlite_database, "worker", "--batch", "--no-startup-delay", **DB_BACKEND)
    assert events(sqlite_database, "background-test:m1") == 1


def test_a_failing_task_retries_with_backoff_and_its_failures_stay_visible(
    sqlite_database: Path,
) -> None:
    enqueue(
        sqlite_database,
        "from tests.reviewconsole.background_tasks import flaky; flaky.enqueue('m2', 2)",
    )
    env = {**DB_BACKEND, "CONSOLE_TASK_RETRY_BASE_SECONDS": "0"}
    for _ in range(3):
        result = manage_on_sqlite(sqlite_database, "worker", "--batch", "--no-startup-delay", **env)
        assert result.returncode == 0, result.stderr
    attempts = rows(
        sqlite_database,
        f"SELECT args_kwargs, status, exception_class_path FROM {TASKS} WHERE task_path LIKE ?",  # noqa: S608
        "%.flaky",
    )
    assert sorted(
        (json.loads(arguments)["kwargs"].get("attempt", 1), status, exception)
        for arguments, status, exception in attempts
    ) == [
        (1, "FAILED", "builtins.RuntimeError"),
        (2, "FAILED", "builtins.RuntimeError"),
        (3, "SUCCESSFUL", ""),
    ]


@pytest.mark.parametrize(("attempt", "seconds"), [(1, 10), (2, 20), (3, 40)])
def test_backoff_doubles(attempt: int, seconds: int) -> None:
    assert retry_delay(attempt) == timedelta(seconds=seconds)


def test_a_worker_keeps_one_curation_scan_queued(sqlite_database: Path) -> None:
    for _ in range(2):
        result = manage_on_sqlite(
            sqlite_database, "worker", "--batch", "--no-startup-delay", **DB_BACKEND
        )
        assert result.returncode == 0, result.stderr
    now = datetime.now(UTC)
    scans = rows(
        sqlite_database,
        f"SELECT status, run_after FROM {TASKS} WHERE task_path = ?",  # noqa: S608
        "curation.tasks.curation_scan_task",
    )
    # The first worker queued a scan due now and ran it, which queued the next one an interval
    # later; the second worker found that one waiting and queued no other.
    assert sorted(
        (status, datetime.fromisoformat(run_after).replace(tzinfo=UTC) <= now)
        for status, run_after in scans
    ) == [("READY", False), ("SUCCESSFUL", True)]
