from django.db import migrations

from reviewconsole.roles import create_permissions_now, sync_roles

# Investigations: reviewers and operators read the runs they may start, and admins, who audit,
# read every stored investigation (the console pages and the Django admin).
ROLES_AT_0009 = {
    "reviewer": (
        "knowledge.view_document",
        "knowledge.search_knowledge",
        "experience.view_case",
        "experience.view_skill",
        "experience.view_run",
        "experience.add_case",
        "experience.add_skill",
        "experience.verify_evidence",
        "experience.review_case",
        "experience.use_experience",
        "experience.view_lesson",
        "experience.add_lesson",
        "experience.resolve_lessonconflict",
        "investigations.view_investigation",
    ),
    "operator": (
        "knowledge.view_document",
        "knowledge.add_document",
        "knowledge.change_document",
        "knowledge.approve_document",
        "knowledge.revoke_document",
        "knowledge.search_knowledge",
        "knowledge.view_synonym",
        "knowledge.add_synonym",
        "knowledge.change_synonym",
        "knowledge.delete_synonym",
        "experience.view_case",
        "experience.view_skill",
        "experience.add_case",
        "experience.add_skill",
        "experience.view_lesson",
        "experience.add_lesson",
        "investigations.view_investigation",
    ),
    "admin": (
        "reviewconsole.view_event",
        "auth.view_user",
        "auth.add_user",
        "auth.change_user",
        "auth.view_group",
        "knowledge.view_document",
        "knowledge.view_synonym",
        "experience.view_case",
        "experience.view_skill",
        "experience.view_run",
        "experience.view_lesson",
        "agentapi.view_apitoken",
        "agentapi.revoke_apitoken",
        "django_tasks_database.view_dbtaskresult",
        "investigations.view_investigation",
    ),
    "agent": (
        "knowledge.search_knowledge",
        "experience.propose_case",
        "experience.use_experience",
        "experience.view_run",
    ),
}


def update_groups(apps, schema_editor):
    create_permissions_now(apps)
    sync_roles(apps, ROLES_AT_0009)


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0008_roles_tasks"),
        ("investigations", "0001_initial"),
    ]

    operations = [migrations.RunPython(update_groups, migrations.RunPython.noop)]
