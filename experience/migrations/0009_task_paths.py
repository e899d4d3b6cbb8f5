"""Tasks queued before the lexicon refresh moved into ``experience.index`` run under its new path."""

from django.db import migrations

MOVED = {"experience.index_tasks.expanded_refresh_task": "experience.index.tasks.expanded_refresh_task"}


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
        ("experience", "0008_run_owner"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
