"""Writes owned by the console shell: users, their roles and their tenant memberships.

Two paths change users. The shell (``add_user``, ``createsuperuser``, ``changepassword``) is
trusted: whoever runs it runs the deployment. The Django admin is not: there an admin manages
only users at or below their own rank and inside their own tenants, never their own role,
activity or memberships, and never anyone's superuser flag or another user's password. The rules
live here, in the ``user_*_check`` functions, which the admin's forms call to show errors and the
writing services call again before they write. Every write records its audit event in the same
transaction; passwords never reach the event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet

from reviewconsole import accounts, clock
from reviewconsole.audit import event_record
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, SignOnIdentity, Tenant, TenantMembership
from reviewconsole.permissions import ADD_TENANT, CHANGE_USER, require
from reviewconsole.roles import (
    NO_ROLE_RANK,
    ROLE_RANK,
    STAFF_ROLES,
    SUPERUSER_RANK,
    Role,
    roles_at_or_below,
)
from reviewconsole.scopes import validate_scope_value
from reviewconsole.signon import INACTIVE, NO_TENANT, SignOnMapping, mapped_access
from reviewconsole.tenancy import (
    forget,
    require_known_tenant,
    tenant_ensure,
    tenants_of,
)

UNKNOWN_ROLE = "must be one of reviewer, operator, admin, agent"
BAD_USERNAME = "must be 1-150 characters of letters, digits and @.+-_"
USERNAME_TAKEN = "is already taken"
CANNOT_MANAGE_USERS = "you may not manage users"
NOT_MANAGEABLE = (
    "is a user you may not manage (a higher role, a superuser, or outside your tenants)"
)
ROLE_ABOVE_OWN = "is a role above your own"
OWN_ROLE = "you may not change your own role"
OWN_ACTIVE = "you may not deactivate or reactivate yourself"
TENANT_CREATE_REFUSED = "creating a tenant needs a deployment-wide admin"
OWN_TENANTS = "you may not change your own tenant memberships"
TENANT_NOT_YOURS = "names a tenant you are not a member of: {tenants}"
TENANTS_REQUIRED = (
    "must name at least one of your tenants: a tenant-limited admin manages only users of its "
    "tenants and may not make a user deployment-wide"
)
SET_BY_OWNER_ONLY = (
    "of another user cannot be set in the console; the user changes it after logging in, or "
    "someone with shell access runs `manage.py changepassword`"
)
PROFILE_FIELDS = ("first_name", "last_name", "email")
SYSTEM_AGENT = "system-agent"


# --- Who may manage whom -----------------------------------------------------------------------


def user_role(user: User) -> str | None:
    names = {g.name for g in user.groups.all()}
    for role in Role.values:
        if role in names:
            return role
    return None


def user_rank(user: User) -> int:
    if user.is_superuser:
        return SUPERUSER_RANK
    role = user_role(user)
    return ROLE_RANK[role] if role is not None else NO_ROLE_RANK


def assignable_roles(actor: User) -> list[str]:
    """The roles ``actor`` may give in the admin: those at or below their own rank."""
    return roles_at_or_below(user_rank(actor))


def may_manage_users(actor: User | AnonymousUser) -> bool:
    return (
        isinstance(actor, User)
        and actor.is_active
        and actor.is_staff
        and actor.has_perm(CHANGE_USER)
    )


def users_manageable_by(actor: User) -> QuerySet[User]:
    """The users ``actor`` sees and manages in the admin (themselves included, read mostly)."""
    if not may_manage_users(actor):
        return User.objects.none()
    others = User.objects.all()
    if not actor.is_superuser:
        rank = user_rank(actor)
        above = [role for role in Role.values if ROLE_RANK[role] > rank]
        others = others.exclude(is_superuser=True)
        if above:
            others = others.exclude(groups__name__in=above)
    allowed = tenants_of(actor)
    if allowed is not None:
        # Users of its tenants only: a deployment-wide user, or one also in another tenant,
        # is out of a tenant-limited admin's reach.
        members = TenantMembership.objects.values("user_id")
        outside = members.exclude(tenant__in=sorted(allowed))
        others = others.filter(pk__in=members).exclude(pk__in=outside)
    return User.objects.filter(Q(pk__in=others.values("pk")) | Q(pk=actor.pk))


def user_manage_check(*, actor: User, user: User) -> None:
    """Refuse unless ``actor`` may manage ``user`` at all."""
    if not may_manage_users(actor):
        raise PermissionRefused(CANNOT_MANAGE_USERS)
    if not users_manageable_by(actor).filter(pk=user.pk).exists():
        raise ValidationFailure("user", NOT_MANAGEABLE)


def user_role_check(*, actor: User, user: User | None, role: str) -> None:
    """Refuse ``role`` for ``user`` (None: a new user) when ``actor`` may not give it."""
    if role not in Role.values:
        raise ValidationFailure("role", UNKNOWN_ROLE)
    if user is not None and user.pk == actor.pk and role != user_role(user):
        raise ValidationFailure("role", OWN_ROLE)
    if role not in assignable_roles(actor):
        raise ValidationFailure("role", ROLE_ABOVE_OWN)


def user_active_check(*, actor: User, user: User, is_active: bool) -> None:
    if user.pk == actor.pk and is_active != user.is_active:
        raise ValidationFailure("is_active", OWN_ACTIVE)


def user_tenants_check(*, actor: User, user: User | None, tenants: Iterable[str]) -> list[str]:
    """The cleaned tenant list, or a refusal naming ``tenants``."""
    clean = _known_tenants(tenants, field="tenants")
    if user is not None and user.pk == actor.pk:
        if set(clean) != set(_tenants(user)):
            raise ValidationFailure("tenants", OWN_TENANTS)
        return clean
    allowed = tenants_of(actor)
    if allowed is not None:
        if not clean:
            raise ValidationFailure("tenants", TENANTS_REQUIRED)
        foreign = [t for t in clean if t not in allowed]
        if foreign:
            raise ValidationFailure("tenants", TENANT_NOT_YOURS.format(tenants=", ".join(foreign)))
    return clean


def user_password_check(*, actor: User, user: User) -> None:
    if user.pk != actor.pk:
        raise ValidationFailure("password", SET_BY_OWNER_ONLY)


# --- Writes --------------------------------------------------------------------------------------


@transaction.atomic
def tenant_create(
    *, name: str, actor: User | None, now: datetime | None = None
) -> tuple[Tenant, bool]:
    """Add ``name`` to the tenant registry (``add_tenant``, the admin); an existing tenant is
    answered as it is. ``actor`` None is the shell's own account (``add_tenant`` without
    ``--as``); a user needs ``ADD_TENANT`` and must be deployment-wide: a tenant-limited admin
    may not widen the deployment."""
    if actor is not None:
        require(actor, ADD_TENANT, deployment_wide=True, message=TENANT_CREATE_REFUSED)
    clean = validate_scope_value(name, field="tenant")
    return tenant_ensure(name=clean, actor=actor, now=now)


@transaction.atomic
def user_set_role(
    *,
    username: str,
    role: str,
    password: str | None = None,
    actor: User | None = None,
    check_password_strength: bool = True,
    tenants: Sequence[str] | None = None,
    now: datetime | None = None,
) -> User:
    """Create or update ``username`` in exactly one role: the shell's path (``add_user``).

    ``tenants``: None leaves the user's tenant memberships as they are; a list replaces them
    (an empty list makes the user deployment-wide).
    """
    if role not in Role.values:
        raise ValidationFailure("role", UNKNOWN_ROLE)
    _username_check(username)
    clean_tenants = None if tenants is None else _known_tenants(tenants, field="tenant")
    user, created = User.objects.get_or_create(username=username)
    if password is not None:
        if check_password_strength:
            password_strength_check(password=password, user=user)
        user.set_password(password)
    elif created:
        user.set_unusable_password()
    user.is_active = True
    _apply_role(user, role)
    if created:
        accounts.account_created(user=user, actor=actor, password_set=password is not None, now=now)
    elif password is not None and actor is None:
        accounts.password_set_on_shell(user)
    if clean_tenants is not None:
        _set_tenants(user, clean_tenants)
    event_record(
        actor=actor,
        action=Action.USER_ROLE_SET,
        target=_target(user),
        details={
            "role": role,
            "created": created,
            "password_set": password is not None,
            "tenants": None if tenants is None else sorted(set(tenants)),
        },
        at=now,
    )
    return user


def system_agent() -> User:
    """The account a command, replay or benchmark that names no user (``research``, ``recall``,
    ``run_skill``, ``investigate``, ``replay``) acts as, so that its reads are checked like any
    agent's: ``SYSTEM_AGENT`` in the agent role, made on first use. An existing account is taken
    as it is: deactivated or moved to another role, its reads are refused."""
    existing = User.objects.filter(username=SYSTEM_AGENT).first()
    return existing or user_set_role(username=SYSTEM_AGENT, role=Role.AGENT)


@transaction.atomic
def user_create(
    *,
    actor: User,
    username: str,
    role: str,
    tenants: Sequence[str],
    password: str | None = None,
    profile: dict[str, str] | None = None,
    now: datetime | None = None,
) -> User:
    """A new user made in the admin. Without ``password`` the user cannot log in until one is
    set on the shell; a superuser is never made here."""
    if not may_manage_users(actor):
        raise PermissionRefused(CANNOT_MANAGE_USERS)
    _username_check(username)
    if User.objects.filter(username=username).exists():
        raise ValidationFailure("username", USERNAME_TAKEN)
    user_role_check(actor=actor, user=None, role=role)
    clean_tenants = user_tenants_check(actor=actor, user=None, tenants=tenants)
    user = User(username=username, is_active=True, is_superuser=False)
    for name, value in _profile(profile).items():
        setattr(user, name, value)
    if password:
        password_strength_check(password=password, user=user)
        user.set_password(password)
    else:
        user.set_unusable_password()
    _apply_role(user, role)
    _set_tenants(user, clean_tenants)
    # Who made it, and whether it is that admin's (a password the admin set): four eyes
    # compares the people behind accounts (reviewconsole.accounts).
    accounts.account_created(user=user, actor=actor, password_set=bool(password), now=now)
    event_record(
        actor=actor,
        action=Action.USER_CREATE,
        target=_target(user),
        details={"role": role, "tenants": clean_tenants, "password_set": bool(password)},
        at=now,
    )
    return user


@transaction.atomic
def user_update(
    *,
    actor: User,
    user: User,
    role: str | None,
    is_active: bool | None,
    tenants: Sequence[str] | None,
    profile: dict[str, str] | None = None,
    now: datetime | None = None,
) -> User:
    """Apply an admin's edit of ``user``: one audit event per kind of change made, all at one
    moment.

    ``role``, ``is_active``, ``tenants``: None leaves that part as it is.
    """
    now = now or clock.now()
    user = User.objects.select_for_update().get(pk=user.pk)
    user_manage_check(actor=actor, user=user)
    before_role = user_role(user)
    role = before_role if role is None else role
    is_active = user.is_active if is_active is None else is_active
    if role is not None:
        user_role_check(actor=actor, user=user, role=role)
    user_active_check(actor=actor, user=user, is_active=is_active)
    before_tenants = _tenants(user)
    clean_tenants = user_tenants_check(
        actor=actor, user=user, tenants=before_tenants if tenants is None else tenants
    )

    changed = sorted(
        name for name, value in _profile(profile).items() if getattr(user, name) != value
    )
    for name in changed:
        setattr(user, name, _profile(profile)[name])
    if changed:
        user.save(update_fields=changed)
        event_record(
            actor=actor,
            action=Action.USER_CHANGE,
            target=_target(user),
            details={"fields": changed},
            at=now,
        )
    if is_active != user.is_active:
        user.is_active = is_active
        user.save(update_fields=["is_active"])
        event_record(
            actor=actor,
            action=Action.USER_ACTIVE_SET,
            target=_target(user),
            details={"is_active": is_active},
            at=now,
        )
    if role is not None and role != before_role:
        _apply_role(user, role)
        event_record(
            actor=actor,
            action=Action.USER_ROLE_SET,
            target=_target(user),
            details={"role": role, "from": before_role, "created": False, "password_set": False},
            at=now,
        )
    if clean_tenants != before_tenants:
        _set_tenants(user, clean_tenants)
        event_record(
            actor=actor,
            action=Action.USER_TENANTS_SET,
            target=_target(user),
            details={
                "tenants": clean_tenants,
                "added": sorted(set(clean_tenants) - set(before_tenants)),
                "removed": sorted(set(before_tenants) - set(clean_tenants)),
            },
            at=now,
        )
    return user


@transaction.atomic
def user_password_change(
    *, actor: User, user: User, password: str, now: datetime | None = None
) -> User:
    """``actor`` sets their own new password (the form asked for the old one)."""
    user_password_check(actor=actor, user=user)
    user = User.objects.select_for_update().get(pk=user.pk)
    password_strength_check(password=password, user=user)
    user.set_password(password)
    user.save(update_fields=["password"])
    event_record(actor=actor, action=Action.USER_PASSWORD_CHANGE, target=_target(user), at=now)
    return user


# --- Helpers -------------------------------------------------------------------------------------


def _target(user: User) -> str:
    return f"user:{user.get_username()}"


def _username_check(username: str) -> None:
    try:
        User._meta.get_field("username").clean(username, None)
    except ValidationError:
        raise ValidationFailure("username", BAD_USERNAME) from None


def password_strength_check(*, password: str, user: User) -> None:
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ValidationFailure("password", " ".join(exc.messages)) from None


def _profile(profile: dict[str, Any] | None) -> dict[str, str]:
    return {name: str(value) for name, value in (profile or {}).items() if name in PROFILE_FIELDS}


def _apply_role(user: User, role: str) -> None:
    """Put ``user`` in exactly ``role``; staff status follows the role, never a checkbox."""
    user.is_staff = role in STAFF_ROLES
    user.save()
    user.groups.set([Group.objects.get(name=role)])


def _known_tenants(tenants: Iterable[str], *, field: str) -> list[str]:
    """Memberships name known tenants only (and so a member's tenants need no lookup later)."""
    clean = sorted({validate_scope_value(t, field=field) for t in tenants})
    for tenant in clean:
        require_known_tenant(tenant, field=field)
    return clean


def user_tenants(user: User) -> list[str]:
    """The tenants ``user`` is a member of, by name (none: deployment-wide)."""
    return _tenants(user)


def _tenants(user: User) -> list[str]:
    return sorted(TenantMembership.objects.filter(user=user).values_list("tenant", flat=True))


def _set_tenants(user: User, tenants: list[str]) -> None:
    TenantMembership.objects.filter(user=user).exclude(tenant__in=tenants).delete()
    TenantMembership.objects.bulk_create(
        [TenantMembership(user=user, tenant=t) for t in tenants], ignore_conflicts=True
    )
    forget(user)


# --- Single sign-on ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignOnOutcome:
    """A sign-in's result: the account (None: none was made), and why it may not log in (None:
    it may)."""

    user: User | None
    refusal: str | None


@transaction.atomic
def user_sign_on(
    *,
    issuer: str,
    claims: Mapping[str, Any],
    mapping: SignOnMapping,
    username_claim: str = "preferred_username",
    now: datetime | None = None,
) -> SignOnOutcome:
    """Apply what a person's validated ID token claims give them, at every sign-in.

    The account is the one bound to (``issuer``, ``sub``), made on the first sign-in (its own
    holder, with no usable password); an e-mail or username matching a local account never
    links to it. The role and tenants the claims map to (``reviewconsole.signon``) replace the
    account's, each change audited with the same event and details as an admin's change in the
    console (``auth.user.create``, ``auth.user.role_set``, ``auth.user.tenants_set``,
    ``auth.user.change``), plus ``via: "sign-on"`` and the groups that mapped; the actor is the
    system, not the person. A person whose groups now name no role loses the account's role
    (audited) and is refused, as is one the tenant mapping gives no tenant; a deactivated account
    stays deactivated. The superuser flag is never set; staff status follows the role.
    """
    now = now or clock.now()
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise ValidationFailure("sub", "the ID token names no subject")
    access = mapped_access(claims, mapping)
    tenants = None if access.tenants is None else _known_only(access.tenants)
    refusal = access.refusal or (NO_TENANT if tenants is not None and not tenants else None)
    via = {"via": "sign-on", "issuer": issuer, "groups": list(access.groups)}

    identity = (
        SignOnIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        if refusal is not None:
            # Nothing is made for a person the mapping refuses.
            return SignOnOutcome(user=None, refusal=refusal)
        assert access.role is not None
        user = User(
            username=_free_username(claims.get(username_claim), subject),
            is_active=True,
            is_superuser=False,
        )
        user.set_unusable_password()
        for name, value in _claimed_profile(claims).items():
            setattr(user, name, value)
        _apply_role(user, access.role)
        _set_tenants(user, sorted(tenants or ()))
        SignOnIdentity.objects.create(
            user=user, issuer=issuer, subject=subject, created_at=now, last_sign_on_at=now
        )
        # Made by no one the console knows: its own holder (reviewconsole.accounts).
        event_record(
            actor=None,
            action=Action.USER_CREATE,
            target=_target(user),
            details={
                "role": access.role,
                "tenants": sorted(tenants or ()),
                "password_set": False,
                **via,
            },
            at=now,
        )
        return SignOnOutcome(user=user, refusal=None)

    user = User.objects.select_for_update().get(pk=identity.user_id)
    SignOnIdentity.objects.filter(pk=identity.pk).update(last_sign_on_at=now)
    if user.is_superuser:
        # Superusers are the shell's; a provider never changes one.
        return SignOnOutcome(user=user, refusal=refusal)
    changed = {
        name: value
        for name, value in _claimed_profile(claims).items()
        if getattr(user, name) != value
    }
    if changed:
        for name, value in changed.items():
            setattr(user, name, value)
        user.save(update_fields=sorted(changed))
        event_record(
            actor=None,
            action=Action.USER_CHANGE,
            target=_target(user),
            details={"fields": sorted(changed), **via},
            at=now,
        )
    before_role = user_role(user)
    role = access.role if refusal is None else None
    if role != before_role:
        if role is None:
            _clear_role(user)
        else:
            _apply_role(user, role)
        event_record(
            actor=None,
            action=Action.USER_ROLE_SET,
            target=_target(user),
            details={
                "role": role,
                "from": before_role,
                "created": False,
                "password_set": False,
                **via,
            },
            at=now,
        )
    before_tenants = _tenants(user)
    # A refused person's memberships stay (an empty list would make them deployment-wide);
    # "every tenant" (None) is no membership at all.
    after_tenants = tenants or []
    if refusal is None and after_tenants != before_tenants:
        _set_tenants(user, after_tenants)
        _tenants_event(user, after_tenants, before_tenants, via, now)
    if not user.is_active:
        return SignOnOutcome(user=user, refusal=INACTIVE)
    return SignOnOutcome(user=user, refusal=refusal)


def _tenants_event(
    user: User, tenants: list[str], before: list[str], via: dict[str, Any], now: datetime
) -> None:
    event_record(
        actor=None,
        action=Action.USER_TENANTS_SET,
        target=_target(user),
        details={
            "tenants": tenants,
            "added": sorted(set(tenants) - set(before)),
            "removed": sorted(set(before) - set(tenants)),
            **via,
        },
        at=now,
    )


def _clear_role(user: User) -> None:
    """Take ``user``'s role away (a sign-on whose groups name none): no group, no staff."""
    user.is_staff = False
    user.save()
    user.groups.clear()


def _known_only(tenants: Iterable[str]) -> list[str]:
    """The tenants the console has: a claim cannot create one (tenants are made in the console)."""
    return sorted(Tenant.objects.filter(name__in=set(tenants)).values_list("name", flat=True))


def _claimed_profile(claims: Mapping[str, Any]) -> dict[str, str]:
    """Names from the claims; the e-mail only when the provider says it verified it (mails to
    reviewers go there), and even then it links nothing."""
    profile = {
        "first_name": claims.get("given_name"),
        "last_name": claims.get("family_name"),
    }
    if claims.get("email_verified") is True:
        profile["email"] = claims.get("email")
    # Django's lengths of these fields: first and last name 150, e-mail 254.
    limits = {"first_name": 150, "last_name": 150, "email": 254}
    return {
        name: value[: limits[name]]
        for name, value in profile.items()
        if isinstance(value, str) and value
    }


def _free_username(claimed: object, subject: str) -> str:
    """A username for a new signed-on account: the claimed one when free and valid, else with
    the first free suffix (a provider account named like a local admin gets another name)."""
    base = claimed if isinstance(claimed, str) else ""
    base = "".join(c for c in base if c.isalnum() or c in "@.+-_")[:140] or (
        "sso-" + "".join(c for c in subject if c.isalnum())[:40]
    )
    name, counter = base, 1
    while User.objects.filter(username=name).exists():
        counter += 1
        name = f"{base}-{counter}"
    return name
