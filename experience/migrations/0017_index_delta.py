import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experience", "0016_merge_block_reads_and_run_names"),
    ]

    operations = [
        migrations.CreateModel(
            name="IndexDelta",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("entry", models.BigIntegerField()),
                ("item_id", models.CharField(max_length=80)),
                ("removed", models.BooleanField(default=False)),
                ("record", models.BinaryField(default=b"")),
                ("raw_tokens", models.TextField(blank=True, default="")),
                ("expanded_tokens", models.TextField(blank=True, default="")),
                (
                    "scope",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="experience.indexscope",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["scope", "id"], name="experience_index_delta_scope")
                ],
            },
        ),
    ]
