"""Several ``manage.py`` commands one after another in one process, as a shell user would run
them one by one, without a process start (Django's and the project's imports) for each:

    python -m tests.manage_many '[["add_user", "rita", "--role", "reviewer"], ["backup", "F"]]'

prints one JSON list on stdout, per command ``{"status": EXIT STATUS, "stdout": ITS OUTPUT}``;
the commands' stderr passes through. Use it where a test's subject is not that each command
starts a process of its own (tests/helpers.py, ``manage_many_on_sqlite``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys


def main() -> None:
    commands: list[list[str]] = json.loads(sys.argv[1])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django
    from django.core.management import execute_from_command_line
    from django.db import connections

    django.setup()
    answers = []
    for command in commands:
        out = io.StringIO()
        status = 0
        with contextlib.redirect_stdout(out):
            try:
                execute_from_command_line(["manage.py", *command])
            except SystemExit as exit_:
                code = exit_.code
                status = code if isinstance(code, int) else (0 if code is None else 1)
        # The next command opens the database afresh, as a new process would.
        connections.close_all()
        answers.append({"status": status, "stdout": out.getvalue()})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
