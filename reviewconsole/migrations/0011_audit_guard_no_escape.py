# The audit tables' guards without an escape hatch. Until now the TRUNCATE trigger (PostgreSQL)
# let any session that ran `SET reviewconsole.allow_audit_flush = 'on'` empty both tables, and
# SQLite's DELETE triggers asked a function each connection of the console defined from a
# setting. Now no statement of an ordinary session gets past them; only the tables' owner can
# (ALTER TABLE … DISABLE TRIGGER, DROP TRIGGER), which the signed chain head and the anchor file
# detect. See docs/operations.md#audit-verification.

from importlib import import_module

from django.db import migrations

POSTGRESQL_NO_TRUNCATE = """
CREATE OR REPLACE FUNCTION reviewconsole_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE =
        'audit records are append-only (TRUNCATE of ' || TG_TABLE_NAME || ' refused)';
END;
$$ LANGUAGE plpgsql;
"""

# Every trigger is created again, not only the two DELETE triggers that change: Django rebuilds
# a SQLite table for many field changes, dropping its triggers, and an earlier migration may have.
SQLITE_TRIGGERS = {
    "reviewconsole_event_no_update": (
        "BEFORE UPDATE ON reviewconsole_event "
        "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (UPDATE refused)'); END"
    ),
    "reviewconsole_event_no_delete": (
        "BEFORE DELETE ON reviewconsole_event "
        "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (DELETE refused)'); END"
    ),
    "reviewconsole_chainhead_no_update": (
        "BEFORE UPDATE ON reviewconsole_chainhead "
        "BEGIN SELECT RAISE(ABORT, 'audit chain heads are append-only (UPDATE refused)'); END"
    ),
    "reviewconsole_chainhead_no_delete": (
        "BEFORE DELETE ON reviewconsole_chainhead "
        "BEGIN SELECT RAISE(ABORT, 'audit chain heads are append-only (DELETE refused)'); END"
    ),
}


def _sqlite_triggers_replace(schema_editor, triggers):
    for name, body in triggers.items():
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
        schema_editor.execute(f"CREATE TRIGGER {name} {body}")


def guards_without_escape(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_NO_TRUNCATE)
    elif schema_editor.connection.vendor == "sqlite":
        _sqlite_triggers_replace(schema_editor, SQLITE_TRIGGERS)


def guards_with_escape(apps, schema_editor):
    previous = import_module("reviewconsole.migrations.0006_audit_integrity")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(previous.POSTGRESQL_GUARDS_REMOVED)
        schema_editor.execute(previous.POSTGRESQL_GUARDS)
    elif schema_editor.connection.vendor == "sqlite":
        _sqlite_triggers_replace(schema_editor, previous.SQLITE_TRIGGERS)


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0010_tenant"),
    ]

    operations = [
        migrations.RunPython(guards_without_escape, guards_with_escape),
    ]
