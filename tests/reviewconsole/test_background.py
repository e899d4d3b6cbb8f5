"""Background tasks on the database backend with real worker processes: a worker killed in the
middle of a task leaves it to run again, and it writes once; a failing task retries with backoff
and every failure stays visible."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django_tasks import TaskResultStatus

from reviewconsole.background import retry_delay
from tests.helpers import ROOT, manage_on_sqlite

DB_BACKEND = {"CONSOLE_TASKS_BACKEND": "django_tasks_db.DatabaseBackend"}


def shell(db: Path, code: str) -> str:
    result = manage_on_sqlite(db, "shell", "--no-imports", "-c", code, **DB_BACKEND)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_killed_worker_leaves_the_task_to_run_again_and_it_writes_once(
    sqlite_database: Path, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.write_text("")
    shell(
        sqlite_database,
        "from tests.reviewconsole.background_tasks import slow_write; "
        f"slow_write.enqueue('m1', {str(hold)!r})",
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
        wait_for(Path(f"{hold}.started"))  # the task is inside its transaction
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    count = (
        "from reviewconsole.models import Event; "
        "print(Event.objects.filter(target='background-test:m1').count())"
    )
    assert shell(sqlite_database, count) == "0"  # nothing of the killed attempt was committed
    status = (
        "from django_tasks_db.models import DBTaskResult; "
        "print(DBTaskResult.objects.get(task_path__endswith='.slow_write').status)"
    )
    assert shell(sqlite_database, status) == TaskResultStatus.RUNNING
    hold.unlink()
    result = manage_on_sqlite(
        sqlite_database, "worker", "--batch", "--lease", "0", "--no-startup-delay", **DB_BACKEND
    )
    assert result.returncode == 0, result.stderr
    assert "re-queued 1 task" in result.stdout
    assert shell(sqlite_database, status) == TaskResultStatus.SUCCESSFUL
    assert shell(sqlite_database, count) == "1"
    # Running the queue again finds nothing to do and writes nothing more.
    manage_on_sqlite(sqlite_database, "worker", "--batch", "--no-startup-delay", **DB_BACKEND)
    assert shell(sqlite_database, count) == "1"


def test_a_failing_task_retries_with_backoff_and_its_failures_stay_visible(
    sqlite_database: Path,
) -> None:
    shell(
        sqlite_database,
        "from tests.reviewconsole.background_tasks import flaky; flaky.enqueue('m2', 2)",
    )
    env = {**DB_BACKEND, "CONSOLE_TASK_RETRY_BASE_SECONDS": "0"}
    for _ in range(3):
        result = manage_on_sqlite(sqlite_database, "worker", "--batch", "--no-startup-delay", **env)
        assert result.returncode == 0, result.stderr
    rows = shell(
        sqlite_database,
        "from django_tasks_db.models import DBTaskResult; "
        "print(sorted((r.args_kwargs['kwargs'].get('attempt', 1), r.status, "
        "r.exception_class_path) for r in "
        "DBTaskResult.objects.filter(task_path__endswith='.flaky')))",
    )
    assert rows == str(
        [
            (1, "FAILED", "builtins.RuntimeError"),
            (2, "FAILED", "builtins.RuntimeError"),
            (3, "SUCCESSFUL", ""),
        ]
    )


@pytest.mark.parametrize(("attempt", "seconds"), [(1, 10), (2, 20), (3, 40)])
def test_backoff_doubles(attempt: int, seconds: int) -> None:
    assert retry_delay(attempt) == timedelta(seconds=seconds)


def test_a_worker_keeps_one_curation_scan_queued(sqlite_database: Path) -> None:
    waiting = (
        "from django_tasks_db.models import DBTaskResult; from django.utils import timezone; "
        "rows = DBTaskResult.objects.filter(task_path='curation.tasks.curation_scan_task'); "
        "print(sorted((r.status, r.run_after <= timezone.now()) for r in rows))"
    )
    for _ in range(2):
        result = manage_on_sqlite(
            sqlite_database, "worker", "--batch", "--no-startup-delay", **DB_BACKEND
        )
        assert result.returncode == 0, result.stderr
    # The first worker queued a scan due now and ran it, which queued the next one an interval
    # later; the second worker found that one waiting and queued no other.
    assert shell(sqlite_database, waiting) == str([("READY", False), ("SUCCESSFUL", True)])
