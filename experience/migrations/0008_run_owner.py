"""One owner per run id (``RunOwner``) instead of every account that read under it (``RunReader``).

Each run id with reads, a stored run or a recorded reader keeps its earliest reader as its owner
(else the actor of its earliest stored run), and the tenant of its stored run or, failing that,
of its first read item. Investigations fill in their own runs (investigations 0003).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _document_tenant(Document, item_id):
    key, _, version = item_id.removeprefix("doc:").partition("@")
    if not version.isdigit():
        return ""
    return (
        Document.objects.filter(doc_key=key, version=int(version))
        .values_list("tenant", flat=True)
        .first()
        or ""
    )


def owners_from_readers(apps, schema_editor):
    Reference = apps.get_model("experience", "Reference")
    Run = apps.get_model("experience", "Run")
    RunReader = apps.get_model("experience", "RunReader")
    RunOwner = apps.get_model("experience", "RunOwner")
    Document = apps.get_model("knowledge", "Document")
    item_models = [apps.get_model("experience", name) for name in ("Case", "Skill", "Lesson")]

    run_ids = set(Reference.objects.values_list("run_id", flat=True))
    run_ids |= set(Run.objects.values_list("run_id", flat=True))
    run_ids |= set(RunReader.objects.values_list("run_id", flat=True))
    for run_id in sorted(run_ids):
        reader = RunReader.objects.filter(run_id=run_id).order_by("first_read_at", "id").first()
        run = Run.objects.filter(run_id=run_id).order_by("started_at", "id").first()
        first_read = Reference.objects.filter(run_id=run_id).order_by("read_at", "id").first()
        owner_id = reader.reader_id if reader else (run.actor_id if run else None)
        tenant = ""
        if run is not None and run.tenant:
            tenant = run.tenant
        elif first_read is not None:
            if first_read.item_type == "document":
                tenant = _document_tenant(Document, first_read.item_id)
            for model in item_models:
                tenant = tenant or (
                    model.objects.filter(pk=first_read.item_id)
                    .values_list("tenant", flat=True)
                    .first()
                    or ""
                )
        times = [
            value
            for value in (
                reader.first_read_at if reader else None,
                run.started_at if run else None,
                first_read.read_at if first_read else None,
            )
            if value is not None
        ]
        RunOwner.objects.create(
            run_id=run_id, owner_id=owner_id, tenant=tenant, first_read_at=min(times)
        )


class Migration(migrations.Migration):

    dependencies = [
        ("experience", "0007_outcome_votes"),
        ("knowledge", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RunOwner",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run_id", models.CharField(max_length=100, unique=True)),
                ("tenant", models.CharField(blank=True, max_length=64)),
                ("first_read_at", models.DateTimeField()),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["tenant", "run_id"], name="run_owner_tenant")],
            },
        ),
        migrations.RunPython(owners_from_readers, migrations.RunPython.noop),
        migrations.DeleteModel(name="RunReader"),
    ]
