"""Review claims: who is looking at an item under review, until when."""

import importlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from reviewconsole.roles import create_permissions_now, sync_roles


def update_groups(apps, schema_editor):
    """Admins may break a reviewer's claim (``reviewconsole.break_reviewclaim``)."""
    create_permissions_now(apps)
    roles = importlib.import_module("reviewconsole.migrations.0009_roles_investigations")
    at_0015 = dict(roles.ROLES_AT_0009)
    at_0015["admin"] = (
        *at_0015["admin"],
        "reviewconsole.view_tenant",
        "reviewconsole.add_tenant",
        "reviewconsole.break_reviewclaim",
    )
    sync_roles(apps, at_0015)


class Migration(migrations.Migration):

    dependencies = [
        ('reviewconsole', '0014_merge_account_origin_and_guard'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ReviewClaim',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(max_length=64)),
                ('item_id', models.CharField(max_length=200)),
                ('kind', models.CharField(max_length=16)),
                ('title', models.CharField(blank=True, max_length=300)),
                ('claimed_at', models.DateTimeField()),
                ('expires_at', models.DateTimeField(db_index=True)),
                ('holder', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_claims', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-claimed_at', '-id'],
                'permissions': [('break_reviewclaim', "Can break another reviewer's claim")],
                'indexes': [models.Index(fields=['holder', 'expires_at'], name='reviewconso_holder__d829a8_idx')],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'item_id'), name='review_claim_one_per_item')],
            },
        ),
        migrations.RunPython(update_groups, migrations.RunPython.noop),
    ]
