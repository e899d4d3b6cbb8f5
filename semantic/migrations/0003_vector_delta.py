from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("semantic", "0002_scope_languages"),
    ]

    operations = [
        migrations.AddField(
            model_name="scopevectors",
            name="delta_seq",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scopevectors",
            name="merge_queued",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="scopevectors",
            name="merged_seq",
            field=models.BigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name="VectorDelta",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("space", models.CharField(max_length=16)),
                ("scope", models.BigIntegerField()),
                ("seq", models.BigIntegerField()),
                ("entry", models.BigIntegerField()),
                ("model", models.CharField(max_length=200)),
                ("vector", models.BinaryField()),
                ("language", models.PositiveSmallIntegerField(default=0)),
                ("item_null", models.BinaryField(default=b"")),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("space", "scope", "seq"), name="semantic_vector_delta_unique"
                    )
                ],
            },
        ),
    ]
