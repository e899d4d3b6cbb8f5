"""A version carries a change note and is submitted for review apart from being saved."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def submitted_as_stored(apps, schema_editor):
    """Every version stored before drafts were submitted was in reviewers' queue: it counts as
    submitted by its author when it was saved."""
    Document = apps.get_model("knowledge", "Document")
    Document.objects.update(submitted_at=models.F("created_at"), submitted_by=models.F("created_by"))


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0006_search_entry_plural'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='document',
            name='change_note',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='document',
            name='submitted_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='document',
            name='submitted_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunPython(submitted_as_stored, migrations.RunPython.noop),
    ]
