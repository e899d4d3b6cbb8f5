"""Threads belong to a tenant.

Threads imported before get the deployment's demo tenant (``DEMO_TENANT``). Their content hash
is recomputed over the content with that tenant, as the import format now carries it, so that
importing the same thread again with that tenant is a no-op rather than a conflict.

Re-review entries queued before entries carried a tenant get their item's tenant, so members of
that tenant see them.
"""

import hashlib
from datetime import UTC

import rfc8785
from django.conf import settings
from django.db import migrations, models


def _utc_iso(value):
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _content_hashes(apps, *, with_tenant):
    """The content hash of each stored thread, as the import computes it (a frozen copy)."""
    Thread = apps.get_model("curation", "Thread")
    ThreadMessage = apps.get_model("curation", "ThreadMessage")
    for thread in Thread.objects.order_by("pk").iterator():
        messages = [
            {
                "id": m.message_id,
                "author": m.author,
                "role": m.role,
                "time": _utc_iso(m.sent_at),
                "text": m.text,
                "attachments": [{"name": a["name"], "text": a["text"]} for a in m.attachments],
            }
            for m in ThreadMessage.objects.filter(thread=thread).order_by("position")
        ]
        canonical = {
            "id": thread.thread_id,
            "title": thread.title,
            "source": thread.source,
            "messages": messages,
        }
        if with_tenant:
            canonical["tenant"] = thread.tenant
        thread.content_hash = hashlib.sha256(rfc8785.dumps(canonical)).hexdigest()
        thread.save(update_fields=["content_hash"])


def thread_content_hashes(apps, schema_editor):
    _content_hashes(apps, with_tenant=True)


def thread_content_hashes_without_tenant(apps, schema_editor):
    _content_hashes(apps, with_tenant=False)


def rereview_tenants(apps, schema_editor):
    ReReview = apps.get_model("curation", "ReReview")
    Case = apps.get_model("experience", "Case")
    Skill = apps.get_model("experience", "Skill")
    for entry in ReReview.objects.filter(tenant="").order_by("pk").iterator():
        model = Skill if entry.item_type == "skill" else Case
        tenant = model.objects.filter(pk=entry.item_id).values_list("tenant", flat=True).first()
        if tenant:
            entry.tenant = tenant
            entry.save(update_fields=["tenant"])


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0002_rereview_tenant"),
        ("experience", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="tenant",
            field=models.CharField(db_index=True, default=settings.DEMO_TENANT, max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(thread_content_hashes, thread_content_hashes_without_tenant),
        migrations.RunPython(rereview_tenants, migrations.RunPython.noop),
    ]
