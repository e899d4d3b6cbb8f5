"""Running management commands as a user's script would: ``--json`` and an exit status."""

from __future__ import annotations

import io
import json
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
