
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('experience', '0014_reference_in_block_and_impact_conflicts'),
        ('experience', '0015_run_names_unique_per_tenant_and_account'),
    ]

    operations = [
    ]
