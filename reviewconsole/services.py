"""Writes owned by the console shell: users and their roles."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, TenantMembership
from reviewconsole.roles import STAFF_ROLES, Role
from reviewconsole.scopes import validate_scope_value
from reviewconsole.tenancy import forget

UNKNOWN_ROLE = "must be one of reviewer, operator, admin, agent"
BAD_USERNAME = "must be 1-150 characters of letters, digits and @.+-_"


@transaction.atomic
def user_set_role(
    *,
    username: str,
    role: str,
    password: str | None = None,
    actor: User | None = None,
    check_password_strength: bool = True,
    tenants: Sequence[str] | None = None,
) -> User:
    """Create or update ``username`` in exactly one role.

    ``tenants``: None leaves the user's tenant memberships as they are; a list replaces them
    (an empty list makes the user deployment-wide).
    """
    if role not in Role.values:
        raise ValidationFailure("role", UNKNOWN_ROLE)
    username_field = User._meta.get_field("username")
    try:
        username_field.clean(username, None)
    except ValidationError:
        raise ValidationFailure("username", BAD_USERNAME) from None
    user, created = User.objects.get_or_create(username=username)
    if password is not None:
        if check_password_strength:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise ValidationFailure("password", " ".join(exc.messages)) from None
        user.set_password(password)
    elif created:
        user.set_unusable_password()
    user.is_staff = role in STAFF_ROLES
    user.is_active = True
    user.save()
    user.groups.set([Group.objects.get(name=role)])
    if tenants is not None:
        clean = sorted({validate_scope_value(t, field="tenant") for t in tenants})
        TenantMembership.objects.filter(user=user).exclude(tenant__in=clean).delete()
        TenantMembership.objects.bulk_create(
            [TenantMembership(user=user, tenant=t) for t in clean], ignore_conflicts=True
        )
        forget(user)
    event_record(
        actor=actor,
        action=Action.USER_ROLE_SET,
        target=f"user:{username}",
        details={
            "role": role,
            "created": created,
            "password_set": password is not None,
            "tenants": None if tenants is None else sorted(set(tenants)),
        },
    )
    return user


def user_role(user: User) -> str | None:
    names = {g.name for g in user.groups.all()}
    for role in Role.values:
        if role in names:
            return role
    return None
