"""Console investigations queued before their task moved beside the service that queues it."""

from django.db import migrations

from reviewconsole.task_paths import TASKS_LATEST_MIGRATION, task_paths_moved


class Migration(migrations.Migration):
    dependencies = [("investigations", "0003_run_owner"), TASKS_LATEST_MIGRATION]

    operations = [
        task_paths_moved(
            {"investigations.tasks.investigation_task": "investigations.services.investigation_task"}
        )
    ]
