"""Running one of our management commands on a fresh temporary SQLite database.

Demo replays load fixture memory and move the clock; they must never write to the configured
database. The outer process creates an empty SQLite file, runs ``manage.py <command>`` in a child
process pointed at it, and returns the child's JSON object. The child calls
``enter_temporary_database()`` first: it refuses unless its database is the file its parent
created, then migrates it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from reviewconsole.cli import CommandRefused
from reviewconsole.errors import ValidationFailure

# Set by the outer process for the inner one: the only database the inner one may write to.
TEMPORARY_DATABASE_ENV = "REVIEWCONSOLE_TEMPORARY_DATABASE"
# The hidden option that tells a command it is the inner process.
INNER_FLAG = "--inside-temporary-database"
NOT_TEMPORARY = "only runs on the temporary database the command itself creates"
PROCESS_FAILED = "the process on the temporary database failed: {stderr}"
REFUSAL_KEYS = frozenset({"ok", "error", "field"})


def run_on_temporary_database(command: str, *arguments: str, timeout: int) -> dict[str, Any]:
    """``manage.py COMMAND INNER_FLAG ARGUMENTS --json`` on a temporary database; its JSON object.

    The database is deleted afterwards. A refusal of the inner process is raised again here with
    the same field (or its whole JSON object when it carries more than an error and a field).
    """
    with tempfile.TemporaryDirectory(prefix=f"{command}-") as directory:
        database = Path(directory) / "temporary.sqlite3"
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{database}",
            TEMPORARY_DATABASE_ENV: str(database),
        }
        completed = subprocess.run(  # noqa: S603 - our own manage.py, fixed arguments
            [
                sys.executable,
                str(Path(settings.BASE_DIR) / "manage.py"),
                command,
                INNER_FLAG,
                *arguments,
                "--json",
                # Checks of unrelated apps (URLs, templates) must not block the inner command.
                "--skip-checks",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    try:
        result = json.loads(completed.stdout)
    except json.JSONDecodeError:
        result = None
    if completed.returncode == 0 and isinstance(result, dict):
        return result
    if isinstance(result, dict) and result.get("error"):
        if set(result) <= REFUSAL_KEYS:
            raise ValidationFailure(str(result.get("field") or command), str(result["error"]))
        raise CommandRefused(str(result["error"]), result)
    raise ValidationFailure(command, PROCESS_FAILED.format(stderr=completed.stderr.strip()[-2000:]))


def enter_temporary_database() -> None:
    """In the inner process: refuse unless the database is the parent's temporary one; migrate."""
    configured = str(connections["default"].settings_dict["NAME"])
    expected = os.environ.get(TEMPORARY_DATABASE_ENV)
    if not expected or configured != expected:
        raise ValidationFailure(INNER_FLAG, NOT_TEMPORARY)
    call_command("migrate", verbosity=0, interactive=False)
