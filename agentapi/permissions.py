"""Whether a user holds a permission, answered by one small SQL query.

The rule is Django's ``ModelBackend`` rule: an active superuser holds every permission; anyone
else active holds the permissions given to them directly or through their groups (roles).
``User.has_perm`` answers it with two ORM queries whose construction costs more than the search
an agent asks for; this is the hot path of every API call, so the query is written once here.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection


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
    """True when ``user`` holds at least one of ``permissions`` (``"app_label.codename"``)."""
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
