"""Held-out tickets and replay reports belong to a tenant: the one of their tickets' scope.

A stored report keeps its tickets (with their scope) in ``result``; a held-out ticket takes the
tenant its ticket had in a report of its set. A report whose tickets span tenants, and a ticket no
report shows, get no tenant: only deployment-wide users see them.
"""

from django.db import migrations, models
from django.utils import timezone


def _one(tenants):
    distinct = set(tenants)
    return distinct.pop() if len(distinct) == 1 else ""


def tenants_derived(apps, schema_editor):
    ReplayReport = apps.get_model("evaluation", "ReplayReport")
    HeldoutTicket = apps.get_model("evaluation", "HeldoutTicket")
    Tenant = apps.get_model("reviewconsole", "Tenant")
    per_ticket: dict[str, set[str]] = {}
    for pk, result in ReplayReport.objects.values_list("pk", "result"):
        tickets = (result or {}).get("tickets") or []
        tenants = []
        for ticket in tickets:
            tenant = str(((ticket.get("scope") or {}).get("tenant")) or "")
            tenants.append(tenant)
            per_ticket.setdefault(str(ticket.get("id", "")), set()).add(tenant)
        ReplayReport.objects.filter(pk=pk).update(tenant=_one(tenants))
    for ticket_id, tenants in per_ticket.items():
        HeldoutTicket.objects.filter(ticket_id=ticket_id).update(tenant=_one(tenants))
    found = {t for tenants in per_ticket.values() for t in tenants if t}
    Tenant.objects.bulk_create(
        [Tenant(name=name, created_at=timezone.now()) for name in sorted(found)],
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0001_initial'),
        ('reviewconsole', '0010_tenant'),
    ]

    operations = [
        migrations.AddField(
            model_name='heldoutticket',
            name='tenant',
            field=models.CharField(blank=True, db_index=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='replayreport',
            name='tenant',
            field=models.CharField(blank=True, db_index=True, default='', max_length=64),
        ),
            migrations.RunPython(tenants_derived, migrations.RunPython.noop),
    ]
