"""Background tasks (django-tasks): retries with backoff, and recovery of a killed worker's task.

Tasks run on the database backend (``django_tasks_db``): enqueuing writes a row in the caller's
transaction, so a task exists exactly when the write that asked for it was committed, and any
number of ``manage.py worker`` processes take rows from the table. Tests use the immediate
backend, which runs a task where it is enqueued.

- **Retries**: a task body runs inside :func:`retrying`. When it raises, the failure is recorded
  on its result row (visible to admins in the Django admin, with its traceback) and a new attempt
  is enqueued to run after ``TASK_RETRY_BASE_SECONDS * 2 ** (attempt - 1)`` seconds, up to
  ``TASK_MAX_ATTEMPTS`` attempts.
- **A killed worker**: a row stays ``RUNNING`` when its worker dies mid-task. The task's writes
  are one transaction, so nothing of it was committed; :func:`stale_tasks_requeue` puts rows
  running longer than ``TASK_LEASE_SECONDS`` back to ``READY`` and another worker runs them
  again. Every task is written so that running it again writes once (it looks for what it
  would write first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from reviewconsole import clock


def _backend_defers(task: Any) -> bool:
    return bool(getattr(task.get_backend(), "supports_defer", False))


def retry_delay(attempt: int) -> timedelta:
    base = float(getattr(settings, "TASK_RETRY_BASE_SECONDS", 10.0))
    return timedelta(seconds=base * 2 ** max(0, attempt - 1))


@contextmanager
def retrying(task: Any, attempt: int, *args: Any, **kwargs: Any) -> Iterator[None]:
    """Run the body of ``task``; when it raises, enqueue attempt ``attempt + 1`` and re-raise."""
    try:
        yield
    except Exception:
        if attempt < int(getattr(settings, "TASK_MAX_ATTEMPTS", 5)):
            again = task
            if _backend_defers(task):
                again = task.using(run_after=clock.now() + retry_delay(attempt))
            again.enqueue(*args, attempt=attempt + 1, **kwargs)
        raise


class MalformedTaskRow(Exception):
    """A task row the worker cannot run; recorded on the row as its failure, never retried."""


def task_row_problem(row: Any) -> str | None:
    """Why the ``DBTaskResult`` ``row`` cannot be run, or None when it can.

    django-tasks-db reads ``args_kwargs["args"]`` and ``["kwargs"]`` and imports ``task_path``
    without guarding either, also while recording a failure, so a row written by anything else
    than ``Task.enqueue`` (an admin edit, a hand-made row, another release) would stop the worker.
    """
    from django.core.exceptions import SuspiciousOperation

    arguments = row.args_kwargs
    if not isinstance(arguments, dict):
        return "malformed task row: args_kwargs is not a JSON object"
    if not isinstance(arguments.get("args"), list):
        return "malformed task row: args_kwargs has no 'args' list"
    if not isinstance(arguments.get("kwargs"), dict):
        return "malformed task row: args_kwargs has no 'kwargs' object"
    try:
        row.task  # noqa: B018 - imports and checks the task path
    except (ImportError, SuspiciousOperation, ValueError, TypeError) as error:
        return f"malformed task row: task_path {row.task_path!r} names no task ({error})"
    return None


def stale_tasks_requeue(*, now: datetime | None = None, lease_seconds: int | None = None) -> int:
    """Put tasks claimed longer than the lease ago (their worker died) back in the queue."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    lease = lease_seconds if lease_seconds is not None else settings.TASK_LEASE_SECONDS
    cutoff = (now or clock.now()) - timedelta(seconds=lease)
    return DBTaskResult.objects.filter(
        status=TaskResultStatus.RUNNING, started_at__lt=cutoff
    ).update(status=TaskResultStatus.READY, started_at=None)


# What a worker does before taking tasks (apps register: curation queues its periodic scan).
_worker_start_hooks: list[Callable[[], object]] = []


def worker_start_hook_install(hook: Callable[[], object]) -> None:
    if hook not in _worker_start_hooks:
        _worker_start_hooks.append(hook)


def worker_starting() -> None:
    for hook in _worker_start_hooks:
        hook()
