"""A running worker puts back in the queue the tasks a dead worker left running.

Before, only a worker that was starting did (``stale_tasks_requeue`` in the command's handle):
with every worker up, a task whose worker was killed stayed ``RUNNING`` until some worker
restarted after its lease ran out, so a deployment that lost one of two workers never ran it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from reviewconsole.management.commands.worker import ConsoleWorker, sweep_interval

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(seconds_ago: int, worker_id: str) -> DBTaskResult[Any, Any]:
    return DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path="curation.tasks.curation_scan_task",
        backend_name="default",
        queue_name="default",
        run_after=timezone.now(),
        status=TaskResultStatus.RUNNING,
        started_at=timezone.now() - timedelta(seconds=seconds_ago),
        worker_ids=[worker_id],
    )


def worker(lease_seconds: int) -> ConsoleWorker:
    return ConsoleWorker(
        queue_names=["default"],
        interval=1,
        batch=False,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="alive",
        excluded_queue_names=[],
        lease_seconds=lease_seconds,
    )


def test_a_running_worker_requeues_a_task_claimed_longer_than_the_lease_ago(
    settings: Any,
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    left = claimed(seconds_ago=40, worker_id="killed")
    running = claimed(seconds_ago=5, worker_id="busy")
    alive = worker(lease_seconds=30)
    began = alive.swept_at

    # Not before a quarter of the lease has passed since it started (or last looked)...
    assert alive.sweep(now=began + 7) == 0
    left.refresh_from_db()
    assert left.status == TaskResultStatus.RUNNING
    # ...then the task of the worker that died goes back to the queue, the live one's stays.
    assert alive.sweep(now=began + 7.5) == 1
    left.refresh_from_db()
    running.refresh_from_db()
    assert left.status == TaskResultStatus.READY and left.started_at is None
    assert running.status == TaskResultStatus.RUNNING
    assert alive.sweep(now=began + 8) == 0


@pytest.mark.parametrize(("lease", "every"), [(600, 60.0), (30, 7.5), (2, 1.0), (0, 1.0)])
def test_the_sweep_runs_every_quarter_lease_within_a_second_and_a_minute(
    lease: int, every: float
) -> None:
    assert sweep_interval(lease) == every
