"""One run per owner, tenant and name; and the index of a reviewer's lookups by name."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('experience', '0014_run_names_per_tenant_and_account'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='runowner',
            index=models.Index(fields=['tenant', 'name'], name='run_owner_tenant_name'),
        ),
        migrations.AddConstraint(
            model_name='runowner',
            constraint=models.UniqueConstraint(fields=('owner', 'name', 'tenant'), name='run_owner_one_run_per_name'),
        ),
    ]
