"""The application's PostgreSQL role: the rights it needs, and none that would lift the guard.

Migrations run as the role that owns the tables (the owner); the application connects as
another role that owns nothing, is no superuser and is no member of the owner, so it can
neither disable nor drop the audit tables' triggers, nor replace their functions, nor set
``session_replication_role``. ``grant_app_role`` (run as the owner after every ``migrate``)
checks that and grants it reading and writing of the console's tables, with only SELECT and
INSERT on the audit tables. See docs/operations.md, "Database roles".
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from reviewconsole.errors import ValidationFailure
from reviewconsole.guard import AUDIT_TABLES

NOT_POSTGRESQL = "database roles are PostgreSQL's; SQLite has none (nothing to grant)"
UNKNOWN_ROLE = "no such role; create it first (CREATE ROLE … LOGIN, see docs/operations.md)"


def _problems(cursor: Any, role: str) -> list[str]:
    """What makes ``role`` able to lift the guard, or more than the application's role."""
    cursor.execute(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication, "
        "pg_has_role(%s, current_user, 'MEMBER'), rolname = current_user, "
        "has_database_privilege(%s, current_database(), 'CREATE') "
        "FROM pg_roles WHERE rolname = %s",
        [role, role, role],
    )
    row = cursor.fetchone()
    if row is None:
        raise ValidationFailure("ROLE", UNKNOWN_ROLE)
    superuser, createrole, createdb, bypassrls, replication, member, itself, db_create = row
    problems = [
        text
        for flag, text in [
            (itself, "is the role running this command (the tables' owner)"),
            (superuser, "is a superuser"),
            (member, "is a member of the tables' owner"),
            (createrole, "may create roles"),
            (createdb, "may create databases"),
            (bypassrls, "bypasses row security"),
            (replication, "is a replication role"),
            (db_create, "may create schemas in this database"),
        ]
        if flag
    ]
    cursor.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = to_regrole(%s)::oid "
        "UNION ALL SELECT count(*) FROM pg_proc WHERE proowner = to_regrole(%s)::oid "
        "UNION ALL SELECT count(*) FROM pg_namespace WHERE nspowner = to_regrole(%s)::oid",
        [role, role, role],
    )
    if any(count for (count,) in cursor.fetchall()):
        problems.append("owns tables, functions or schemas in this database")
    cursor.execute("SHOW server_version_num")
    if int(cursor.fetchone()[0]) >= 150000:
        cursor.execute(
            "SELECT has_parameter_privilege(%s, 'session_replication_role', 'SET')", [role]
        )
        if cursor.fetchone()[0]:
            problems.append("may set session_replication_role")
    return problems


def app_role_grant(role: str) -> dict[str, Any]:
    """Grant ``role`` what the application needs on the current schema's tables and sequences,
    after checking it can lift no guard; refused (nothing granted) otherwise."""
    if connection.vendor != "postgresql":
        raise ValidationFailure("DATABASE_URL", NOT_POSTGRESQL)
    with transaction.atomic(), connection.cursor() as cursor:
        problems = _problems(cursor, role)
        if problems:
            raise ValidationFailure(
                "ROLE",
                f"{role} {'; '.join(problems)}: the application's role must not be able to "
                "lift the audit guard (see docs/operations.md, Database roles)",
            )
        cursor.execute("SELECT current_schema()")
        schema = cursor.fetchone()[0]
        quoted_role = connection.ops.quote_name(role)
        quoted_schema = connection.ops.quote_name(schema)
        # Nobody but the owner creates objects in the schema (PostgreSQL before 15 let PUBLIC).
        cursor.execute(f"REVOKE CREATE ON SCHEMA {quoted_schema} FROM PUBLIC")
        cursor.execute(f"REVOKE CREATE ON SCHEMA {quoted_schema} FROM {quoted_role}")
        cursor.execute(f"GRANT USAGE ON SCHEMA {quoted_schema} TO {quoted_role}")
        tables = f"ALL TABLES IN SCHEMA {quoted_schema}"
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO {quoted_role}")
        cursor.execute(f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON {tables} FROM {quoted_role}")
        audit = ", ".join(connection.ops.quote_name(t) for t in AUDIT_TABLES)
        cursor.execute(f"REVOKE UPDATE, DELETE ON {audit} FROM {quoted_role}")
        sequences = f"ALL SEQUENCES IN SCHEMA {quoted_schema}"
        cursor.execute(f"GRANT USAGE, SELECT, UPDATE ON {sequences} TO {quoted_role}")
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", [schema])
        count = int(cursor.fetchone()[0])
    return {"role": role, "schema": schema, "tables": count, "audit_tables": list(AUDIT_TABLES)}
