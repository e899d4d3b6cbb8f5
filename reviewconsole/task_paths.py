"""A migration step for a background task whose function moved to another module.

Queued task rows name their task by its import path (django-tasks' ``task_path``); when the code
moves, the rows still waiting must follow it, or the worker fails them as unknown tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import migrations

# django-tasks-db's app label (its migrations name it so).
TASKS_APP = "django_tasks_database"
TASKS_LATEST_MIGRATION = (TASKS_APP, "0021_conditional_partial_index_ordering")


def task_paths_moved(moved: Mapping[str, str]) -> migrations.RunPython:
    """``RunPython`` that renames the queued rows' ``task_path`` from each old path to its new
    one (and back when the migration is reversed)."""

    def rename(apps: Any, pairs: list[tuple[str, str]]) -> None:
        task_result = apps.get_model(TASKS_APP, "DBTaskResult")
        for old, new in pairs:
            task_result.objects.filter(task_path=old).update(task_path=new)

    def forwards(apps: Any, schema_editor: Any) -> None:
        rename(apps, list(moved.items()))

    def backwards(apps: Any, schema_editor: Any) -> None:
        rename(apps, [(new, old) for old, new in moved.items()])

    return migrations.RunPython(forwards, backwards)
