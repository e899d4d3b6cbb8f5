"""An investigation's actor owns its run id, in the investigation's tenant (experience 0008).

Before runs had owners the actor of an investigation was looked up beside the readers; now the
run's one ``RunOwner`` says it, so each investigation's run id is owned by its actor and tenant
(an actor recorded as its reader already is kept).
"""

from django.db import migrations


def owners_from_investigations(apps, schema_editor):
    Investigation = apps.get_model("investigations", "Investigation")
    RunOwner = apps.get_model("experience", "RunOwner")
    for investigation in Investigation.objects.order_by("started_at", "id").iterator():
        claim = RunOwner.objects.filter(run_id=investigation.run_id).first()
        if claim is None:
            RunOwner.objects.create(
                run_id=investigation.run_id,
                owner_id=investigation.actor_id,
                tenant=investigation.tenant,
                first_read_at=investigation.started_at,
            )
            continue
        changed = []
        if claim.owner_id is None:
            claim.owner_id = investigation.actor_id
            changed.append("owner")
        if not claim.tenant and investigation.tenant:
            claim.tenant = investigation.tenant
            changed.append("tenant")
        if changed:
            claim.save(update_fields=changed)


class Migration(migrations.Migration):

    dependencies = [
        ("investigations", "0002_investigation_requests"),
        ("experience", "0008_run_owner"),
    ]

    operations = [
        migrations.RunPython(owners_from_investigations, migrations.RunPython.noop),
    ]
