"""``manage.py ARGS`` that stops in the middle of its write, for a test to kill it there.

    python -m tests.reviewconsole.held_command WAL_BYTES ARGS...

runs the management command ``ARGS`` as ``manage.py`` does. Once the command, inside its
transaction, has grown the SQLite write-ahead log past ``WAL_BYTES`` (so uncommitted pages are in
the log, not only in memory), it prints ``writing`` and waits on its standard input: the test
kills it there, rather than guessing when a long enough import is far enough along.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

WRITING = "writing"


def main() -> None:
    wal_bytes, arguments = int(sys.argv[1]), sys.argv[2:]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import execute_from_command_line
    from django.db import connection

    wal = Path(f"{connection.settings_dict['NAME']}-wal")

    def held(execute: Callable[..., Any], *call: Any) -> Any:
        result = execute(*call)
        if connection.in_atomic_block and wal.exists() and wal.stat().st_size > wal_bytes:
            print(WRITING, flush=True)
            sys.stdin.read()  # until the test kills this process (or goes away itself)
        return result

    with connection.execute_wrapper(held):
        execute_from_command_line(["manage.py", *arguments])


if __name__ == "__main__":
    main()
