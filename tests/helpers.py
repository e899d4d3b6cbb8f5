"""Running management commands as a user's script would: ``--json`` and an exit status."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.backends.base.base import BaseDatabaseWrapper

from reviewconsole import clock
from reviewconsole.guard import AUDIT_TABLES


@contextmanager
def clock_frozen(at: datetime) -> Iterator[None]:
    """``reviewconsole.clock.now()`` returns ``at`` inside the block; the previous clock is back
    after it, also when the block raises; blocks nest. For tests only: production code never
    sets the clock, it passes its moment down."""
    previous = clock.now

    def frozen_now() -> datetime:
        return at

    clock.now = frozen_now
    try:
        yield
    finally:
        clock.now = previous


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    """(exit status, the one JSON object on stdout) of ``manage.py ARGS --json``."""
    out = io.StringIO()
    try:
        call_command(*args, "--json", stdout=out, stderr=io.StringIO())
        status = 0
    except CommandError:
        status = 1
    text = out.getvalue().strip()
    assert text.count("\n") == 0, f"stdout holds more than one line: {text!r}"
    return status, json.loads(text)


ROOT = Path(__file__).resolve().parents[1]

# The tenants of the tests' world, registered for every test that uses the database
# (tests/conftest.py, ``fixture_tenants``), as ``add_tenant`` registers a deployment's own. A test
# of the registry itself names tenants outside this list.
FIXTURE_TENANTS = (
    "teahouse",
    "milkbar",
    "coffeehouse",
    "acme",
    "other",
    "othertea",
    "other-co",
    "other-tenant",
    "another-tenant",
    "rival",
    "other-value",
    "riverside",
)


def tenants_exist(*names: str) -> None:
    """Register ``names`` as tenants (no audit event: the fixture world, not an act)."""
    from django.utils import timezone

    from reviewconsole.models import Tenant

    Tenant.objects.bulk_create(
        [Tenant(name=name, created_at=timezone.now()) for name in names], ignore_conflicts=True
    )


def manage_on_sqlite(db: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in a separate process on the SQLite file ``db``, as a shell user runs it."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", **extra_env}
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def manage_many_on_sqlite(
    db: Path, *commands: list[str], **extra_env: str
) -> list[subprocess.CompletedProcess[str]]:
    """``manage.py`` COMMANDS one after another in ONE separate process on the SQLite file
    ``db`` (tests/manage_many.py): one process start instead of one per command, for a test
    whose subject is what the commands leave in the file, not that each starts afresh. One
    result per command run (exit status and stdout; stderr is the process's)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", **extra_env}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "tests.manage_many", json.dumps(list(commands))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return [
        subprocess.CompletedProcess(command, answer["status"], answer["stdout"], done.stderr)
        for command, answer in zip(commands, json.loads(done.stdout), strict=True)
    ]


def made_once(path: Path, make: Callable[[Path], None]) -> Path:
    """``path``, which ``make(building)`` writes at ``building`` the first time it is asked for.

    Processes that share ``path``'s folder (pytest-xdist workers) take turns under a file lock,
    so the first makes the file and the others find it; a ``make`` that fails leaves nothing, and
    the next process to ask tries again.
    """
    with path.with_name(path.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            building = path.with_name(path.name + ".building")
            building.unlink(missing_ok=True)
            make(building)
            building.rename(path)
    return path


def migrated_sqlite_template(folder: Path) -> Path:
    """A SQLite file that ``manage.py migrate`` made, built once in ``folder`` and reused."""

    def migrate(building: Path) -> None:
        result = manage_on_sqlite(building, "migrate", "--noinput", "--verbosity", "0")
        assert result.returncode == 0, result.stderr + result.stdout
        # Fold the write-ahead log into the file, so the file alone is the whole database.
        with closing(sqlite3.connect(building)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    return made_once(folder / "migrated.sqlite3", migrate)


def json_made_once(path: Path, make: Callable[[], Any]) -> Any:
    """What ``make()`` returns, JSON-encoded once at ``path`` (see ``made_once``) and read back."""

    def write(building: Path) -> None:
        building.write_text(json.dumps(make()), encoding="utf-8")

    made_once(path, write)
    return json.loads(path.read_text(encoding="utf-8"))


def copy_database(template: Path, db: Path) -> Path:
    """``db``, a copy of ``template``: a migrated database without running the migrations."""
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, db)
    return db


@contextmanager
def audit_guards_lifted(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """The audit tables without their guards, inside the caller's transaction, as only the
    tables' owner can have them: the test harness flushing its own database between tests.

    The triggers have no switch an ordinary session could use (reviewconsole migration 0011);
    PostgreSQL lets the owner disable them (``ALTER TABLE … DISABLE TRIGGER``) and enable them
    again as they were, firing always (migration 0013); SQLite lets whoever holds the file drop
    and recreate them. The application never does either, and its role cannot.
    """
    present = [t for t in AUDIT_TABLES if t in connection.introspection.table_names()]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, t.tgname, t.tgenabled FROM pg_trigger t "
                "JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND c.relname = ANY(%s) "
                "AND c.relnamespace = to_regnamespace(current_schema())",
                [present],
            )
            triggers = cursor.fetchall()
            for table in present:
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            yield
            enabled = {"A": "ENABLE ALWAYS", "R": "ENABLE REPLICA", "O": "ENABLE", "D": "DISABLE"}
            for table, name, state in triggers:
                cursor.execute(f'ALTER TABLE {table} {enabled[state]} TRIGGER "{name}"')
            return
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (%s, %s)",
            list(AUDIT_TABLES),
        )
        triggers = cursor.fetchall()
        for name, _sql in triggers:
            cursor.execute(f'DROP TRIGGER "{name}"')
        yield
        for _name, sql in triggers:
            cursor.execute(sql)
