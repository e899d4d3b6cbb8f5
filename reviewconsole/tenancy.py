"""Tenant isolation: which tenants' memories a user may see or act on.

Every page, endpoint and service that shows or changes an item asks here. A user without
memberships is deployment-wide; with memberships, items of any other tenant do not exist for them
(pages answer 404, lists leave them out, services refuse with ``not_in_tenant``).

Tenants are records (``Tenant``): every tenant value that comes in — a membership, an import, the
scope of a request — names a known tenant or is refused naming its field (``UnknownTenant``).
Memberships only ever name known tenants, so a member's own tenants need no lookup.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.db.models import Model, QuerySet

from reviewconsole import clock
from reviewconsole.access import access_of
from reviewconsole.access import forget as access_forget
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Tenant, tenant_named
from reviewconsole.statements import Param, Statement

NOT_IN_TENANT = "not_in_tenant"
NOT_IN_TENANT_MESSAGE = "is a tenant this user is not a member of"
UNKNOWN_TENANT_MESSAGE = "is not a tenant of this deployment"

M = TypeVar("M", bound=Model)


def tenants_of(user: User | AnonymousUser | None) -> frozenset[str] | None:
    """The tenants ``user`` is limited to, or None when the user is deployment-wide."""
    if user is None or not user.is_authenticated:
        return frozenset()
    # Read with the user's permissions, in one statement, once per user object.
    return access_of(user).tenants or None


def may_access(user: User | AnonymousUser | None, tenant: str) -> bool:
    allowed = tenants_of(user)
    return allowed is None or tenant in allowed


def forbidden_tenant_message(tenant: str) -> str:
    """What a refusal of a tenant the user may not use says (``permissions.require``)."""
    return f"tenant {tenant!r} {NOT_IN_TENANT_MESSAGE}"


class UnknownTenant(ValidationFailure):
    """A tenant value that names no tenant of the deployment.

    Commands and console forms show it as a bad value of ``field``; the HTTP API and MCP answer it
    exactly as a tenant the caller may not use (``forbidden_tenant_message``), so an agent
    cannot tell which tenants exist.
    """

    def __init__(self, tenant: str, *, field: str) -> None:
        super().__init__(field, f"{tenant!r} {UNKNOWN_TENANT_MESSAGE}")
        self.tenant = tenant


# Asked on every request whose scope names a tenant by a deployment-wide user (an agent).
_TENANT_NAMED = Statement(
    lambda name: tenant_named(name).values_list("pk")[:1],
    [Param("name")],
)


def tenant_exists(name: str) -> bool:
    return bool(_TENANT_NAMED.rows(name=name))


def require_known_tenant(name: str, *, field: str = "tenant") -> None:
    if not tenant_exists(name):
        raise UnknownTenant(name, field=field)


def require_scope_tenant(
    user: User | AnonymousUser | None,
    tenant: str,
    *,
    field: str = "tenant",
    exists: bool | None = None,
) -> None:
    """The tenant of a request's scope (recall, research, a skill run, an investigation) must
    exist. Called after the user's permission for it was checked; a member's own tenants are
    known, so only a deployment-wide user's request costs a lookup. ``exists``: the answer the
    caller read already (``access.tenant_read_with_access``), if any."""
    allowed = tenants_of(user)
    if allowed is not None and tenant in allowed:
        return
    if exists is None:
        exists = tenant_exists(tenant)
    if not exists:
        raise UnknownTenant(tenant, field=field)


def tenant_ensure(
    *, name: str, actor: User | AnonymousUser | None, now: datetime | None = None
) -> tuple[Tenant, bool]:
    """The tenant ``name``, created (and audited as ``reviewconsole.tenant.create``) when new.

    Runs in the caller's transaction, so a refused or failed import creates no tenant; who may
    create one is the caller's rule (``require_input_tenant``, ``services.tenant_create``).
    """
    existing = Tenant.objects.filter(name=name).first()
    if existing is not None:
        return existing, False
    creator = actor if isinstance(actor, User) else None
    now = now or clock.now()
    try:
        with transaction.atomic():
            tenant = Tenant.objects.create(name=name, created_at=now, created_by=creator)
            event_record(actor=actor, action=Action.TENANT_CREATE, target=f"tenant:{name}", at=now)
    except IntegrityError:
        # A concurrent transaction created it first (and audited that).
        return Tenant.objects.get(name=name), False
    return tenant, True


def require_input_tenant(
    user: User | AnonymousUser | None,
    tenant: str,
    *,
    field: str,
    create: bool = False,
    now: datetime | None = None,
) -> None:
    """A tenant named in an input (a file, a form) must be one ``user`` may use, and known.

    Unlike an item of another tenant (refused with ``not_in_tenant``), the input is wrong, so the
    refusal names its ``field``. With ``create`` (an import), a deployment-wide user's input may
    name a new tenant: it is created, audited, in the import's transaction.
    """
    allowed = tenants_of(user)
    if allowed is not None:
        if tenant not in allowed:
            raise ValidationFailure(field, f"{tenant!r} {NOT_IN_TENANT_MESSAGE}")
        return
    if tenant_exists(tenant):
        return
    if create and user is not None and user.is_authenticated:
        tenant_ensure(name=tenant, actor=user, now=now)
        return
    raise UnknownTenant(tenant, field=field)


def is_deployment_wide(user: User | AnonymousUser | None) -> bool:
    return user is not None and user.is_authenticated and tenants_of(user) is None


def visible(
    queryset: QuerySet[M], user: User | AnonymousUser | None, field: str = "tenant"
) -> QuerySet[M]:
    """``queryset`` without the rows of tenants ``user`` may not see."""
    allowed = tenants_of(user)
    if allowed is None:
        return queryset
    return queryset.filter(**{f"{field}__in": sorted(allowed)})


def default_tenant(user: User | AnonymousUser | None, default: str) -> str:
    """The tenant a form starts with: ``default`` (the deployment's setting) unless the user is
    limited to other tenants, then the first of the user's own."""
    allowed = tenants_of(user)
    if allowed is None or default in allowed or not allowed:
        return default
    return min(allowed)


def forget(user: Any) -> None:
    """Drop the kept answer (and the user's kept permissions) after memberships change."""
    access_forget(user)
