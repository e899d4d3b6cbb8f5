from django.db import migrations, models


def marked_dirty(apps, schema_editor):
    # Packed before languages and the items' reference statistics were kept: packed again by
    # the next ``reembed`` or change; until then the branch judges each entry from the query's
    # end alone, as if it were in the query's language.
    apps.get_model("semantic", "ScopeVectors").objects.update(dirty=True)


class Migration(migrations.Migration):

    dependencies = [
        ('semantic', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='scopevectors',
            name='item_null',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='scopevectors',
            name='languages',
            field=models.BinaryField(default=b''),
        ),
        migrations.RunPython(marked_dirty, migrations.RunPython.noop),
    ]
