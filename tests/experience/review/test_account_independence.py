"""Sock puppets (issue 37, item 3): four eyes are two people, not two accounts.

An admin who creates an account with a password can log in as it. So an account that an admin
created with a password is that admin's (and, up a chain of admins, the first one's): it cannot
be the second pair of eyes on what the admin, or another account the admin holds, submitted, and
its checks of evidence are the submitter's own. Accounts made on the shell, or created without a
password (set on the shell later), are their own. Every decision is refused in the services, so
every path (console, command, admin) inherits it, with ``not_independent``; the audit log names
who created the account that approved each item.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from experience.cases import selectors, services
from experience.cases.models import Case
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import services as lessons
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.review import decisions
from experience.review import outdating as review_outdating
from knowledge.models import Document
from knowledge.services import DocumentReviewRefused, document_approve, documents_import
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_create, user_set_role, user_update
from tests.conftest import PASSWORD
from tests.experience.conftest import SCOPE, case_data, skill_data
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

NOT_INDEPENDENT = "not_independent"
TENANT = SCOPE["tenant"]


def created(admin: User, name: str, role: str, *, password: bool = True) -> User:
    """An account ``admin`` makes in the admin (its tenant only), with a password it chose."""
    return user_create(
        actor=admin,
        username=name,
        role=role,
        tenants=[TENANT],
        password=PASSWORD if password else None,
    )


@pytest.fixture
def tenant_admin() -> User:
    return user_set_role(username="tara", role=Role.ADMIN, password=PASSWORD, tenants=[TENANT])


@pytest.fixture
def puppets(tenant_admin: User) -> tuple[User, User]:
    """Two reviewers the tenant admin created with passwords: both are the admin's."""
    return (
        created(tenant_admin, "pat", Role.REVIEWER),
        created(tenant_admin, "pam", Role.REVIEWER),
    )


def submitted_case(actor: User, **changes: Any) -> Case:
    case, _ = services.case_submit(content=parse_case(case_data(**changes)), actor=actor)
    return case


def refused_approval(case: Case, actor: User) -> list[str]:
    with pytest.raises(ReviewRefused) as refused:
        decisions.case_approve(case=selectors.case_get(case.id), actor=actor, reason="looks right")
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    return refused.value.unmet


def check(case: Case, actor: User) -> None:
    services.evidence_check(case=case, key="diagnosis/0", actor=actor)


def approved_case(submitter: User, approver: User, **changes: Any) -> Case:
    case = submitted_case(submitter, **changes)
    check(case, approver)
    decisions.case_approve(case=case, actor=approver, reason="checked")
    return selectors.case_get(case.id)


def test_an_admins_two_reviewers_cannot_be_each_others_second_pair_of_eyes(
    puppets: tuple[User, User],
) -> None:
    pat, pam = puppets
    case = submitted_case(pat)
    check(case, pam)
    unmet = refused_approval(case, pam)
    assert NOT_INDEPENDENT in unmet
    # Pam's check is Pat's own: it does not count toward approval either.
    assert "no_checked_diagnosis_evidence" in unmet


def test_a_check_by_the_submitters_puppet_does_not_count_for_an_independent_approver(
    puppets: tuple[User, User], second_reviewer: User
) -> None:
    pat, pam = puppets
    case = submitted_case(pat)
    check(case, pam)
    assert refused_approval(case, second_reviewer) == ["no_checked_diagnosis_evidence"]
    check(case, second_reviewer)
    decisions.case_approve(case=case, actor=second_reviewer, reason="checked it myself")
    assert selectors.case_get(case.id).status == Status.APPROVED


def test_a_puppet_may_review_the_work_of_someone_else(
    puppets: tuple[User, User], reviewer: User
) -> None:
    """The rule is about one person on both sides, not about admin-made accounts as such."""
    pat, _ = puppets
    assert approved_case(reviewer, pat).status == Status.APPROVED


def test_a_chain_of_admins_collapses_to_the_first(tenant_admin: User) -> None:
    deputy = created(tenant_admin, "dina", Role.ADMIN)
    by_deputy = created(deputy, "dan", Role.REVIEWER)
    by_admin = created(tenant_admin, "ann", Role.REVIEWER)
    case = submitted_case(by_deputy)
    check(case, by_admin)
    assert NOT_INDEPENDENT in refused_approval(case, by_admin)


def test_an_account_created_without_a_password_is_its_own(
    puppets: tuple[User, User], tenant_admin: User
) -> None:
    pat, _ = puppets
    # The admin never knew this password: it was set on the shell.
    real = created(tenant_admin, "ruth", Role.REVIEWER, password=False)
    user_set_role(username="ruth", role=Role.REVIEWER, password=PASSWORD + "-own")
    assert approved_case(pat, real).status == Status.APPROVED


def test_a_password_set_on_the_shell_frees_the_account(
    puppets: tuple[User, User], second_reviewer: User
) -> None:
    pat, pam = puppets
    case = submitted_case(pat)
    check(case, second_reviewer)
    assert NOT_INDEPENDENT in refused_approval(case, pam)
    call_command("add_user", "pam", "--role", Role.REVIEWER, "--password", PASSWORD + "-new")
    decisions.case_approve(case=case, actor=pam, reason="now someone else's")
    assert selectors.case_get(case.id).status == Status.APPROVED


def test_role_changes_keep_whose_account_it_is(tenant_admin: User, admin_user: User) -> None:
    """An operator the admin made, promoted to reviewer, is still the admin's; and so is the
    work of the admin itself once it is a reviewer."""
    olga = created(tenant_admin, "olga", Role.OPERATOR)
    rex = created(tenant_admin, "rex", Role.REVIEWER)
    user_update(actor=admin_user, user=olga, role=Role.REVIEWER, is_active=None, tenants=None)
    case = submitted_case(olga)
    check(case, rex)
    assert NOT_INDEPENDENT in refused_approval(case, rex)

    user_update(
        actor=admin_user, user=tenant_admin, role=Role.REVIEWER, is_active=None, tenants=None
    )
    tenant_admin = User.objects.get(pk=tenant_admin.pk)  # its permissions as they are now
    own = submitted_case(tenant_admin, incident="INC-9")
    check(own, rex)
    assert NOT_INDEPENDENT in refused_approval(own, rex)
    by_rex = submitted_case(rex, incident="INC-8")
    check(by_rex, tenant_admin)
    assert NOT_INDEPENDENT in refused_approval(by_rex, tenant_admin)


def test_a_superuser_with_its_own_puppet(admin_user: User) -> None:
    boss = User.objects.create_superuser("boss", password=PASSWORD)
    puppet = user_create(
        actor=boss, username="polly", role=Role.REVIEWER, tenants=[], password=PASSWORD
    )
    case = submitted_case(boss)
    check(case, puppet)
    assert NOT_INDEPENDENT in refused_approval(case, puppet)


def test_skills_and_lessons_follow_the_same_rule(
    puppets: tuple[User, User], reviewer: User, second_reviewer: User
) -> None:
    pat, pam = puppets
    first = approved_case(reviewer, second_reviewer, incident="INC-1")
    second = approved_case(reviewer, second_reviewer, incident="INC-2", title="商品列表漏配")
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()), actor=pat
    )
    with pytest.raises(ReviewRefused) as refused:
        decisions.skill_approve(skill=skill, actor=pam, reason="two incidents")
    assert refused.value.unmet == [NOT_INDEPENDENT]

    lesson, _ = lessons.lesson_submit(
        content=parse_lesson(
            {
                "type": "lesson",
                "lesson_type": "failure_lesson",
                "scope": dict(SCOPE),
                "scene": {"tags": ["优惠券"], "description": "小程序优惠券无法使用"},
                "precondition": "活动规则限定了适用门店",
                "conclusion": "先核对活动适用门店",
                "supports": [first.id, second.id],
                "valid_from": case_data()["valid_from"],
                "valid_to": case_data()["valid_to"],
            }
        ),
        actor=pat,
    )
    with pytest.raises(ReviewRefused) as refused:
        decisions.lesson_approve(lesson=lesson, actor=pam, reason="holds")
    assert refused.value.unmet == [NOT_INDEPENDENT]

    # Restore, like approve: an outdated lesson of Pat's is not Pam's to bring back.
    decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="holds")
    Lesson.objects.filter(pk=lesson.id).update(
        status=Status.OUTDATED, outdated_cause="contradicted"
    )
    with pytest.raises(ReviewRefused) as refused:
        review_outdating.lesson_restore(
            lesson=Lesson.objects.get(pk=lesson.id), actor=pam, reason="still holds"
        )
    assert refused.value.unmet == [NOT_INDEPENDENT]
    assert Lesson.objects.get(pk=lesson.id).status == Status.OUTDATED
    review_outdating.lesson_restore(
        lesson=Lesson.objects.get(pk=lesson.id), actor=reviewer, reason="still holds"
    )
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_document_versions_follow_the_same_rule(tenant_admin: User, operator: User) -> None:
    author = created(tenant_admin, "otto", Role.OPERATOR)
    other = created(tenant_admin, "oona", Role.OPERATOR)
    documents_import(items=[document(approved=False)], actor=author)
    draft = Document.objects.get()
    with pytest.raises(DocumentReviewRefused) as refused:
        document_approve(document=draft, actor=other, reason="matches the rulebook")
    assert refused.value.conditions == [NOT_INDEPENDENT]
    assert not Document.objects.get().approved
    document_approve(document=draft, actor=operator, reason="matches the rulebook")
    assert Document.objects.get().approved


def test_the_review_command_and_the_console_refuse_it_too(
    puppets: tuple[User, User], client: Client
) -> None:
    pat, pam = puppets
    case = submitted_case(pat)
    check(case, pam)
    out = io.StringIO()
    with pytest.raises(Exception):  # noqa: B017 - the command exits non-zero
        call_command(
            "review", "approve", case.id, "--as", "pam", "--reason", "ok", "--json", stdout=out
        )
    assert NOT_INDEPENDENT in json.loads(out.getvalue())["unmet"]

    client.force_login(pam)
    page = client.post(
        reverse("experience:case-review", args=[case.content_hash]),
        {"decision": "approve", "reason": "ok"},
    )
    assert page.status_code == 422
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    assert "one person" in page.content.decode()


def test_the_audit_log_names_who_created_the_approvers_account(
    puppets: tuple[User, User], reviewer: User, admin_user: User, second_reviewer: User
) -> None:
    pat, _ = puppets
    by_puppet = approved_case(reviewer, pat, incident="INC-1")
    by_shell_account = approved_case(reviewer, second_reviewer, incident="INC-2", title="另一案")
    events = {e.target: e.details for e in Event.objects.filter(action=Action.CASE_APPROVE)}
    assert events[by_puppet.id]["account_created_by"] == "tara"
    assert events[by_puppet.id]["account_password_by_creator"] is True
    assert events[by_shell_account.id]["account_created_by"] is None

    client = Client()
    client.force_login(admin_user)
    page = client.get(reverse("event-list"), {"action": Action.CASE_APPROVE}).content.decode()
    assert "account created, with its password, by tara" in page
    assert "account created on the shell" in page


def test_the_admins_user_list_names_who_created_each_account(
    puppets: tuple[User, User], tenant_admin: User
) -> None:
    created(tenant_admin, "ruth", Role.REVIEWER, password=False)
    client = Client()
    client.force_login(tenant_admin)
    page = client.get(reverse("admin:auth_user_changelist")).content.decode()
    assert page.count("tara (with its password)") == 2  # pat and pam
    assert ">tara<" in page  # ruth: created without a password
    assert "the shell" in page  # tara herself
