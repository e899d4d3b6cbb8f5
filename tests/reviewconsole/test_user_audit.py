"""Every change to a user, a role, a membership, a password or a token is an audit event written in
the same transaction; and the rules about who may manage whom hold in the services themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from agentapi.auth import token_user
from agentapi.models import ApiToken
from agentapi.services import NOT_AN_AGENT, token_create, token_revoke
from agentapi.tokens import token_generate
from reviewconsole import services
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event, TenantMembership
from reviewconsole.roles import Role
from reviewconsole.services import (
    NOT_MANAGEABLE,
    OWN_ROLE,
    OWN_TENANTS,
    ROLE_ABOVE_OWN,
    SET_BY_OWNER_ONLY,
    TENANTS_REQUIRED,
    user_create,
    user_password_change,
    user_role,
    user_set_role,
    user_update,
)
from tests.conftest import PASSWORD
from tests.helpers import run_json
from tests.reviewconsole.test_admin_user_matrix import add_form, change_form, change_url

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-different-horse-staple-42"


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def last_event(action: Action) -> Event:
    event = Event.objects.filter(action=action).order_by("-id").first()
    assert event is not None, f"no {action} event"
    return event


def no_secret_in(event: Event, *secrets: str) -> bool:
    text = json.dumps(event.details) + event.reason
    return not any(secret in text for secret in secrets)


@pytest.fixture
def limited_admin(db: None) -> User:
    return user_set_role(
        username="lena", role=Role.ADMIN, password=PASSWORD, tenants=["teahouse", "milkbar"]
    )


@pytest.fixture
def tea_reviewer(db: None) -> User:
    return user_set_role(
        username="tea-rev", role=Role.REVIEWER, password=PASSWORD, tenants=["teahouse"]
    )


# --- The admin pages write audit events ----------------------------------------------------------


def test_creating_a_user_in_the_admin_is_audited(admin_user: User) -> None:
    response = logged_in(admin_user).post(
        reverse("admin:auth_user_add"), add_form("newbie", Role.OPERATOR, ("teahouse",))
    )

    assert response.status_code == 302
    user = User.objects.get(username="newbie")
    assert user_role(user) == Role.OPERATOR and user.is_staff and not user.is_superuser
    assert user.check_password(NEW_PASSWORD)
    event = last_event(Action.USER_CREATE)
    assert (event.actor, event.target) == (admin_user, "user:newbie")
    assert event.details == {"role": "operator", "tenants": ["teahouse"], "password_set": True}
    assert no_secret_in(event, NEW_PASSWORD)


def test_role_activity_and_membership_changes_are_each_audited(
    admin_user: User, tea_reviewer: User
) -> None:
    form = change_form(
        tea_reviewer,
        role=Role.OPERATOR,
        is_active=None,
        email="tea@example.com",
        add=("milkbar",),
        delete=("teahouse",),
    )
    response = logged_in(admin_user).post(change_url(tea_reviewer), form)

    assert response.status_code == 302
    role = last_event(Action.USER_ROLE_SET)
    assert (role.actor, role.target) == (admin_user, "user:tea-rev")
    assert role.details["role"] == "operator" and role.details["from"] == "reviewer"
    assert last_event(Action.USER_ACTIVE_SET).details == {"is_active": False}
    assert last_event(Action.USER_TENANTS_SET).details == {
        "tenants": ["milkbar"],
        "added": ["milkbar"],
        "removed": ["teahouse"],
    }
    assert last_event(Action.USER_CHANGE).details == {"fields": ["email"]}
    tea_reviewer.refresh_from_db()
    assert not tea_reviewer.is_active and tea_reviewer.email == "tea@example.com"


def test_saving_an_unchanged_user_writes_no_event(admin_user: User, tea_reviewer: User) -> None:
    before = Event.objects.count()
    response = logged_in(admin_user).post(change_url(tea_reviewer), change_form(tea_reviewer))
    assert response.status_code == 302
    assert Event.objects.count() == before


def test_ones_own_password_change_is_audited_and_keeps_the_session(reviewer: User) -> None:
    client = logged_in(reviewer)
    response = client.post(
        reverse("admin:password_change"),
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 302
    reviewer.refresh_from_db()
    assert reviewer.check_password(NEW_PASSWORD)
    event = last_event(Action.USER_PASSWORD_CHANGE)
    assert (event.actor, event.target) == (reviewer, "user:rita")
    assert no_secret_in(event, PASSWORD, NEW_PASSWORD)
    assert client.get(reverse("admin:index")).status_code == 200


def test_a_wrong_old_password_changes_nothing(reviewer: User) -> None:
    before = Event.objects.count()
    response = logged_in(reviewer).post(
        reverse("admin:password_change"),
        {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 200
    reviewer.refresh_from_db()
    assert reviewer.check_password(PASSWORD)
    assert Event.objects.count() == before


def test_add_user_on_the_shell_is_audited_without_the_password(db: None) -> None:
    status, _ = run_json("add_user", "sam", "--role", "reviewer", "--password", PASSWORD)

    assert status == 0
    event = last_event(Action.USER_ROLE_SET)
    assert event.target == "user:sam" and event.actor is None
    assert event.details["password_set"] is True
    assert no_secret_in(event, PASSWORD)


# --- Same transaction ----------------------------------------------------------------------------


def test_a_change_whose_event_cannot_be_written_is_not_made(
    admin_user: User, tea_reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("audit log unavailable")

    monkeypatch.setattr(services, "event_record", broken)
    with pytest.raises(RuntimeError):
        user_update(
            actor=admin_user,
            user=tea_reviewer,
            role=Role.OPERATOR,
            is_active=False,
            tenants=["milkbar"],
        )

    tea_reviewer = User.objects.get(pk=tea_reviewer.pk)
    assert user_role(tea_reviewer) == Role.REVIEWER and tea_reviewer.is_active
    assert set(
        TenantMembership.objects.filter(user=tea_reviewer).values_list("tenant", flat=True)
    ) == {"teahouse"}


# --- The rules, in the services ------------------------------------------------------------------


def _refusal(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ValidationFailure) as failure:
        call(**kwargs)
    return failure.value.field, failure.value.message


def test_no_one_changes_their_own_role_or_memberships(limited_admin: User) -> None:
    assert _refusal(
        user_update,
        actor=limited_admin,
        user=limited_admin,
        role=Role.REVIEWER,
        is_active=None,
        tenants=None,
    ) == ("role", OWN_ROLE)
    assert _refusal(
        user_update,
        actor=limited_admin,
        user=limited_admin,
        role=None,
        is_active=None,
        tenants=["teahouse"],
    ) == ("tenants", OWN_TENANTS)


def test_a_tenant_limited_admin_manages_only_its_tenants_users(
    limited_admin: User, tea_reviewer: User, reviewer: User
) -> None:
    assert _refusal(
        user_update,
        actor=limited_admin,
        user=reviewer,
        role=Role.OPERATOR,
        is_active=None,
        tenants=None,
    ) == ("user", NOT_MANAGEABLE)
    field, message = _refusal(
        user_update,
        actor=limited_admin,
        user=tea_reviewer,
        role=None,
        is_active=None,
        tenants=["teahouse", "coffeehouse"],
    )
    assert field == "tenants" and "coffeehouse" in message
    assert _refusal(
        user_create,
        actor=limited_admin,
        username="newbie",
        role=Role.REVIEWER,
        tenants=[],
    ) == ("tenants", TENANTS_REQUIRED)
    assert not User.objects.filter(username="newbie").exists()


def test_roles_above_ones_own_are_not_assignable(db: None, reviewer: User) -> None:
    # An operator who was given the right to change users still ranks below an admin.
    manager = user_set_role(username="mo", role=Role.OPERATOR, password=PASSWORD)
    manager.user_permissions.add(Permission.objects.get(codename="change_user"))
    manager = User.objects.get(pk=manager.pk)
    admin = user_set_role(username="ada", role=Role.ADMIN, password=PASSWORD)

    assert _refusal(
        user_update, actor=manager, user=reviewer, role=Role.ADMIN, is_active=None, tenants=None
    ) == ("role", ROLE_ABOVE_OWN)
    assert _refusal(
        user_update, actor=manager, user=admin, role=Role.REVIEWER, is_active=None, tenants=None
    ) == ("user", NOT_MANAGEABLE)
    user_update(actor=manager, user=reviewer, role=Role.AGENT, is_active=None, tenants=None)
    assert user_role(User.objects.get(pk=reviewer.pk)) == Role.AGENT


def test_another_users_password_is_never_set_by_the_service(
    admin_user: User, reviewer: User
) -> None:
    assert _refusal(
        user_password_change, actor=admin_user, user=reviewer, password=NEW_PASSWORD
    ) == ("password", SET_BY_OWNER_ONLY)


# --- Tokens: agents only -------------------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.REVIEWER, Role.OPERATOR, Role.ADMIN])
def test_tokens_are_issued_to_agents_only(db: None, role: str) -> None:
    user_set_role(username="sam", role=role, password=PASSWORD)

    status, result = run_json("create_token", "sam")

    assert status != 0
    assert result["field"] == "USER" and NOT_AN_AGENT in result["error"]
    assert not ApiToken.objects.exists()
    assert not Event.objects.filter(action=Action.AGENT_TOKEN_CREATE).exists()


def test_a_token_acts_only_while_its_user_is_an_agent(agent: User) -> None:
    issued = token_create(user=agent)
    assert token_user(issued.text) == agent

    user_set_role(username=agent.username, role=Role.OPERATOR)

    assert token_user(issued.text) is None


def test_a_token_row_of_a_non_agent_authenticates_no_one(reviewer: User) -> None:
    # As a token issued before tokens were limited to agents would be.
    new = token_generate()
    ApiToken.objects.create(
        user=reviewer, prefix=new.prefix, token_hash=new.digest, created_at=reviewer.date_joined
    )
    assert token_user(new.text) is None


def test_a_tenant_limited_admin_sees_and_revokes_only_its_tenants_tokens(
    limited_admin: User, agent: User
) -> None:
    tea_bot = user_set_role(username="tea-bot", role=Role.AGENT, tenants=["teahouse"])
    theirs = token_create(user=tea_bot).token
    other = token_create(user=agent).token  # deployment-wide agent: not lena's

    response = logged_in(limited_admin).get(reverse("admin:agentapi_apitoken_changelist"))

    assert [t.pk for t in response.context["cl"].result_list] == [theirs.pk]
    assert _refusal(token_revoke, token=other, actor=limited_admin) == ("user", NOT_MANAGEABLE)
    token_revoke(token=theirs, actor=limited_admin, reason="rotated")
    assert last_event(Action.AGENT_TOKEN_REVOKE).actor == limited_admin
