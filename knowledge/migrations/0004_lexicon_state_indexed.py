"""The lexicon the search index was computed under, kept beside the current lexicon's stamp.

Until now every lexicon change rebuilt the index in its own transaction, so the index matches the
current lexicon: that is what it records.
"""

from typing import Any

from django.db import migrations, models


def record_current(apps: Any, schema_editor: Any) -> None:
    state = apps.get_model("knowledge", "LexiconState")
    synonym = apps.get_model("knowledge", "Synonym")
    lexicon = dict(synonym.objects.values_list("term", "canonical"))
    for row in state.objects.filter(pk=1):
        row.indexed_stamp = row.stamp
        row.indexed_lexicon = lexicon
        row.save(update_fields=["indexed_stamp", "indexed_lexicon"])


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0003_search_postings"),
    ]

    operations = [
        migrations.AddField(
            model_name="lexiconstate",
            name="indexed_lexicon",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="lexiconstate",
            name="indexed_stamp",
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.RunPython(record_current, migrations.RunPython.noop),
    ]
