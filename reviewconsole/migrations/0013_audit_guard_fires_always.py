# The PostgreSQL guard fires in every session. Its triggers were created ENABLE (origin), which
# PostgreSQL skips in a session that set session_replication_role = replica: a superuser could
# update, delete and truncate audit rows with one SET. ENABLE ALWAYS fires them whatever the
# session set; only the tables' owner can still disable or drop them, which is why the
# application runs as a role that owns nothing (docs/operations.md, "Database roles").
# SQLite has no such setting.

from django.db import migrations

TRIGGERS = [
    ("reviewconsole_event", "reviewconsole_event_append_only"),
    ("reviewconsole_chainhead", "reviewconsole_chainhead_append_only"),
    ("reviewconsole_event", "reviewconsole_event_no_truncate"),
    ("reviewconsole_chainhead", "reviewconsole_chainhead_no_truncate"),
]


def fire_always(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, trigger in TRIGGERS:
            schema_editor.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")


def fire_in_origin_sessions(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, trigger in TRIGGERS:
            schema_editor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0012_worker_heartbeat"),
    ]

    operations = [
        migrations.RunPython(fire_always, fire_in_origin_sessions),
    ]
