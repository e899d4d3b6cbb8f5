"""Permission names, and the one check every service makes before it reads or changes memory.

Names are Django's ``"app_label.codename"``. Which role holds which is said once, in
``reviewconsole.roles``; views, services and the API name a permission only through these
constants, and refuse only through :func:`require` (see docs/architecture.md, "Where a rule
lives").
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth.models import AnonymousUser, Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from reviewconsole.errors import PermissionRefused
from reviewconsole.tenancy import (
    NOT_IN_TENANT,
    forbidden_tenant_message,
    may_access,
    require_scope_tenant,
)

NOT_PERMITTED = "not_permitted"

# Knowledge base.
VIEW_DOCUMENT = "knowledge.view_document"
ADD_DOCUMENT = "knowledge.add_document"
CHANGE_DOCUMENT = "knowledge.change_document"
APPROVE_DOCUMENT = "knowledge.approve_document"
REVOKE_DOCUMENT = "knowledge.revoke_document"
SEARCH_KNOWLEDGE = "knowledge.search_knowledge"
VIEW_SYNONYM = "knowledge.view_synonym"
ADD_SYNONYM = "knowledge.add_synonym"
CHANGE_SYNONYM = "knowledge.change_synonym"
DELETE_SYNONYM = "knowledge.delete_synonym"

# Experience memory.
VIEW_CASE = "experience.view_case"
VIEW_SKILL = "experience.view_skill"
VIEW_RUN = "experience.view_run"
ADD_CASE = "experience.add_case"
ADD_SKILL = "experience.add_skill"
PROPOSE_CASE = "experience.propose_case"
VERIFY_EVIDENCE = "experience.verify_evidence"
REVIEW_CASE = "experience.review_case"
USE_EXPERIENCE = "experience.use_experience"
VIEW_LESSON = "experience.view_lesson"
ADD_LESSON = "experience.add_lesson"
RESOLVE_LESSON_CONFLICT = "experience.resolve_lessonconflict"

# Investigations: reading stored runs of tickets (running one needs SEARCH_KNOWLEDGE).
VIEW_INVESTIGATION = "investigations.view_investigation"

# Audit, users and tokens.
VIEW_EVENT = "reviewconsole.view_event"
VIEW_USER = "auth.view_user"
ADD_USER = "auth.add_user"
CHANGE_USER = "auth.change_user"
VIEW_GROUP = "auth.view_group"
VIEW_APITOKEN = "agentapi.view_apitoken"
REVOKE_APITOKEN = "agentapi.revoke_apitoken"
# The tenant registry: admins read it; deployment-wide admins add to it (never change or delete).
VIEW_TENANT = "reviewconsole.view_tenant"
ADD_TENANT = "reviewconsole.add_tenant"
# Background task results (django-tasks-db): failures and retries, for deployment-wide admins
# to see (their arguments and tracebacks name every tenant's items).
VIEW_TASK_RESULT = "django_tasks_database.view_dbtaskresult"


@cache
def _holds_sql(count: int) -> str:
    quote = connection.ops.quote_name
    user_groups = User.groups.through._meta
    group_permissions = Group.permissions.through._meta
    user_permissions = User.user_permissions.through._meta

    def column(meta: object, field: str) -> str:
        return quote(meta.get_field(field).column)  # type: ignore[attr-defined]

    wanted = " OR ".join(["(ct.app_label = %s AND p.codename = %s)"] * count)
    # Only quoted table and column names from model metadata are interpolated; every value is
    # a query parameter.
    return (
        f"SELECT 1 FROM {quote(Permission._meta.db_table)} p "  # noqa: S608
        f"JOIN {quote(ContentType._meta.db_table)} ct ON ct.id = p.content_type_id "
        f"WHERE ({wanted}) AND ("
        f"p.id IN (SELECT gp.{column(group_permissions, 'permission')} "
        f"FROM {quote(group_permissions.db_table)} gp "
        f"JOIN {quote(user_groups.db_table)} ug "
        f"ON ug.{column(user_groups, 'group')} = gp.{column(group_permissions, 'group')} "
        f"WHERE ug.{column(user_groups, 'user')} = %s) "
        f"OR p.id IN (SELECT up.{column(user_permissions, 'permission')} "
        f"FROM {quote(user_permissions.db_table)} up "
        f"WHERE up.{column(user_permissions, 'user')} = %s)"
        f") LIMIT 1"
    )


def holds_any(user: User, permissions: tuple[str, ...]) -> bool:
    """True when ``user`` holds at least one of ``permissions``, answered by one SQL query.

    The rule is Django's ``ModelBackend`` rule: an active superuser holds every permission;
    anyone else active holds the permissions given to them directly or through their groups.
    ``User.has_perm`` answers with two ORM queries whose construction costs more than the search
    an agent asks for, so the API's hot path asks here instead.
    """
    if not (user.is_active and permissions):
        return False
    if user.is_superuser:
        return True
    params: list[str | int] = []
    for permission in permissions:
        params.extend(permission.split(".", 1))
    params += [user.pk, user.pk]
    with connection.cursor() as cursor:
        cursor.execute(_holds_sql(len(permissions)), params)
        return cursor.fetchone() is not None


def holds(user: User | AnonymousUser | None, *permissions: str) -> bool:
    """True when ``user`` is signed in and holds at least one of ``permissions``.

    A user whose permissions Django has already loaded is answered from that cache; otherwise
    one query answers (a request usually asks once).
    """
    if user is None or not user.is_authenticated or not isinstance(user, User):
        return False
    if hasattr(user, "_perm_cache"):
        return any(user.has_perm(name) for name in permissions)
    return holds_any(user, permissions)


def require(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...],
    tenant: str | None = None,
    *,
    message: str | None = None,
    unmet: str = NOT_PERMITTED,
) -> None:
    """Refuse unless ``actor`` holds ``permission`` (or one of several) and may use ``tenant``.

    ``message`` replaces the default sentence for the permission refusal; ``unmet`` its
    vocabulary name. A tenant of ``None`` is not checked (nothing of a tenant is read).
    """
    wanted = (permission,) if isinstance(permission, str) else permission
    if not holds(actor, *wanted):
        raise PermissionRefused(
            message or f"this needs the permission {' or '.join(wanted)}", unmet=unmet
        )
    if tenant is not None and not may_access(actor, tenant):
        raise PermissionRefused(forbidden_tenant_message(tenant), unmet=NOT_IN_TENANT)


def require_scope(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...],
    tenant: str | None,
    *,
    message: str | None = None,
    field: str = "tenant",
) -> None:
    """The check of a request's scope (recall, a context block, a skill run, research, an
    investigation): ``require`` for its tenant, then the tenant must exist
    (``tenancy.UnknownTenant`` naming ``field``; the API and MCP answer that as ``require``'s
    refusal, so an unknown tenant and a forbidden one look the same to an agent). A scope
    without a tenant is not checked: its answer is ``fallback``/``needs_context``, nothing read."""
    require(actor, permission, tenant, message=message)
    if tenant is not None:
        require_scope_tenant(actor, tenant, field=field)
