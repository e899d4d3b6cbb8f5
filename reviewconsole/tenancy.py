"""Tenant isolation: which tenants' memories a user may see or act on.

Every page, endpoint and service that shows or changes an item asks here. A user without
memberships is deployment-wide; with memberships, items of any other tenant do not exist for them
(pages answer 404, lists leave them out, services refuse with ``not_in_tenant``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Model, QuerySet

from reviewconsole.errors import ValidationFailure
from reviewconsole.models import TenantMembership

NOT_IN_TENANT = "not_in_tenant"
NOT_IN_TENANT_MESSAGE = "is a tenant this user is not a member of"
_CACHE_ATTRIBUTE = "_console_tenants"

M = TypeVar("M", bound=Model)


def tenants_of(user: User | AnonymousUser | None) -> frozenset[str] | None:
    """The tenants ``user`` is limited to, or None when the user is deployment-wide."""
    if user is None or not user.is_authenticated:
        return frozenset()
    if hasattr(user, _CACHE_ATTRIBUTE):
        cached: frozenset[str] | None = getattr(user, _CACHE_ATTRIBUTE)
        return cached
    tenants = frozenset(
        TenantMembership.objects.filter(user_id=user.pk).values_list("tenant", flat=True)
    )
    result = tenants or None
    setattr(user, _CACHE_ATTRIBUTE, result)
    return result


def may_access(user: User | AnonymousUser | None, tenant: str) -> bool:
    allowed = tenants_of(user)
    return allowed is None or tenant in allowed


def require_input_tenant(user: User | AnonymousUser | None, tenant: str, *, field: str) -> None:
    """A tenant named in an input (a file, a form) that ``user`` may not use is a bad value.

    Unlike an item of another tenant (refused with ``not_in_tenant``), the input is wrong, so the
    refusal names its ``field``.
    """
    if not may_access(user, tenant):
        raise ValidationFailure(field, f"{tenant!r} {NOT_IN_TENANT_MESSAGE}")


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


def forget(user: Any) -> None:
    """Drop the cached answer after memberships change."""
    if hasattr(user, _CACHE_ATTRIBUTE):
        delattr(user, _CACHE_ATTRIBUTE)
