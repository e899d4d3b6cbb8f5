"""Background tasks of investigations (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from reviewconsole.background import retrying


@task()
def investigation_task(pk: int, attempt: int = 1) -> str:
    """Run a ticket entered on the console, storing each step as it happens.

    A failure is retried like any task; when the last attempt fails too, the request says so
    (``failed``, with the error), so its page stops waiting.
    """
    from investigations.services import investigation_request_failed, investigation_request_run

    try:
        with retrying(investigation_task, attempt, pk):
            return investigation_request_run(pk)
    except Exception as exc:
        if attempt >= int(getattr(settings, "TASK_MAX_ATTEMPTS", 5)):
            investigation_request_failed(pk, f"{type(exc).__name__}: {exc}")
        raise
