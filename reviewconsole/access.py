"""What a signed-in user may do and where, read once: permissions and tenant memberships together.

Every service asks ``permissions.require``: the permission through Django's ``User.has_perm``,
then the tenant through ``tenancy.tenants_of``. Django's ``ModelBackend`` loads a user's
permissions with two statements (those given directly, those of the user's groups) and the
memberships took a third, so an API request, which loads its user afresh, paid three round
trips before doing anything. :class:`AccessBackend` is ``ModelBackend`` with the same rule
(an inactive user holds nothing; an active superuser every permission; anyone else the
permissions given directly or through a group) read by :func:`access_of` in one statement, a
union of the three compiled once (``reviewconsole.statements``), kept on the user object as
Django keeps its own (so a role or membership changed since is seen by the next request, or
after :func:`forget`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser, Group, Permission, User
from django.db.models import CharField, F, QuerySet, Value
from django.db.models.functions import Cast
from django.http import HttpRequest

from reviewconsole.models import TenantMembership, tenant_named
from reviewconsole.statements import INTEGER, Param, Statement

# The attribute a user object keeps its access on (this module's own, not Django's caches).
_ATTRIBUTE = "_console_access"
# The tenants a delegated credential (an OAuth token's tenant scopes) narrows this user object to.
_NARROWED = "_console_narrowed_tenants"
# No tenant is named this: what a user narrowed to none of their tenants is limited to.
_NOWHERE = frozenset({""})
_PERMISSION = "p"
_TENANT = "t"
_NAMED_TENANT = "k"
# No tenant is named this (names are non-empty): what the statement asks when none is named.
_NO_TENANT = ""


@dataclass(frozen=True)
class Access:
    """A user's permissions (``app_label.codename``) and the tenants of their memberships."""

    permissions: frozenset[str]
    tenants: frozenset[str]


NO_ACCESS = Access(frozenset(), frozenset())


def _permission_rows(ids: QuerySet[Any], column: str) -> QuerySet[Any]:
    """``(kind, permission id as text)`` rows: ids, not names, so the statement joins nothing
    (the names come from :func:`_names`)."""
    rows: QuerySet[Any] = (
        ids.order_by()
        .annotate(_kind=Value(_PERMISSION), _value=Cast(column, CharField()))
        .values_list("_kind", "_value")
    )
    return rows


# Every permission's ``app_label.codename`` by id, read once per process and again when a
# statement names an id not read yet (a permission a migration added since). Permissions are
# rows migrations write, as Django's content types are, which Django keeps the same way; their
# ids are never reused (a flush or a restore gives new ones, which are read when met).
# A new map replaces the old one whole, so a thread reading it never sees it half filled.
_names_by_id: dict[int, str] = {}
_names_lock = threading.Lock()


def _names(ids: set[int]) -> frozenset[str]:
    global _names_by_id
    names = _names_by_id
    if not ids <= names.keys():
        with _names_lock:
            rows = Permission.objects.values_list("id", "content_type__app_label", "codename")
            names = {pk: f"{app}.{codename}" for pk, app, codename in rows}
            _names_by_id = names
    return frozenset(names[pk] for pk in ids if pk in names)


def names_forget() -> None:
    """Read the names again at the next check."""
    global _names_by_id
    with _names_lock:
        _names_by_id = {}


def _access_queryset(user_id: int, tenant: str, *, active: bool, superuser: bool) -> QuerySet[Any]:
    memberships = (
        TenantMembership.objects.filter(user_id=user_id)
        .order_by()
        .annotate(_kind=Value(_TENANT), _value=F("tenant"))
        .values_list("_kind", "_value")
    )
    # Whether the tenant a request's scope names exists, read in the same round trip.
    named = (
        tenant_named(tenant)
        .annotate(_kind=Value(_NAMED_TENANT), _value=F("name"))
        .values_list("_kind", "_value")
    )
    if not active:
        return memberships.union(named, all=True)
    if superuser:
        return memberships.union(named, _permission_rows(Permission.objects.all(), "id"), all=True)
    direct = User.user_permissions.through.objects.filter(user_id=user_id)
    groups = User.groups.through.objects.filter(user_id=user_id).values("group_id")
    grouped = Group.permissions.through.objects.filter(group_id__in=groups)
    return memberships.union(
        named,
        _permission_rows(direct, "permission_id"),
        _permission_rows(grouped, "permission_id"),
        all=True,
    )


# Compiled once (building the union through the ORM costs twice what the database takes to
# answer it, on every request) and prepared on PostgreSQL (parsing and planning the union cost
# the server five times its answer); one per kind of user, as ModelBackend distinguishes them.
_ACCESS = {
    (active, superuser): Statement(
        lambda user_id, tenant, active=active, superuser=superuser: _access_queryset(
            user_id, tenant, active=active, superuser=superuser
        ),
        [Param("user_id", INTEGER), Param("tenant")],
        prepared=True,
    )
    for active in (True, False)
    for superuser in (True, False)
}


def _read(user: User, tenant: str) -> tuple[Access, bool]:
    statement = _ACCESS[(bool(user.is_active), bool(user.is_superuser))]
    permissions: set[int] = set()
    tenants: set[str] = set()
    named = False
    for kind, value in statement.rows(user_id=user.pk, tenant=tenant):
        if kind == _PERMISSION:
            permissions.add(int(value))
        elif kind == _TENANT:
            tenants.add(value)
        else:
            named = True
    access = Access(_names(permissions), _narrowed(user, frozenset(tenants)))
    setattr(user, _ATTRIBUTE, access)
    return access, named


def _narrowed(user: User, tenants: frozenset[str]) -> frozenset[str]:
    """The memberships ``tenants`` (empty: deployment-wide) as a delegated credential narrows
    them: to the tenants it names among the user's own, never wider; none left is nowhere."""
    narrowing: frozenset[str] | None = getattr(user, _NARROWED, None)
    if narrowing is None:
        return tenants
    left = narrowing if not tenants else tenants & narrowing
    return left or _NOWHERE


def narrow_tenants(user: User, tenants: frozenset[str]) -> frozenset[str] | None:
    """Limit this user object (one request's) to ``tenants`` among its own, as an OAuth token's
    tenant scopes do; answers the tenants it may then reach (None: the whole deployment)."""
    setattr(user, _NARROWED, frozenset(tenants))
    forget(user)
    reach = access_of(user).tenants
    return None if not reach else frozenset(reach - _NOWHERE)


def access_of(user: User | AnonymousUser | None) -> Access:
    """The access of ``user`` (nothing for no one or an anonymous user), read once per object."""
    if user is None or not user.is_authenticated:
        return NO_ACCESS
    cached: Access | None = getattr(user, _ATTRIBUTE, None)
    if cached is not None:
        return cached
    assert isinstance(user, User)
    return _read(user, _NO_TENANT)[0]


def tenant_read_with_access(user: User | AnonymousUser | None, tenant: str) -> bool | None:
    """Whether ``tenant`` exists, read with the access of ``user`` when that is not read yet
    (one round trip for both, as a request's first scope check needs); None when the access was
    read before (or there is no user), and the caller asks for the tenant itself."""
    if user is None or not user.is_authenticated or hasattr(user, _ATTRIBUTE) or not tenant:
        return None
    assert isinstance(user, User)
    return _read(user, tenant)[1]


def forget(user: Any) -> None:
    """Drop the kept access after a user's roles, permissions or memberships change."""
    if hasattr(user, _ATTRIBUTE):
        delattr(user, _ATTRIBUTE)


class AccessBackend(ModelBackend):
    """Django's ``ModelBackend`` (login, users, ``with_perm``), its permissions read with the
    user's memberships in one statement (:func:`access_of`). With ``PASSWORD_LOGIN`` off it
    checks no password at all, whichever page or command asks (people sign on instead)."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if not settings.PASSWORD_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        return set(access_of(user_obj).permissions)
