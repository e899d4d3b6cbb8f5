"""The production recipe's connection cannot lift the audit guard.

Every process of the deployment connects as the recipe's application role (``NAME_app``): no
superuser, owning nothing, no member of the owner that ran the migrations. What a superuser's
session could do with one SET, or the tables' owner with ALTER TABLE, it cannot.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.scaleout.conftest import GROUP, Deployment

pytestmark = GROUP

LIFTING = [
    "SET session_replication_role = replica",
    "TRUNCATE reviewconsole_event, reviewconsole_chainhead",
    "DELETE FROM reviewconsole_event",
    "ALTER TABLE reviewconsole_event DISABLE TRIGGER USER",
    "DROP TRIGGER reviewconsole_event_append_only ON reviewconsole_event",
    "SET ROLE postgres",
]


def test_the_deployment_connects_as_a_role_that_cannot_lift_the_guard(
    deployment: Deployment,
) -> None:
    cluster = deployment.cluster
    app_url = cluster.env["DATABASE_URL"]
    assert app_url == cluster.recipe.app_url

    with psycopg.connect(app_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_user, rolsuper, pg_has_role(current_user, %s, 'MEMBER')"
            " FROM pg_roles WHERE rolname = current_user",
            [cluster.recipe.owner_role],
        ).fetchone()
        assert row == (cluster.recipe.app_role, False, False)
        owned = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relowner = current_user::regrole::oid"
        ).fetchone()
        assert owned == (0,)
        events = conn.execute("SELECT count(*) FROM reviewconsole_event").fetchone()
        assert events is not None and events[0] > 0  # the demo was loaded through this role
        for statement in LIFTING:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM reviewconsole_event").fetchone() == events

    assert cluster.manage("verify_audit", "--json").returncode == 0
