"""Document keys are namespaced by tenant: ``(tenant, doc_key, version)`` is unique, not
``(doc_key, version)``.

Every stored row already satisfies the new constraint (it is weaker than the old one), so no row
is rewritten; the plain ``(doc_key, version)`` index stays for resolving ``doc:KEY@N`` among the
tenants a deployment-wide user sees.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0004_lexicon_state_indexed"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="document",
            name="document_key_version",
        ),
        migrations.AddConstraint(
            model_name="document",
            constraint=models.UniqueConstraint(
                fields=("tenant", "doc_key", "version"), name="document_tenant_key_version"
            ),
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(fields=["doc_key", "version"], name="document_key_version_idx"),
        ),
    ]
