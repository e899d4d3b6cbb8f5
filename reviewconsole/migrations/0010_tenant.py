"""The tenant registry, filled with every tenant value the database already holds.

Tenant values stay columns of their rows; from here on every value that comes in is checked
against this table (``reviewconsole.tenancy``). The rows made here have no creator (they were
found, not created) and no audit event: the audit chain records acts, and this is none.
"""

import importlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

from reviewconsole.roles import create_permissions_now, sync_roles

# (app label, model) of every table with a ``tenant`` column of its own.
TENANT_COLUMNS = (
    ("reviewconsole", "TenantMembership"),
    ("knowledge", "Document"),
    ("knowledge", "DocumentStore"),
    ("knowledge", "SearchScope"),
    ("experience", "Case"),
    ("experience", "Skill"),
    ("experience", "Lesson"),
    ("experience", "Run"),
    ("experience", "LessonConflict"),
    ("experience", "IndexScope"),
    ("curation", "Thread"),
    ("curation", "IncidentMerge"),
    ("curation", "ReReview"),
    ("curation", "SkillProposal"),
    ("investigations", "Investigation"),
    ("investigations", "InvestigationRequest"),
)


def update_groups(apps, schema_editor):
    create_permissions_now(apps)
    roles = importlib.import_module("reviewconsole.migrations.0009_roles_investigations")
    at_0010 = dict(roles.ROLES_AT_0009)
    # Admins read the tenant registry and (deployment-wide ones) add tenants to it.
    at_0010["admin"] = (*at_0010["admin"], "reviewconsole.view_tenant", "reviewconsole.add_tenant")
    sync_roles(apps, at_0010)


def tenants_found(apps, schema_editor):
    Tenant = apps.get_model("reviewconsole", "Tenant")
    found: set[str] = set()
    for app_label, model_name in TENANT_COLUMNS:
        model = apps.get_model(app_label, model_name)
        found |= set(model.objects.exclude(tenant="").values_list("tenant", flat=True).distinct())
    now = timezone.now()
    Tenant.objects.bulk_create(
        [Tenant(name=name, created_at=now) for name in sorted(found)], ignore_conflicts=True
    )


class Migration(migrations.Migration):

    dependencies = [
        ('reviewconsole', '0009_roles_investigations'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("knowledge", "0004_lexicon_state_indexed"),
        ("experience", "0006_index_entry_evidence"),
        ("curation", "0006_thread_scope"),
        ("investigations", "0002_investigation_requests"),
    ]

    operations = [
        migrations.CreateModel(
            name='Tenant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64, unique=True)),
                ('created_at', models.DateTimeField()),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.RunPython(tenants_found, migrations.RunPython.noop),
        migrations.RunPython(update_groups, migrations.RunPython.noop),
    ]
