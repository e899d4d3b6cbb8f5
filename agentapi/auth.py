"""Bearer-token authentication of agent service accounts for the HTTP API."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpRequest
from ninja.security import HttpBearer

from agentapi.services import token_user
from reviewconsole import tenancy

# Everything the permission and tenant checks of one request ask, in one statement: the user's
# permissions (direct and through groups) and tenant memberships.
_GRANTS_SQL = """
SELECT 'p', ct.app_label || '.' || p.codename
FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id
WHERE p.id IN (
    SELECT up.permission_id FROM auth_user_user_permissions up WHERE up.user_id = %s
    UNION
    SELECT gp.permission_id FROM auth_group_permissions gp
    JOIN auth_user_groups ug ON ug.group_id = gp.group_id WHERE ug.user_id = %s
)
UNION ALL
SELECT 't', m.tenant FROM reviewconsole_tenantmembership m WHERE m.user_id = %s
"""


def grants_loaded(user: User) -> None:
    """Load ``user``'s permissions and tenants with one query into the caches that
    ``user.has_perm`` (Django's ``_perm_cache``) and ``reviewconsole.tenancy`` read, so the
    checks of this request ask the database nothing more. Superusers keep Django's own rule."""
    if user.is_superuser or not user.is_active:
        return
    with connection.cursor() as cursor:
        cursor.execute(_GRANTS_SQL, [user.pk, user.pk, user.pk])
        rows = cursor.fetchall()
    user._perm_cache = {name for kind, name in rows if kind == "p"}  # type: ignore[attr-defined]
    tenants = frozenset(name for kind, name in rows if kind == "t")
    setattr(user, tenancy._CACHE_ATTRIBUTE, tenants or None)  # what tenants_of caches


class AgentToken(HttpBearer):
    """``Authorization: Bearer rca_…``; a revoked token or an inactive user is a 401."""

    def authenticate(self, request: HttpRequest, token: str) -> User | None:
        user = token_user(token)
        if user is not None:
            # Every endpoint but the liveness probe checks a permission, most a tenant too.
            if not request.path.endswith("/ping"):
                grants_loaded(user)
            request.user = user
        return user
