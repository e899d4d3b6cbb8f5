"""Queued task rows follow a task whose function moved (the migrations of experience 0009 and
investigations 0004 use this step)."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks_db.models import DBTaskResult

from experience.index.tasks import expanded_refresh_task
from reviewconsole.task_paths import task_paths_moved

OLD = "experience.index_tasks.expanded_refresh_task"
NEW = "experience.index.tasks.expanded_refresh_task"

pytestmark = pytest.mark.django_db


def queued(task_path: str) -> DBTaskResult[Any, Any]:
    """A row as the database backend writes it when a task is enqueued."""
    return DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path=task_path,
        backend_name="default",
        queue_name="default",
        run_after=timezone.now(),
    )


def run(code: Any) -> None:
    """Run a RunPython function as the migration executor would, on the current models."""
    code(apps, None)


def test_a_row_queued_under_the_old_path_runs_under_the_new_one_and_back() -> None:
    queued(OLD)
    step = task_paths_moved({OLD: NEW})

    run(step.code)
    row = DBTaskResult.objects.get()
    assert row.task_path == NEW
    # The worker can import what the row names again.
    assert import_string(row.task_path) is expanded_refresh_task

    run(step.reverse_code)
    assert DBTaskResult.objects.get().task_path == OLD


def test_rows_of_other_tasks_are_left_alone() -> None:
    queued(NEW)
    queued(OLD)
    run(task_paths_moved({"some.other.task": "some.new.task"}).code)
    assert sorted(DBTaskResult.objects.values_list("task_path", flat=True)) == sorted([NEW, OLD])
