"""Each index scope packs its entries into one array (``IndexScope.arrays``), which retrieval
reads with the query's posting lists in one statement, and each entry keeps the text a context
block shows for its item (``IndexEntry.block_text``); this fills both for what was indexed
before. A scope left unpacked (NULL) is ranked from the texts until the lexicon refresh packs it."""

from django.db import migrations, models


def fill_existing_entries(apps, schema_editor):
    from experience.index import postings

    models_ = postings.Models(
        apps.get_model("experience", "IndexScope"),
        apps.get_model("experience", "IndexEntry"),
        apps.get_model("experience", "IndexPosting"),
    )
    historical = {name: apps.get_model("experience", name.capitalize()) for name in postings.KINDS}
    postings.block_texts_filled(models_, historical=historical)
    postings.arrays_packed(None, models_)


class Migration(migrations.Migration):
    dependencies = [
        ("experience", "0009_task_paths"),
    ]

    operations = [
        migrations.AddField(
            model_name="indexscope",
            name="arrays",
            field=models.BinaryField(null=True),
        ),
        migrations.AddField(
            model_name="indexentry",
            name="block_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddIndex(
            model_name="indexentry",
            index=models.Index(fields=["scope", "item_id"], name="experience_index_entry_order"),
        ),
        migrations.RunPython(fill_existing_entries, migrations.RunPython.noop),
    ]
