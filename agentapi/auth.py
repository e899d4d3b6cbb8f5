"""Bearer-token authentication of agent service accounts for the HTTP API.

Each request authenticates with one statement: the token's row (found by its prefix, only while
its user is in the agent role), the user, and, for every endpoint but the liveness probe, the
user's permissions (direct and through groups) and tenant memberships. Nothing is cached between
requests, so a revoked token, a removed membership or a changed role takes effect at the next
request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from ninja.security import HttpBearer

from agentapi.models import ApiToken
from agentapi.services import LAST_USED_RESOLUTION
from agentapi.tokens import digest_matches, token_prefix
from reviewconsole import clock, tenancy
from reviewconsole.roles import TOKEN_ROLE

# The user's fields read with the token, in the model's order (as ``Model.from_db`` takes them);
# the others (password, dates) stay deferred, loaded only if something asks for them.
USER_FIELDS = tuple(
    field.attname
    for field in User._meta.concrete_fields
    if field.attname not in {"password", "last_login", "date_joined"}
)
_BOOLEAN_FIELDS = frozenset({"is_staff", "is_active", "is_superuser"})
# One row per token match (kind 'u'), permission ('p') and tenant ('t'); the columns a kind does
# not use are NULL.
_WIDTH = 5 + len(USER_FIELDS)


@cache
def _statement(grants: bool) -> str:
    token_table = ApiToken._meta.db_table
    user_columns = ", ".join(
        f"u.{field.column}" for field in User._meta.concrete_fields if field.attname in USER_FIELDS
    )
    nulls = ", ".join(["NULL"] * (_WIDTH - 2))
    sql = f"""
WITH token AS (
    SELECT t.id, t.user_id, t.token_hash, t.revoked_at, t.last_used_at
    FROM {token_table} t
    WHERE t.prefix = %s AND EXISTS (
        SELECT 1 FROM auth_user_groups ug JOIN auth_group g ON g.id = ug.group_id
        WHERE ug.user_id = t.user_id AND g.name = %s
    )
)
SELECT 'u', token.token_hash, token.id,
       CASE WHEN token.revoked_at IS NULL THEN 0 ELSE 1 END,
       CASE WHEN token.last_used_at IS NULL OR token.last_used_at <= %s THEN 1 ELSE 0 END,
       {user_columns}
FROM token JOIN auth_user u ON u.id = token.user_id"""  # noqa: S608 (names from the models)
    if grants:
        sql += f"""
UNION ALL
SELECT 'p', ct.app_label || '.' || p.codename, {nulls}
FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id
WHERE p.id IN (
    SELECT up.permission_id FROM auth_user_user_permissions up
    JOIN token ON token.user_id = up.user_id
    UNION
    SELECT gp.permission_id FROM auth_group_permissions gp
    JOIN auth_user_groups ug ON ug.group_id = gp.group_id
    JOIN token ON token.user_id = ug.user_id
)
UNION ALL
SELECT 't', m.tenant, {nulls}
FROM reviewconsole_tenantmembership m JOIN token ON token.user_id = m.user_id"""  # noqa: S608
    return sql


@dataclass(frozen=True)
class _Match:
    token_id: int
    digest: str
    revoked: bool
    stale_use: bool
    user: User


def _user(values: tuple[object, ...]) -> User:
    converted = [
        bool(value) if name in _BOOLEAN_FIELDS else value
        for name, value in zip(USER_FIELDS, values, strict=True)
    ]
    return User.from_db(connection.alias, list(USER_FIELDS), converted)


def request_user(text: str, *, grants: bool = True) -> User | None:
    """The active agent a valid, unrevoked token acts as, or None; with ``grants``, its
    permissions and tenants loaded into the caches ``user.has_perm`` (Django's ``_perm_cache``)
    and ``reviewconsole.tenancy`` read, so the checks of the request ask nothing more.

    The same rules as ``agentapi.services.token_user``, in one statement.
    """
    prefix = token_prefix(text)
    if prefix is None:
        digest_matches(text.strip(), None)  # a malformed token costs what a miss costs
        return None
    now = clock.now()
    stale = connection.ops.adapt_datetimefield_value(now - LAST_USED_RESOLUTION)
    with connection.cursor() as cursor:
        cursor.execute(_statement(grants), [prefix, TOKEN_ROLE, stale])
        rows = cursor.fetchall()
    match: _Match | None = None
    permissions: set[str] = set()
    tenants: set[str] = set()
    for kind, name, token_id, revoked, stale_use, *user_values in rows:
        if kind == "u":
            match = _Match(token_id, name, bool(revoked), bool(stale_use), _user(user_values))
        elif kind == "p":
            permissions.add(name)
        else:
            tenants.add(name)
    if not digest_matches(text.strip(), match.digest if match is not None else None):
        return None
    assert match is not None
    user = match.user
    if match.revoked or not user.is_active:
        return None
    if match.stale_use:
        ApiToken.objects.filter(pk=match.token_id).update(last_used_at=now)
    if grants:
        if not user.is_superuser:
            # A superuser keeps Django's own rule (every permission), read from no cache.
            user._perm_cache = permissions  # type: ignore[attr-defined]
        setattr(user, tenancy._CACHE_ATTRIBUTE, frozenset(tenants) or None)  # as tenants_of caches
    return user


class AgentToken(HttpBearer):
    """``Authorization: Bearer rca_…``; a revoked token or an inactive user is a 401."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        # Every endpoint but the liveness probe checks a permission, most a tenant too.
        user = request_user(token, grants=not request.path.endswith("/ping"))
        if user is not None:
            request.user = user
        return user
