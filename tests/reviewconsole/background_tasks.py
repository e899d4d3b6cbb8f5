"""Tasks for tests/reviewconsole/test_background.py, importable by a worker process."""

from __future__ import annotations

import time
from pathlib import Path

from django.db import transaction
from django_tasks import task

from reviewconsole.audit import event_record
from reviewconsole.background import retrying
from reviewconsole.models import Action, Event

# The token a test's task writes into its audit event, so it can count the writes.
TARGET = "background-test:{marker}"


@task()
def slow_write(marker: str, hold: str, attempt: int = 1) -> str:
    """Write one event for ``marker``; while the file ``hold`` exists, wait before committing."""
    with retrying(slow_write, attempt, marker, hold), transaction.atomic():
        target = TARGET.format(marker=marker)
        if Event.objects.filter(target=target).exists():
            return "already written"
        event_record(actor=None, action=Action.CURATION_SCAN, target=target)
        Path(hold + ".started").write_text(str(attempt))
        while Path(hold).exists():
            time.sleep(0.05)
        return "written"


@task()
def flaky(marker: str, fail_times: int, attempt: int = 1) -> int:
    """Fails its first ``fail_times`` attempts, then writes one event."""
    with retrying(flaky, attempt, marker, fail_times), transaction.atomic():
        if attempt <= fail_times:
            raise RuntimeError(f"attempt {attempt} fails")
        event_record(actor=None, action=Action.CURATION_SCAN, target=TARGET.format(marker=marker))
        return attempt
