"""Running management commands as a user's script would: ``--json`` and an exit status."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError


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
