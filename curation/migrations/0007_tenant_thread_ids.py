"""Thread ids are namespaced by tenant: ``(tenant, thread_id)`` is unique, not ``thread_id``.

Every stored row already satisfies the new constraint, so no row is rewritten.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("curation", "0006_thread_scope"),
    ]

    operations = [
        migrations.AlterField(
            model_name="thread",
            name="thread_id",
            field=models.CharField(db_index=True, max_length=100),
        ),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(
                fields=("tenant", "thread_id"), name="thread_tenant_id"
            ),
        ),
    ]
