from django.db import migrations

from reviewconsole.roles import create_permissions_now, sync_roles

# Background tasks: admins see the task results (failures, retries) in the Django admin.
ROLES_AT_0008 = {
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
    sync_roles(apps, ROLES_AT_0008)


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0007_roles_lessons"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(update_groups, migrations.RunPython.noop)]
