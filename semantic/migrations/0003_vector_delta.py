"""The packed matrices move out of the scope rows the writers update; the vector delta."""

from typing import Any

from django.db import migrations, models


def matrices_moved(apps: Any, schema_editor: Any) -> None:
    """Each scope's packed matrix moves to a row of its own (``PackedMatrix``)."""
    scope_vectors = apps.get_model("semantic", "ScopeVectors")
    packed_matrix = apps.get_model("semantic", "PackedMatrix")
    for pk in list(scope_vectors.objects.exclude(model="").values_list("pk", flat=True)):
        row = scope_vectors.objects.get(pk=pk)
        keys = bytes(row.keys or b"")
        packed_matrix.objects.create(
            space=row.space,
            scope=row.scope,
            model=row.model,
            dim=row.dim,
            version=row.version,
            keys=keys,
            matrix=bytes(row.matrix or b""),
            languages=bytes(row.languages or b""),
            item_null=bytes(row.item_null or b""),
        )
        last = int.from_bytes(keys[-8:], "little", signed=True) if keys else 0
        scope_vectors.objects.filter(pk=row.pk).update(last_entry=last)


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
            name="last_entry",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="scopevectors",
            name="merge_queued",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="PackedMatrix",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("space", models.CharField(max_length=16)),
                ("scope", models.BigIntegerField()),
                ("model", models.CharField(max_length=200)),
                ("dim", models.PositiveIntegerField(default=0)),
                ("version", models.BigIntegerField(default=0)),
                ("merged_seq", models.BigIntegerField(default=0)),
                ("keys", models.BinaryField(default=b"")),
                ("matrix", models.BinaryField(default=b"")),
                ("languages", models.BinaryField(default=b"")),
                ("item_null", models.BinaryField(default=b"")),
            ],
            options={
                "verbose_name_plural": "packed matrices",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("space", "scope"), name="semantic_packed_unique"
                    )
                ],
            },
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
        migrations.RunPython(matrices_moved, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="scopevectors",
            name="item_null",
        ),
        migrations.RemoveField(
            model_name="scopevectors",
            name="keys",
        ),
        migrations.RemoveField(
            model_name="scopevectors",
            name="languages",
        ),
        migrations.RemoveField(
            model_name="scopevectors",
            name="matrix",
        ),
    ]
