from django.db import migrations

from reviewconsole.roles import create_permissions_now, sync_roles

# The roles as they stood when this migration was written (later migrations change them).
ROLES_AT_0002 = {'reviewer': ('knowledge.view_document',
              'knowledge.search_knowledge',
              'experience.view_case',
              'experience.view_skill',
              'experience.view_run',
              'experience.add_case',
              'experience.add_skill',
              'experience.verify_evidence',
              'experience.review_case',
              'experience.use_experience'),
 'operator': ('knowledge.view_document',
              'knowledge.add_document',
              'knowledge.change_document',
              'knowledge.approve_document',
              'knowledge.revoke_document',
              'knowledge.search_knowledge',
              'knowledge.view_synonym',
              'knowledge.add_synonym',
              'knowledge.change_synonym',
              'knowledge.delete_synonym',
              'experience.view_case',
              'experience.view_skill',
              'experience.add_case',
              'experience.add_skill'),
 'admin': ('reviewconsole.view_event',
           'auth.view_user',
           'auth.add_user',
           'auth.change_user',
           'auth.view_group',
           'knowledge.view_document',
           'knowledge.view_synonym',
           'experience.view_case',
           'experience.view_skill',
           'experience.view_run'),
 'agent': ('knowledge.search_knowledge',
           'experience.propose_case',
           'experience.use_experience',
           'experience.view_run')}


def create_groups(apps, schema_editor):
    create_permissions_now(apps)
    sync_roles(apps, ROLES_AT_0002)


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
