"""SQLite's one write lock, shared by the web server, the worker and commands on one file.

The settings open every SQLite connection in WAL mode (readers never wait), with a busy timeout
(a writer waits for the lock instead of failing at once) and ``transaction_mode="IMMEDIATE"``
(a transaction takes the write lock when it begins, so it waits there, on the timeout, rather
than failing halfway when it first writes). What is left is here:

- :func:`write_retried` runs a function that opens its own write transaction again when that
  transaction still met a locked database after the whole busy timeout: nothing of it was
  written (it rolled back), so running it again writes once.
- :func:`writer_turn` is how long a worker waits between two tasks on SQLite: longer than
  SQLite's busy-wait step (100 ms), so a command or a request waiting for the lock gets it
  between tasks instead of finding the worker holding it again each time it looks.
- :data:`LOCKED_MESSAGE` is what a command says when the lock could not be had at all.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import OperationalError, connection

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

ATTEMPTS = 3
# SQLite's busy handler sleeps at most 100 ms between two looks at the lock.
BUSY_STEP_SECONDS = 0.1
LOCKED_MESSAGE = (
    "the database is busy: another process (a worker, the server) held its write lock "
    "longer than the busy timeout; nothing was written, run the command again"
)


def is_locked(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's "database is locked" (or "… table is locked")."""
    return isinstance(error, OperationalError) and "is locked" in str(error)


def write_retried(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, which writes in a transaction of its own, run up to ``ATTEMPTS`` times
    while it meets a locked SQLite database. Inside a caller's transaction it runs once: the
    caller's transaction is what would have to run again."""

    @functools.wraps(function)
    def retried(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return function(*args, **kwargs)
            except OperationalError as error:
                if attempt == ATTEMPTS or connection.in_atomic_block or not is_locked(error):
                    raise
                logger.warning(
                    "%s met a locked database (attempt %d of %d); trying again",
                    function.__qualname__,
                    attempt,
                    ATTEMPTS,
                )
        raise AssertionError("unreachable")

    return retried


def writer_turn() -> float:
    """Seconds a worker leaves the write lock free between two tasks: on SQLite a little more
    than the busy-wait step (``TASK_WRITER_TURN_SECONDS``), elsewhere none (PostgreSQL's row
    locks queue fairly)."""
    if connection.vendor != "sqlite":
        return 0.0
    return float(getattr(settings, "TASK_WRITER_TURN_SECONDS", BUSY_STEP_SECONDS * 1.5))


def writer_turn_wait() -> None:
    turn = writer_turn()
    if turn > 0:
        time.sleep(turn)
