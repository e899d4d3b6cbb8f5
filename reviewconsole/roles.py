"""Roles are Django groups; this module is the one place that says what each may do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import TextChoices
from django.utils.translation import pgettext_lazy

from reviewconsole import permissions as P


class Role(TextChoices):
    # The labels are the roles' names in the reader's language (the admin's role column).
    REVIEWER = "reviewer", pgettext_lazy("role", "reviewer")
    OPERATOR = "operator", pgettext_lazy("role", "operator")
    ADMIN = "admin", pgettext_lazy("role", "admin")
    AGENT = "agent", pgettext_lazy("role", "agent")


def role_name(role: str) -> str:
    """A role code in the reader's language; an unknown code as itself."""
    return str(Role(role).label) if role in Role.values else role


# What each role may do; the names live in reviewconsole.permissions.
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    Role.REVIEWER: (
        P.VIEW_DOCUMENT,
        P.SEARCH_KNOWLEDGE,
        P.VIEW_CASE,
        P.VIEW_SKILL,
        P.VIEW_RUN,
        P.ADD_CASE,
        P.ADD_SKILL,
        P.VERIFY_EVIDENCE,
        P.REVIEW_CASE,
        P.USE_EXPERIENCE,
        P.VIEW_LESSON,
        P.ADD_LESSON,
        P.RESOLVE_LESSON_CONFLICT,
        P.VIEW_INVESTIGATION,
    ),
    Role.OPERATOR: (
        P.VIEW_DOCUMENT,
        P.ADD_DOCUMENT,
        P.CHANGE_DOCUMENT,
        P.APPROVE_DOCUMENT,
        P.REVOKE_DOCUMENT,
        P.SEARCH_KNOWLEDGE,
        P.VIEW_SYNONYM,
        P.ADD_SYNONYM,
        P.CHANGE_SYNONYM,
        P.DELETE_SYNONYM,
        P.VIEW_CASE,
        P.VIEW_SKILL,
        P.ADD_CASE,
        P.ADD_SKILL,
        P.VIEW_LESSON,
        P.ADD_LESSON,
        P.VIEW_INVESTIGATION,
    ),
    Role.ADMIN: (
        P.VIEW_EVENT,
        P.VIEW_USER,
        P.ADD_USER,
        P.CHANGE_USER,
        P.VIEW_GROUP,
        P.VIEW_DOCUMENT,
        P.VIEW_SYNONYM,
        P.VIEW_CASE,
        P.VIEW_SKILL,
        P.VIEW_RUN,
        P.VIEW_LESSON,
        P.VIEW_APITOKEN,
        P.REVOKE_APITOKEN,
        P.VIEW_TASK_RESULT,
        P.VIEW_INVESTIGATION,
        P.VIEW_TENANT,
        P.ADD_TENANT,
        P.BREAK_CLAIM,
    ),
    Role.AGENT: (
        P.SEARCH_KNOWLEDGE,
        P.PROPOSE_CASE,
        P.USE_EXPERIENCE,
        P.VIEW_RUN,
    ),
}

# Roles that work in the Django admin as well as the console.
STAFF_ROLES = frozenset({Role.REVIEWER, Role.OPERATOR, Role.ADMIN})

# Who may hand out which role: a user who manages users assigns roles at or below their own
# rank and manages only users at or below it. A superuser ranks above every role; superusers are
# made on the shell only (`createsuperuser`), never by a role.
ROLE_RANK: dict[str, int] = {Role.AGENT: 0, Role.REVIEWER: 1, Role.OPERATOR: 1, Role.ADMIN: 2}
SUPERUSER_RANK = 3
NO_ROLE_RANK = -1

# The only role whose users may hold API tokens.
TOKEN_ROLE = Role.AGENT


def roles_at_or_below(rank: int) -> list[str]:
    """The roles a user of ``rank`` may assign, in declaration order."""
    return [role for role in Role.values if ROLE_RANK[role] <= rank]


def create_permissions_now(apps: Any) -> None:
    """Create every model's permissions inside a migration.

    Django creates them after the whole migrate run, but a data migration that grants them
    needs them at once; migration states carry no ``models_module``, so it is lent for the call.
    """
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None


def sync_roles(apps: Any, role_permissions: dict[str, tuple[str, ...]] | None = None) -> None:
    """Create or update every role group with exactly its permissions.

    Migrations pass the map as it stood when they were written, so an old migration never asks
    for a permission of an app migrated after it; tests pass nothing (the current map).
    """
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, names in (ROLE_PERMISSIONS if role_permissions is None else role_permissions).items():
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.set(_permissions(Permission, names))


def _permissions(Permission: Any, names: Iterable[str]) -> list[Any]:
    found = []
    for name in names:
        app_label, codename = name.split(".", 1)
        try:
            found.append(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        except Permission.DoesNotExist:
            raise LookupError(f"permission {name} does not exist") from None
    return found
