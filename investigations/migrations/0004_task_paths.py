"""Console investigations queued before their task moved beside the service that queues it."""

from django.db import migrations

MOVED = {"investigations.tasks.investigation_task": "investigations.services.investigation_task"}


def forwards(apps, schema_editor):
    task_result = apps.get_model("django_tasks_database", "DBTaskResult")
    for old, new in MOVED.items():
        task_result.objects.filter(task_path=old).update(task_path=new)


def backwards(apps, schema_editor):
    task_result = apps.get_model("django_tasks_database", "DBTaskResult")
    for old, new in MOVED.items():
        task_result.objects.filter(task_path=new).update(task_path=old)


class Migration(migrations.Migration):
    dependencies = [
        ("investigations", "0003_run_owner"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
