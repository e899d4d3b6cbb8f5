"""The search index's delta (``SearchDelta``: changes since a scope's array and posting lists
were merged) and an index of each scope's public ids, in code point order on PostgreSQL
(``COLLATE "C"``), where a new entry falls among its scope's entries being a count over it."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


ORDER_C = "search_entry_order_c"


def order_c_created(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {ORDER_C}"
            ' ON knowledge_searchentry (scope_id, public_id COLLATE "C")'
        )


def order_c_dropped(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {ORDER_C}")


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0007_document_submission"),
    ]

    operations = [
        migrations.CreateModel(
            name="SearchDelta",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("entry", models.BigIntegerField()),
                ("removed", models.BooleanField(default=False)),
                ("record", models.BinaryField(default=b"")),
                ("raw_tokens", models.TextField(blank=True, default="")),
                ("expanded_tokens", models.TextField(blank=True, default="")),
                ("item_id", models.CharField(max_length=120)),
            ],
            options={
                "verbose_name_plural": "search deltas",
            },
        ),
        migrations.AddIndex(
            model_name="searchentry",
            index=models.Index(fields=["scope", "public_id"], name="search_entry_order"),
        ),
        migrations.AddField(
            model_name="searchdelta",
            name="scope",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="knowledge.searchscope",
            ),
        ),
        migrations.AddIndex(
            model_name="searchdelta",
            index=models.Index(fields=["scope", "id"], name="knowledge_delta_scope"),
        ),
        migrations.RunPython(order_c_created, order_c_dropped),
    ]
