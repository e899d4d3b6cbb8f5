"""Lesson pages: the lesson side by side with its evidence and confidence, review, merges and the
conflicts queue; full page and htmx fragment; another tenant's lesson is a 404."""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.core.models import Status
from experience.lessons import services as lessons
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from reviewconsole.models import TenantMembership
from reviewconsole.services import user_set_role
from tests.experience.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_lesson_page_shows_scene_precondition_conclusion_evidence_and_confidence(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    reviewer: User,
    django_assert_max_num_queries: Any,
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    client = client_for(reviewer)
    with django_assert_max_num_queries(30):
        page = client.get(lesson.get_absolute_url())
    assert page.status_code == 200
    text = page.content.decode()
    for part in ("Scene", "Precondition", "Conclusion", "Evidence for", "Evidence against"):
        assert part in text
    assert lesson.conclusion in text and two_cases[0].title in text
    assert "0.667" in text and "Supporting incidents" in text
    fragment = client.get(lesson.get_absolute_url(), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()


def test_another_tenants_lesson_is_not_found(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case]
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    outsider = user_set_role(username="otto", role="reviewer", password="x-Pass-12345")
    TenantMembership.objects.create(user=outsider, tenant="other")
    assert client_for(outsider).get(lesson.get_absolute_url()).status_code == 404


def test_review_from_the_page_approves_and_refusals_name_the_conditions(
    submit_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    reviewer: User,
    second_reviewer: User,
) -> None:
    lesson = submit_lesson(lesson_data([c.id for c in two_cases]))
    url = reverse("experience:lesson-review", args=[lesson.digest])
    refused = client_for(reviewer).post(url, {"decision": "approve", "reason": "mine"})
    assert refused.status_code == 422 and "own_submission" in refused.content.decode()
    done = client_for(second_reviewer).post(url, {"decision": "approve", "reason": "two incidents"})
    assert done.status_code == 303
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_conflicts_queue_and_resolution_page(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    success = approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    third = make_user("rhea", "reviewer")
    client = client_for(third)
    queue = client.get(reverse("experience:lesson-conflicts"))
    conflict = LessonConflict.objects.get()
    assert queue.status_code == 200 and conflict.get_absolute_url() in queue.content.decode()
    page = client.get(conflict.get_absolute_url())
    assert (
        failure.conclusion in page.content.decode() and success.conclusion in page.content.decode()
    )
    missing_reason = client.post(
        conflict.get_absolute_url(), {"keep": failure.id, "action": "revoke", "reason": ""}
    )
    assert missing_reason.status_code == 422
    resolved = client.post(
        conflict.get_absolute_url(), {"keep": failure.id, "action": "revoke", "reason": "刷新无效"}
    )
    assert resolved.status_code == 303
    assert LessonConflict.objects.get().status == ConflictStatus.RESOLVED


def test_lesson_list_shows_candidates(
    submit_lesson: Callable[..., Lesson], two_cases: list[Case], reviewer: User
) -> None:
    lesson = submit_lesson(lesson_data([c.id for c in two_cases]))
    client = client_for(reviewer)
    page = client.get(reverse("experience:lesson-list"))
    assert page.status_code == 200 and lesson.get_absolute_url() in page.content.decode()
    fragment = client.get(reverse("experience:lesson-list"), HTTP_HX_REQUEST="true")
    assert 'id="lesson-rows"' in fragment.content.decode()
    assert "<html" not in fragment.content.decode()


def test_merge_from_the_page(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    operator: User,
    second_reviewer: User,
) -> None:
    target = approved_lesson(lesson_data([two_cases[0].id]))
    candidate = submit_lesson(lesson_data([two_cases[1].id]), actor=operator)
    client = client_for(second_reviewer)
    page = client.get(candidate.get_absolute_url())
    assert "Proposed merge" in page.content.decode()
    done = client.post(
        reverse("experience:lesson-merge", args=[candidate.digest]),
        {"target": target.id, "reason": "same lesson"},
    )
    assert done.status_code == 303
    merged = Lesson.objects.get(supersedes=target.id, status=Status.APPROVED)
    assert done["Location"] == merged.get_absolute_url()
    assert lessons.lesson_selectors.lesson_evidence(merged).supports


def test_the_lesson_list_shows_every_status_by_default_and_says_what_a_filter_hides(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], reviewer: User
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    client = client_for(reviewer)
    html = client.get(reverse("experience:lesson-list")).content.decode()
    assert lesson.get_absolute_url() in html
    assert '<option value="all" selected>' in html
    # The type options read as words, not codes.
    assert ">success pattern</option>" in html and ">success_pattern<" not in html
    candidates = client.get(reverse("experience:lesson-list") + "?status=candidate")
    text = candidates.content.decode()
    assert "No lesson matches these filters; they hide 1 lesson." in text
    assert f'href="{reverse("experience:lesson-list")}">Show every lesson</a>' in text
