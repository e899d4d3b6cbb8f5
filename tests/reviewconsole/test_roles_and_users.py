"""Roles are groups created by a migration; ``add_user`` puts a user in exactly one role."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from reviewconsole.errors import ValidationFailure
from reviewconsole.roles import ROLE_PERMISSIONS, Role
from reviewconsole.services import UNKNOWN_ROLE, user_set_role
from tests.conftest import PASSWORD
from tests.helpers import run_json

pytestmark = pytest.mark.django_db


def test_migrations_create_each_role_with_exactly_its_permissions() -> None:
    for role, names in ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=role)
        granted = {
            f"{app}.{codename}"
            for app, codename in group.permissions.values_list(
                "content_type__app_label", "codename"
            )
        }
        assert granted == set(names), role


def test_agents_can_never_review_or_approve() -> None:
    agent_perms = set(ROLE_PERMISSIONS[Role.AGENT])
    assert not agent_perms & {
        "experience.review_case",
        "experience.verify_evidence",
        "knowledge.approve_document",
        "knowledge.revoke_document",
        "experience.add_case",
    }


@pytest.mark.parametrize("role", ["reviewer", "operator", "admin", "agent"])
def test_add_user_creates_a_user_in_one_role(role: str) -> None:
    status, result = run_json("add_user", "sam", "--role", role, "--password", PASSWORD)

    assert status == 0
    assert result == {"username": "sam", "role": role}
    user = User.objects.get(username="sam")
    assert [g.name for g in user.groups.all()] == [role]
    assert user.check_password(PASSWORD)
    assert user.is_staff == (role != "agent")
    assert not user.is_superuser


def test_add_user_updates_the_role_of_an_existing_user() -> None:
    run_json("add_user", "sam", "--role", "reviewer", "--password", PASSWORD)
    status, result = run_json("add_user", "sam", "--role", "agent")

    assert status == 0 and result["role"] == "agent"
    user = User.objects.get(username="sam")
    assert [g.name for g in user.groups.all()] == ["agent"]
    assert user.check_password(PASSWORD)  # unchanged when --password is not given
    assert user.has_perm("knowledge.search_knowledge")
    assert not user.has_perm("experience.review_case")


def test_new_user_without_password_cannot_log_in() -> None:
    run_json("add_user", "bot", "--role", "agent")
    assert not User.objects.get(username="bot").has_usable_password()


def test_unknown_role_is_refused_by_the_service() -> None:
    with pytest.raises(ValidationFailure) as failure:
        user_set_role(username="sam", role="superhero")
    assert (failure.value.field, failure.value.message) == ("role", UNKNOWN_ROLE)
    assert not User.objects.filter(username="sam").exists()


def test_weak_password_is_refused_naming_the_field() -> None:
    status, result = run_json("add_user", "sam", "--role", "reviewer", "--password", "123")

    assert status != 0 and result["field"] == "password"
    assert not User.objects.filter(username="sam").exists()
