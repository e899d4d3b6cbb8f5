"""Reviewer notifications: waiting candidates, revoked approvals, conflicts; once; opt-out."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse

from curation.notifications import notify_conflict, notify_waiting_candidates, opted_out
from experience.cases.models import Case
from experience.lessons.models import Lesson, LessonConflict
from experience.review import revocation
from tests.experience import conftest as experience_fixtures
from tests.experience.conftest import NOW
from tests.experience.lessons.test_lessons import (
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db

submit_case = experience_fixtures.submit_case
approved_case = experience_fixtures.approved_case
__all__ = ["approved_lesson", "submit_lesson", "two_cases"]


@pytest.fixture
def mailed(reviewer: User, second_reviewer: User) -> tuple[User, User]:
    for user in (reviewer, second_reviewer):
        user.email = f"{user.username}@example.test"
        user.save(update_fields=["email"])
    return reviewer, second_reviewer


def test_waiting_candidates_are_announced_once(
    mailed: tuple[User, User], submit_case: Callable[..., Case]
) -> None:
    submit_case()
    assert notify_waiting_candidates(NOW + timedelta(hours=1)) == 0  # not waiting long yet
    later = NOW + timedelta(hours=25)
    assert notify_waiting_candidates(later) == 2
    assert len(mail.outbox) == 2 and "waits since" in mail.outbox[0].body
    assert notify_waiting_candidates(later) == 0  # each user hears of it once


def test_revoking_tells_the_approver(
    mailed: tuple[User, User], approved_case: Callable[..., Case], at_now: datetime
) -> None:
    reviewer, approver = mailed
    case = approved_case()
    mail.outbox.clear()
    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")
    assert [m.to for m in mail.outbox] == [[approver.email]]
    assert "wrong store" in mail.outbox[0].body


def test_a_user_who_opted_out_hears_nothing(
    mailed: tuple[User, User], approved_case: Callable[..., Case], at_now: datetime
) -> None:
    reviewer, approver = mailed
    client = Client(enforce_csrf_checks=False)
    client.force_login(approver)
    url = reverse("curation:notifications")
    assert "Notifications are on." in client.get(url).content.decode()
    assert client.post(url, {"enabled": "0"}).status_code == 303
    assert opted_out(approver)
    case = approved_case()
    mail.outbox.clear()
    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store")
    assert mail.outbox == []
    client.post(url, {"enabled": "1"})
    assert not opted_out(approver)


def test_the_settings_page_needs_csrf_and_login(reviewer: User) -> None:
    url = reverse("curation:notifications")
    assert Client().get(url).status_code == 302
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(url, {"enabled": "0"}).status_code == 403
    assert not opted_out(reviewer)


def test_a_conflict_tells_whoever_approved_a_lesson_in_it_once(
    mailed: tuple[User, User],
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    _submitter, approver = mailed
    bystander = make_user("rhea", "reviewer")
    bystander.email = "rhea@example.test"
    bystander.save(update_fields=["email"])
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    mail.outbox.clear()
    success = approved_lesson(
        lesson_data(
            [c.id for c in two_cases],
            lesson_type="success_pattern",
            conclusion="先让顾客刷新缓存再重试",
        )
    )
    conflict = LessonConflict.objects.get()
    # The approver of both lessons hears of the conflict once; nobody else hears of it.
    [message] = mail.outbox
    assert message.to == [approver.email]
    assert message.subject.endswith("A lesson you approved is in a conflict")
    assert failure.id in message.body and success.id in message.body
    assert notify_conflict(conflict.pk) == 0  # already told
