"""Lesson pages: the lesson side by side with its evidence and confidence, review, merges and the
conflicts queue; full page and htmx fragment; another tenant's lesson is a 404."""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.core.models import Status
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from reviewconsole.models import TenantMembership
from reviewconsole.services import user_set_role
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
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
    assert "0.667" in text and "2 incidents support it" in text
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
    assert lesson_selectors.lesson_evidence(merged).supports


def test_a_conflict_names_each_choice_chooses_nothing_for_the_reviewer_and_previews_the_revocation(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    """Issue 28, item 2: the two lessons of the demo share a title; the page names each choice
    by type, conclusion and confidence, checks neither, shows what revoking the other reaches,
    stores it, and says what was decided in a sentence."""
    from experience.review.conflicts import KEEP_REQUIRED
    from experience.runs.models import Reference, RevocationImpact, RunFollowUp
    from reviewconsole import clock

    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    success = approved_lesson(
        lesson_data(
            [c.id for c in two_cases], lesson_type="success_pattern", conclusion="先让顾客刷新缓存"
        )
    )
    assert failure.title == success.title
    # An agent's recall read the success pattern under this run.
    Reference.objects.create(
        run_id="recall-read-it", item_id=success.id, item_type="lesson", read_at=clock.now()
    )
    client = client_for(make_user("rhea", "reviewer"))
    conflict = LessonConflict.objects.get()
    html = client.get(conflict.get_absolute_url()).content.decode()
    choices = html.split('name="keep"')
    assert len(choices) == 3 and all(" checked" not in c.split(">", 1)[0] for c in choices[1:])
    assert (
        "Keep the failure lesson: “不要先让顾客刷新缓存；先核对活动适用门店” (confidence 0.667)"
        in (html)
    )
    assert "Keep the success pattern: “先让顾客刷新缓存” (confidence 0.667)" in html
    # Keeping the failure lesson revokes the success pattern, which the run read.
    keep_failure = html.split(f'value="{failure.id}"', 1)[1].split('name="keep"', 1)[0]
    assert "recall-read-it" in keep_failure
    assert 'name="action" value="revoke" required>' in html  # no default resolution
    # The reason is a sentence, the code only a tooltip.
    assert "type_opposition" not in re.sub(r"<[^>]*>", "", html)
    assert "they advise opposite things" in html

    refused = client.post(conflict.get_absolute_url(), {"action": "revoke", "reason": "刷新无效"})
    assert refused.status_code == 422
    assert "Lesson to keep: Choose which of the two lessons to keep." in refused.content.decode()
    assert 'data-condition="keep"' in refused.content.decode() and KEEP_REQUIRED
    assert LessonConflict.objects.get().status == ConflictStatus.OPEN

    done = client.post(
        conflict.get_absolute_url(),
        {
            "keep": failure.id,
            "action": "revoke",
            "reason": "刷新无效",
            f"previewed_runs_{failure.id}": "recall-read-it",
        },
        follow=True,
    )
    page = done.content.decode()
    assert Lesson.objects.get(pk=success.id).status == Status.REVOKED
    assert RevocationImpact.objects.get(item_id=success.id).runs == ["recall-read-it"]
    assert RunFollowUp.objects.get(run_id="recall-read-it").pending
    # The confirmation counts every part of the impact: the conflict is the one resolved here.
    assert (
        "The other lesson is revoked. It reached 0 skill(s), 0 lesson(s), 1 conflict(s) and 1 run(s)"
        in page
    )
    assert "changed between your preview" not in page
    assert (
        "Kept the failure lesson “不要先让顾客刷新缓存；先核对活动适用门店”; "
        "revoked the success pattern “先让顾客刷新缓存”." in page
    )
    assert "kept lesson:" not in page and "Revocation impact (stored)" in page
    assert page.count("recall-read-it") >= 1

    chinese = client.get(conflict.get_absolute_url(), headers={"Accept-Language": "zh-hans"})
    assert "保留了失败教训" in chinese.content.decode()


def test_a_conflict_reason_reads_as_a_sentence_in_chinese(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], reviewer: User
) -> None:
    approved_lesson(lesson_data([c.id for c in two_cases]))
    approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    conflict = LessonConflict.objects.get()
    client = client_for(reviewer)
    for url in (conflict.get_absolute_url(), reverse("experience:lesson-conflicts")):
        html = client.get(url, headers={"Accept-Language": "zh-hans"}).content.decode()
        assert "建议相反" in html, url
        assert "<code>type_opposition</code>" not in html


def test_revoking_a_lesson_from_its_page_previews_the_runs_it_reaches(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    from experience.runs.models import Reference, RevocationImpact
    from reviewconsole import clock

    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    Reference.objects.create(
        run_id="recall-read-it", item_id=lesson.id, item_type="lesson", read_at=clock.now()
    )
    client = client_for(make_user("rhea", "reviewer"))
    html = client.get(lesson.get_absolute_url()).content.decode()
    panel = html.split('id="lesson-revoke"', 1)[1].split("</section>", 2)
    assert "Impact preview" in panel[0] and "recall-read-it" in panel[0] + panel[1]
    client.post(
        reverse("experience:lesson-review", args=[lesson.digest]),
        {"decision": "revoke", "reason": "wrong"},
    )
    assert RevocationImpact.objects.get(item_id=lesson.id).runs == ["recall-read-it"]


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


def test_a_lesson_checklist_speaks_of_the_lesson_scope_not_a_skill(
    submit_lesson: Callable[..., Lesson], two_cases: list[Case], second_reviewer: User
) -> None:
    lesson = submit_lesson(lesson_data([c.id for c in two_cases]))
    text = client_for(second_reviewer).get(lesson.get_absolute_url()).content.decode()
    assert "Every cited case has exactly the lesson&#x27;s scope" in text
    assert "skill&#x27;s scope" not in text and "skill's scope" not in text
