"""Tasks queued before the lexicon refresh moved into ``experience.index`` run under its new path."""

from django.db import migrations

from reviewconsole.task_paths import TASKS_LATEST_MIGRATION, task_paths_moved


class Migration(migrations.Migration):
    dependencies = [("experience", "0008_run_owner"), TASKS_LATEST_MIGRATION]

    operations = [
        task_paths_moved(
            {"experience.index_tasks.expanded_refresh_task": "experience.index.tasks.expanded_refresh_task"}
        )
    ]
