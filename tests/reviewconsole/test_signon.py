"""Sign-on's mapping (pure) and its service: which account a provider's person is, which role and
tenants the claims give at each sign-in, and the audit of every change they make."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from reviewconsole.models import Action, Event, SignOnIdentity
from reviewconsole.roles import Role
from reviewconsole.services import (
    tenant_create,
    user_role,
    user_set_role,
    user_sign_on,
    user_tenants,
    user_update,
)
from reviewconsole.signon import (
    INACTIVE,
    NO_ROLE,
    NO_TENANT,
    SignOnMapping,
    mapped_access,
    parse_role_groups,
    parse_tenant_groups,
)

ISSUER = "https://login.example.com"
ROLES = {"cr": "reviewer", "co": "operator", "ca": "admin"}
MAPPING = SignOnMapping(
    role_groups=ROLES,
    tenant_groups={"tea": ("teahouse",), "cof": ("coffee",), "everyone": ("*",)},
)
VIA_KEYS = {"via", "issuer", "groups"}


# --- The mapping (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("groups", "role"),
    [
        (["cr"], "reviewer"),
        (["co"], "operator"),
        (["cr", "co"], "operator"),
        (["cr", "ca", "co"], "admin"),
        (["other"], None),
        ([], None),
        ("ca", "admin"),
        ([["ca"], 7, None], None),
    ],
)
def test_the_first_of_admin_operator_reviewer_that_a_group_names_is_the_role(
    groups: Any, role: str | None
) -> None:
    assert mapped_access({"groups": groups}, SignOnMapping(role_groups=ROLES)).role == role


def test_without_a_tenant_mapping_everyone_is_deployment_wide() -> None:
    access = mapped_access({"groups": ["cr"]}, SignOnMapping(role_groups=ROLES))
    assert access.tenants is None and access.refusal is None


def test_tenants_come_from_groups_and_the_tenant_claim() -> None:
    mapping = SignOnMapping(
        role_groups=ROLES, tenant_groups={"tea": ("teahouse",)}, tenant_claim="tenants"
    )
    access = mapped_access({"groups": ["cr", "tea"], "tenants": ["coffee"]}, mapping)
    assert access.tenants == frozenset({"teahouse", "coffee"})
    assert access.groups == ("cr", "tea")


@pytest.mark.parametrize(
    ("groups", "tenants", "refusal"),
    [
        (["cr", "tea", "cof"], {"teahouse", "coffee"}, None),
        (["cr", "everyone", "tea"], None, None),
        (["cr"], set(), NO_TENANT),
        (["tea"], {"teahouse"}, NO_ROLE),
    ],
)
def test_a_tenant_mapping_refuses_a_person_it_gives_no_tenant(
    groups: list[str], tenants: set[str] | None, refusal: str | None
) -> None:
    access = mapped_access({"groups": groups}, MAPPING)
    assert access.tenants == (None if tenants is None else frozenset(tenants))
    assert access.refusal == refusal


@pytest.mark.parametrize("role", ["agent", "superuser", "staff"])
def test_the_mapping_gives_people_roles_only(role: str) -> None:
    with pytest.raises(ValueError, match="may give only admin, operator, reviewer"):
        SignOnMapping(role_groups={"g": role})


def test_the_mapping_is_read_from_json() -> None:
    assert parse_role_groups('{"cn=rev,ou=groups,dc=example": "reviewer"}') == {
        "cn=rev,ou=groups,dc=example": "reviewer"
    }
    assert parse_tenant_groups('{"a": "teahouse", "b": ["x", "*"]}') == {
        "a": ("teahouse",),
        "b": ("x", "*"),
    }
    assert parse_role_groups("") == {} and parse_tenant_groups(" ") == {}
    with pytest.raises(ValueError):
        parse_role_groups('["reviewer"]')
    with pytest.raises(ValueError):
        parse_tenant_groups('{"a": [1]}')


# --- The service ---------------------------------------------------------------------------------


@pytest.fixture
def tenants(db: None) -> None:
    for name in ("teahouse", "coffee"):
        tenant_create(name=name, actor=None)


def _sign_on(sub: str, groups: list[str], issuer: str = ISSUER, **claims: Any) -> Any:
    return user_sign_on(
        issuer=issuer,
        claims={"sub": sub, "preferred_username": sub, "groups": groups, **claims},
        mapping=MAPPING,
    )


def _events(user: User) -> list[Event]:
    return list(Event.objects.filter(target=f"user:{user.username}").order_by("id"))


def test_the_first_sign_on_makes_an_account_in_the_mapped_role_audited_as_a_creation(
    tenants: None,
) -> None:
    outcome = _sign_on("mei", ["cr", "tea"], email="mei@example.com", email_verified=True)
    user = outcome.user
    assert outcome.refusal is None and user is not None
    assert (user_role(user), user_tenants(user)) == ("reviewer", ["teahouse"])
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert user.email == "mei@example.com"
    (event,) = _events(user)
    assert event.action == Action.USER_CREATE and event.actor is None
    assert event.details == {
        "role": "reviewer",
        "tenants": ["teahouse"],
        "password_set": False,
        "via": "sign-on",
        "issuer": ISSUER,
        "groups": ["cr", "tea"],
    }


def test_each_sign_on_re_evaluates_the_role_and_tenants_with_the_consoles_own_events(
    tenants: None, admin_user: User
) -> None:
    user = _sign_on("mei", ["cr", "tea"]).user
    assert user is not None
    # The same changes made by an admin in the console, for the shape of their events.
    other = user_set_role(username="console-made", role=Role.REVIEWER, tenants=["teahouse"])
    user_update(actor=admin_user, user=other, role=Role.ADMIN, is_active=None, tenants=["coffee"])
    console_role, console_tenants = _events(other)[-2:]

    again = _sign_on("mei", ["ca", "cof"])
    assert again.user == user and again.refusal is None
    assert (user_role(user), user_tenants(user)) == ("admin", ["coffee"])
    role_event, tenants_event = _events(user)[-2:]
    assert role_event.action == console_role.action == Action.USER_ROLE_SET
    assert set(role_event.details) - VIA_KEYS == set(console_role.details)
    assert role_event.details["role"] == "admin" and role_event.details["from"] == "reviewer"
    assert tenants_event.action == console_tenants.action == Action.USER_TENANTS_SET
    assert set(tenants_event.details) - VIA_KEYS == set(console_tenants.details)
    assert tenants_event.details["added"] == ["coffee"]
    assert tenants_event.details["removed"] == ["teahouse"]

    # Nothing changed: nothing audited.
    before = Event.objects.count()
    assert _sign_on("mei", ["ca", "cof"]).refusal is None
    assert Event.objects.count() == before


def test_a_removed_group_loses_its_role_at_the_next_sign_on_and_the_person_is_refused(
    tenants: None,
) -> None:
    user = _sign_on("mei", ["co", "tea"]).user
    assert user is not None
    outcome = _sign_on("mei", ["tea"])
    assert outcome.refusal == NO_ROLE and outcome.user == user
    user.refresh_from_db()
    assert user_role(user) is None and not user.is_staff
    event = _events(user)[-1]
    assert event.action == Action.USER_ROLE_SET
    assert event.details["role"] is None and event.details["from"] == "operator"
    # Its memberships stay: none would make it deployment-wide.
    assert user_tenants(user) == ["teahouse"]


def test_a_person_mapped_to_no_known_tenant_is_refused_and_nothing_is_made(tenants: None) -> None:
    # "atlantis" is no tenant of the console: a claim cannot create one.
    mapping = SignOnMapping(role_groups=ROLES, tenant_claim="tenants")
    outcome = user_sign_on(
        issuer=ISSUER,
        claims={"sub": "x", "groups": ["ca"], "tenants": ["atlantis"]},
        mapping=mapping,
    )
    assert outcome.refusal == NO_TENANT and outcome.user is None
    assert not SignOnIdentity.objects.exists()


def test_a_person_whose_groups_name_no_role_is_refused_and_nothing_is_made(db: None) -> None:
    outcome = _sign_on("nobody", ["everyone"])
    assert outcome.refusal == NO_ROLE and outcome.user is None
    assert not User.objects.filter(username="nobody").exists()


def test_accounts_are_keyed_by_issuer_and_subject_never_by_email_or_name(
    tenants: None, admin_user: User
) -> None:
    admin_user.email = "ada@example.com"
    admin_user.save()
    outcome = _sign_on("ada", ["cr", "tea"], email="ada@example.com", email_verified=False)
    user = outcome.user
    assert user is not None and user.pk != admin_user.pk
    assert user.username == "ada-2" and user.email == ""
    assert user_role(user) == "reviewer"
    admin_user.refresh_from_db()
    assert user_role(admin_user) == "admin" and not hasattr(admin_user, "sign_on")
    # The same subject at another provider is another person.
    elsewhere = _sign_on("ada", ["cr", "tea"], issuer="https://evil.example.com").user
    assert elsewhere is not None and elsewhere.pk not in (user.pk, admin_user.pk)


def test_claims_never_make_a_superuser_and_staff_follows_the_role(tenants: None) -> None:
    user = _sign_on("eve", ["cr", "tea"], is_superuser=True, is_staff=True, role="admin").user
    assert user is not None
    assert not user.is_superuser and user.is_staff and user_role(user) == "reviewer"


def test_a_deactivated_account_stays_deactivated(tenants: None, admin_user: User) -> None:
    user = _sign_on("mei", ["cr", "tea"]).user
    assert user is not None
    user_update(actor=admin_user, user=user, role=None, is_active=False, tenants=None)
    outcome = _sign_on("mei", ["cr", "tea"])
    assert outcome.refusal == INACTIVE
    user.refresh_from_db()
    assert not user.is_active


def test_every_tenant_makes_a_deployment_wide_account(tenants: None) -> None:
    user = _sign_on("mei", ["cr", "tea"]).user
    assert user is not None
    assert _sign_on("mei", ["cr", "everyone"]).refusal is None
    assert user_tenants(user) == []
    event = _events(user)[-1]
    assert event.action == Action.USER_TENANTS_SET and event.details["removed"] == ["teahouse"]


def test_the_user_page_says_a_signed_on_accounts_role_comes_from_the_provider(
    tenants: None, admin_user: User, client: Any
) -> None:
    user = _sign_on("mei", ["cr", "tea"]).user
    assert user is not None
    client.force_login(admin_user)
    page = client.get(f"/users/{user.username}/")
    assert page.status_code == 200
    assert b'id="signed-on-note"' in page.content
    local = client.get(f"/users/{admin_user.username}/")
    assert b'id="signed-on-note"' not in local.content
