"""Runs keyed by tenant, account and the name their owner chose (``RunOwner.name``).

Every existing run keeps its stored id, and its name is that id: what was one run stays one run,
under the same id, for the same owner and tenant. From here on the same name in another tenant
or of another account opens a run of its own (``experience.runs.claims``). The uniqueness that
says so is added by the next migration, once every row has its name.
"""

from django.db import migrations, models
from django.db.models import F


def names_from_run_ids(apps, schema_editor):
    RunOwner = apps.get_model("experience", "RunOwner")
    RunOwner.objects.update(name=F("run_id"))


class Migration(migrations.Migration):

    dependencies = [
        ("experience", "0013_merge_prompt_skills"),
        # Its data migration writes owners of investigations' runs: named here, once they exist.
        ("investigations", "0003_run_owner"),
    ]

    operations = [
        migrations.AddField(
            model_name="runowner",
            name="name",
            field=models.CharField(default="", max_length=100),
            preserve_default=False,
        ),
        migrations.RunPython(names_from_run_ids, migrations.RunPython.noop),
    ]
