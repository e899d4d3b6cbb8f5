"""Permission names, and the one check every service makes before it reads or changes memory.

Names are Django's ``"app_label.codename"``. Which role holds which is said once, in
``reviewconsole.roles``; views, services and the API name a permission only through these
constants, and refuse only through :func:`require` (see docs/architecture.md, "Where a rule
lives").
"""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.models import AnonymousUser, User

from reviewconsole.access import tenant_read_with_access
from reviewconsole.errors import PermissionRefused
from reviewconsole.tenancy import (
    NOT_IN_TENANT,
    forbidden_tenant_message,
    is_deployment_wide,
    may_access,
    require_scope_tenant,
)

NOT_PERMITTED = "not_permitted"
DEPLOYMENT_WIDE_ONLY = "this spans every tenant: it needs a user whom no tenant limits"

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
# Review claims: an admin may break a reviewer's claim (audited).
BREAK_CLAIM = "reviewconsole.break_reviewclaim"
# Background task results (django-tasks-db): failures and retries, for deployment-wide admins
# to see (their arguments and tracebacks name every tenant's items).
VIEW_TASK_RESULT = "django_tasks_database.view_dbtaskresult"


def holds(user: User | AnonymousUser | None, *permissions: str) -> bool:
    """True when ``user`` is signed in and holds at least one of ``permissions``.

    Django's own rule, asked through ``User.has_perm`` (``ModelBackend``: an active superuser holds
    every permission, anyone else active those given directly or through groups). Django loads a
    user's permissions once per user object, so a request (which loads its user afresh) asks the
    database at most twice, and a role changed since is seen at the next request.
    """
    if user is None or not user.is_authenticated:
        return False
    return any(user.has_perm(name) for name in permissions)


def refusals(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...] | None,
    tenant: str | None = None,
    *,
    deployment_wide: bool = False,
    message: str | None = None,
    unmet: str = NOT_PERMITTED,
) -> Iterator[PermissionRefused]:
    """What stands between ``actor`` and an operation, in the order :func:`require` checks it:
    the permission (or one of several), then the tenant (``not_in_tenant``), then, for what spans
    every tenant (``deployment_wide``), that no tenant limits the actor. Lazy, so ``require``
    asks nothing past the first refusal; a review that lists every unmet condition takes all.
    ``permission`` None: checked already by the caller (only the tenant is asked)."""
    wanted = (
        () if permission is None else (permission,) if isinstance(permission, str) else permission
    )
    if permission is not None and not holds(actor, *wanted):
        yield PermissionRefused(
            message or f"this needs the permission {' or '.join(wanted)}", unmet=unmet
        )
    if tenant is not None and not may_access(actor, tenant):
        yield PermissionRefused(forbidden_tenant_message(tenant), unmet=NOT_IN_TENANT)
    if deployment_wide and not is_deployment_wide(actor):
        yield PermissionRefused(message or DEPLOYMENT_WIDE_ONLY, unmet=unmet)


def require(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...] | None,
    tenant: str | None = None,
    *,
    deployment_wide: bool = False,
    message: str | None = None,
    unmet: str = NOT_PERMITTED,
) -> None:
    """Refuse unless ``actor`` holds ``permission`` (or one of several) and may use ``tenant``
    (with ``deployment_wide``: is limited to no tenant, for what spans every tenant, such as the
    audit log or the synonym lexicon).

    ``message`` replaces the default sentence for the permission refusal (and the
    deployment-wide one); ``unmet`` its vocabulary name. A tenant of ``None`` is not checked
    (nothing of a tenant is read).
    """
    refused = next(
        refusals(
            actor,
            permission,
            tenant,
            deployment_wide=deployment_wide,
            message=message,
            unmet=unmet,
        ),
        None,
    )
    if refused is not None:
        raise refused


def permitted(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...],
    tenant: str | None = None,
    *,
    deployment_wide: bool = False,
) -> bool:
    """Whether :func:`require` would let ``actor`` through: for an edge that only shows or hides
    a control (an admin's ``has_add_permission``), asking the rule the service enforces."""
    return next(refusals(actor, permission, tenant, deployment_wide=deployment_wide), None) is None


def require_scope(
    actor: User | AnonymousUser | None,
    permission: str | tuple[str, ...] | None,
    tenant: str | None,
    *,
    message: str | None = None,
    field: str = "tenant",
) -> None:
    """The check of a request's scope (recall, a context block, a skill run, research, an
    investigation): ``require`` for its tenant, then the tenant must exist
    (``tenancy.UnknownTenant`` naming ``field``; the API and MCP answer that as ``require``'s
    refusal, so an unknown tenant and a forbidden one look the same to an agent). A scope
    without a tenant is not checked: its answer is ``fallback``/``needs_context``, nothing read.
    ``permission`` None: the caller checked the permission already (a request opened without
    its scope complete), so only the tenant's use and existence are checked."""
    # A request's first check reads the actor's access and the tenant in one round trip; the
    # refusals keep their order (the permission, the tenant's use, then its existence).
    exists = tenant_read_with_access(actor, tenant) if tenant is not None else None
    require(actor, permission, tenant, message=message)
    if tenant is not None:
        require_scope_tenant(actor, tenant, field=field, exists=exists)
