# Every column of an event sealed by its hash (a new format, version 2; existing events keep
# theirs, version 1, and are never rehashed), a signed head recorded with each append, and
# database guards refusing to change or empty either table on both databases.

from django.conf import settings
from django.db import migrations, models

from reviewconsole.chain import audit_key_bytes, signed_head

POSTGRESQL_GUARDS = """
CREATE OR REPLACE FUNCTION reviewconsole_chainhead_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = 'audit chain heads are append-only (' || TG_OP || ' refused)';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER reviewconsole_chainhead_append_only
    BEFORE UPDATE OR DELETE ON reviewconsole_chainhead
    FOR EACH ROW EXECUTE FUNCTION reviewconsole_chainhead_append_only();

-- Row triggers do not see TRUNCATE. Only a session that set the flush setting (the test suite,
-- which empties every table between tests) may empty the audit tables.
CREATE OR REPLACE FUNCTION reviewconsole_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    IF current_setting('reviewconsole.allow_audit_flush', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING MESSAGE =
        'audit records are append-only (TRUNCATE of ' || TG_TABLE_NAME || ' refused)';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER reviewconsole_event_no_truncate
    BEFORE TRUNCATE ON reviewconsole_event
    FOR EACH STATEMENT EXECUTE FUNCTION reviewconsole_audit_no_truncate();
CREATE TRIGGER reviewconsole_chainhead_no_truncate
    BEFORE TRUNCATE ON reviewconsole_chainhead
    FOR EACH STATEMENT EXECUTE FUNCTION reviewconsole_audit_no_truncate();
"""
POSTGRESQL_GUARDS_REMOVED = """
DROP TRIGGER IF EXISTS reviewconsole_chainhead_no_truncate ON reviewconsole_chainhead;
DROP TRIGGER IF EXISTS reviewconsole_event_no_truncate ON reviewconsole_event;
DROP FUNCTION IF EXISTS reviewconsole_audit_no_truncate();
DROP TRIGGER IF EXISTS reviewconsole_chainhead_append_only ON reviewconsole_chainhead;
DROP FUNCTION IF EXISTS reviewconsole_chainhead_append_only();
"""

# SQLite has no TRUNCATE (an unconditional DELETE is its equivalent) and no session settings: the
# DELETE triggers call a function that each connection of the console defines (see
# reviewconsole/audit.py); where it is not defined, as in the sqlite3 shell, the delete fails.
# Note: Django rebuilds a SQLite table for many field changes, which drops its triggers; a later
# migration changing these tables must create them again.
SQLITE_TRIGGERS = {
    "reviewconsole_event_no_update": (
        "BEFORE UPDATE ON reviewconsole_event "
        "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (UPDATE refused)'); END"
    ),
    "reviewconsole_event_no_delete": (
        "BEFORE DELETE ON reviewconsole_event WHEN NOT reviewconsole_audit_flush_allowed() "
        "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (DELETE refused)'); END"
    ),
    "reviewconsole_chainhead_no_update": (
        "BEFORE UPDATE ON reviewconsole_chainhead "
        "BEGIN SELECT RAISE(ABORT, 'audit chain heads are append-only (UPDATE refused)'); END"
    ),
    "reviewconsole_chainhead_no_delete": (
        "BEFORE DELETE ON reviewconsole_chainhead WHEN NOT reviewconsole_audit_flush_allowed() "
        "BEGIN SELECT RAISE(ABORT, 'audit chain heads are append-only (DELETE refused)'); END"
    ),
}


def add_guards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_GUARDS)
    elif schema_editor.connection.vendor == "sqlite":
        for name, body in SQLITE_TRIGGERS.items():
            schema_editor.execute(f"CREATE TRIGGER {name} {body}")


def drop_guards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRESQL_GUARDS_REMOVED)
    elif schema_editor.connection.vendor == "sqlite":
        for name in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


def anchor_existing(apps, schema_editor):
    """Sign the head of the chain as it stands; its events keep their format and hashes.

    A link already broken stays broken: verify_audit still walks every event.
    """
    Event = apps.get_model("reviewconsole", "Event")
    ChainHead = apps.get_model("reviewconsole", "ChainHead")
    db = schema_editor.connection.alias
    last = Event.objects.using(db).order_by("-id").values_list("id", "hash").first()
    if last is None:
        return
    key = audit_key_bytes(hmac_key=settings.AUDIT_HMAC_KEY, secret_key=settings.SECRET_KEY)
    head = signed_head(key, count=Event.objects.using(db).count(), event_id=last[0], hash=last[1])
    ChainHead.objects.using(db).create(
        count=head.count, event_id=head.event_id, hash=head.hash, signature=head.signature
    )


class Migration(migrations.Migration):
    dependencies = [
        ("reviewconsole", "0005_roles_agent_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="hash_version",
            field=models.PositiveSmallIntegerField(default=1, editable=False),
        ),
        migrations.CreateModel(
            name="ChainHead",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("count", models.PositiveBigIntegerField()),
                ("event_id", models.BigIntegerField()),
                ("hash", models.CharField(max_length=64)),
                ("signature", models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(anchor_existing, migrations.RunPython.noop),
        migrations.RunPython(add_guards, drop_guards),
    ]
