"""Background tasks of investigations (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from django_tasks import task

from reviewconsole.background import retrying


@task()
def investigation_task(pk: int, attempt: int = 1) -> str:
    """Run a ticket entered on the console, storing each step as it happens."""
    from investigations.services import investigation_request_run

    with retrying(investigation_task, attempt, pk):
        return investigation_request_run(pk)
