"""``python tests/mcp/manage_with_rate_clock.py ARGS``: ``manage.py ARGS`` with the agent API's
limits (``agentapi.limits``) reading a clock that stands still at the instant in
``RATE_CLOCK_AT`` (ISO 8601), for a server a test starts in a process of its own.

Every request of an account then counts in one rate window that cannot elapse, however slowly a
loaded machine answers: a test can count ``RATE + 1`` calls against it and know the last one's
``retry_after`` exactly. The rest of the server reads the real clock."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    from agentapi import limits

    at = datetime.fromisoformat(os.environ["RATE_CLOCK_AT"])
    vars(limits)["clock"] = SimpleNamespace(now=lambda: at)
    execute_from_command_line([sys.argv[0], *sys.argv[1:]])


if __name__ == "__main__":
    main()
