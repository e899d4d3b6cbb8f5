"""On PostgreSQL, an index of each scope's item ids in code point order (``COLLATE "C"``): where a
new entry falls among its scope's entries is a count over it (``experience.index.postings.
_order_of``), which the database's own collation kept off the (scope, item_id) index. SQLite
compares in code point order already and uses that index."""

from typing import Any

from django.db import migrations

INDEX = "experience_index_entry_order_c"


def created(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS {INDEX} ON experience_indexentry (scope_id, item_id COLLATE "C")'
        )


def dropped(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("experience", "0017_index_delta"),
    ]

    operations = [migrations.RunPython(created, dropped)]
