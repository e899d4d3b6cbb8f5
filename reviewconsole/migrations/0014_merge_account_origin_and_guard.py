
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('reviewconsole', '0013_account_origin'),
        ('reviewconsole', '0013_audit_guard_fires_always'),
    ]

    operations = [
    ]
