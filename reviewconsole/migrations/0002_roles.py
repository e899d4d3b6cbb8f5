from django.contrib.auth.management import create_permissions
from django.db import migrations

from reviewconsole.roles import sync_roles


def create_groups(apps, schema_editor):
    # Permissions are normally created after the whole migrate run; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    sync_roles(apps)


class Migration(migrations.Migration):

    dependencies = [
        ("reviewconsole", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("knowledge", "0002_seed_lexicon"),
        ("experience", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_groups, migrations.RunPython.noop),
    ]
