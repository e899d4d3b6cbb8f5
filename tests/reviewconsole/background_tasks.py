"""Tasks for tests/reviewconsole/test_background.py, importable by a worker process."""

from __future__ import annotations

import contextlib
import socket
import time

from django.db import transaction
from django_tasks import task

from reviewconsole.audit import event_record
from reviewconsole.background import retrying
from reviewconsole.models import Action, Event

# The token a test's task writes into its audit event, so it can count the writes.
TARGET = "background-test:{marker}"


@task()
def slow_write(marker: str, hold: str, attempt: int = 1) -> str:
    """Write one event for ``marker``; before committing, wait on the test at ``hold``."""
    with retrying(slow_write, attempt, marker, hold), transaction.atomic():
        target = TARGET.format(marker=marker)
        if Event.objects.filter(target=target).exists():
            return "already written"
        event_record(actor=None, action=Action.CURATION_SCAN, target=target)
        held(hold, attempt)
        return "written"


def held(hold: str, attempt: int) -> None:
    """Tell the test listening on the Unix socket ``hold`` that this attempt is inside its
    transaction, then wait until the test answers or hangs up (or kills this process). When no
    test listens there any more, go straight on."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(hold)
        except (FileNotFoundError, ConnectionRefusedError):
            return
        connection.sendall(f"{attempt}\n".encode())
        connection.recv(1)


@task()
def flaky(marker: str, fail_times: int, attempt: int = 1) -> int:
    """Fails its first ``fail_times`` attempts, then writes one event."""
    with retrying(flaky, attempt, marker, fail_times), transaction.atomic():
        if attempt <= fail_times:
            raise RuntimeError(f"attempt {attempt} fails")
        event_record(actor=None, action=Action.CURATION_SCAN, target=TARGET.format(marker=marker))
        return attempt


@task()
def busy_write(marker: str, hold_seconds: float, report: str = "") -> str:
    """A worker's task that keeps the write lock for ``hold_seconds`` (its work, done while it
    holds the lock) and writes one event; the first one tells the Unix socket ``report`` that the
    worker is busy."""
    with transaction.atomic():
        event_record(actor=None, action=Action.CURATION_SCAN, target=TARGET.format(marker=marker))
        if report:
            with (
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection,
                contextlib.suppress(FileNotFoundError, ConnectionRefusedError),
            ):
                connection.connect(report)
                connection.sendall(b"busy\n")
        time.sleep(hold_seconds)
        return "written"
