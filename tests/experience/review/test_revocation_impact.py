"""The impact list is complete: revoking a case names the lessons it leaves without a usable
supporting case, the lesson conflicts whose side that changes and the runs whose context block
carried it, beside its skills and runs; and every surface says the same list (the preview, the
console's confirmation, the stored impact, the audit event, the revocation mail and
``review --preview``)."""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

import html
import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.lessons.models import Lesson, LessonConflict
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review import revocation
from experience.review.impact import revocation_impact
from experience.runs.models import RevocationImpact
from reviewconsole import clock
from reviewconsole.models import Action, Event
from tests.experience.conftest import SCOPE
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db

QUERY = "优惠券 无法使用"


@pytest.fixture
def conflicted(approved_lesson: Callable[..., Lesson], two_cases: list[Case]) -> dict[str, Any]:
    """The demo's situation: two approved lessons in an open conflict, the first supported by
    one case only, so revoking that case leaves it unavailable."""
    first, second = two_cases
    failure = approved_lesson(lesson_data([first.id]))
    success = approved_lesson(
        lesson_data([second.id], lesson_type="success_pattern", conclusion="先让顾客刷新缓存")
    )
    conflict = LessonConflict.objects.get()
    assert {conflict.lesson_a_id, conflict.lesson_b_id} == {failure.id, success.id}
    return {
        "case": first,
        "other_case": second,
        "failure": failure,
        "success": success,
        "conflict": conflict,
    }


def _for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_revoking_a_case_lists_the_lesson_it_leaves_unavailable_and_the_conflict_of_that_lesson(
    conflicted: dict[str, Any], reviewer: User
) -> None:
    case, failure, conflict = conflicted["case"], conflicted["failure"], conflicted["conflict"]
    preview = revocation_impact(case.id)
    assert preview.lessons == [failure.id]
    assert preview.conflicts == [conflict.pk]
    outcome = revocation.case_revoke(case=case, actor=reviewer, reason="wrong store list")
    assert outcome.impact == preview
    stored = RevocationImpact.objects.get(item_id=case.id)
    assert stored.lessons == [failure.id] and stored.conflicts == [conflict.pk]
    event = Event.objects.get(action=Action.CASE_REVOKE, target=case.id)
    # The audit event, the answer and the stored row say one list.
    assert event.details["impact"] == outcome.impact.as_json()
    assert event.details["impact"]["conflicts"] == [conflict.pk]


def test_revoking_a_lesson_lists_the_conflicts_it_closes(
    conflicted: dict[str, Any], reviewer: User
) -> None:
    failure, conflict = conflicted["failure"], conflicted["conflict"]
    outcome = revocation.lesson_revoke(lesson=failure, actor=reviewer, reason="wrong")
    assert outcome.impact.conflicts == [conflict.pk]
    assert RevocationImpact.objects.get(item_id=failure.id).conflicts == [conflict.pk]


def test_the_runs_whose_context_block_carried_the_case_are_named_apart(
    conflicted: dict[str, Any], agent: User, reviewer: User
) -> None:
    case = conflicted["case"]
    block = experience_context(QUERY, SCOPE, clock.now(), "run-block-1", 2000, actor=agent)
    assert case.id in [item["id"] for item in block["items"]]
    recalled = retrieve_experience(QUERY, SCOPE, clock.now(), "run-recall-1", 10, actor=agent)
    assert case.id in [item["id"] for item in recalled["items"]]
    preview = revocation_impact(case.id)
    assert {"run-block-1", "run-recall-1"} <= set(preview.runs)
    assert preview.context_blocks == ["run-block-1"]
    outcome = revocation.case_revoke(case=case, actor=reviewer, reason="wrong store list")
    assert RevocationImpact.objects.get(item_id=case.id).context_blocks == ["run-block-1"]
    assert outcome.impact.as_json()["context_blocks"] == ["run-block-1"]


def test_the_console_previews_confirms_and_stores_the_lessons_and_conflicts(
    conflicted: dict[str, Any], reviewer: User
) -> None:
    case, failure, conflict = conflicted["case"], conflicted["failure"], conflicted["conflict"]
    client = _for(reviewer)
    url = reverse("experience:case-revoke", args=[case.digest])
    preview = client.get(url).content.decode()
    assert 'id="preview-lessons"' in preview and failure.get_absolute_url() in preview
    assert 'id="preview-conflicts"' in preview and conflict.get_absolute_url() in preview
    signature = html.unescape(
        preview.split('name="previewed_impact" value="', 1)[1].split('"', 1)[0]
    )
    done = client.post(
        url, {"reason": "wrong store list", "previewed_impact": signature}, follow=True
    )
    page = done.content.decode()
    assert "1 lesson(s), 1 conflict(s)" in page
    assert "The impact changed" not in page
    stored = page.split("Revocation impact (stored)", 1)[1]
    assert failure.get_absolute_url() in stored and conflict.get_absolute_url() in stored


def test_the_revocation_mail_lists_the_lessons_and_conflicts(
    conflicted: dict[str, Any], reviewer: User, second_reviewer: User
) -> None:
    case, failure, conflict = conflicted["case"], conflicted["failure"], conflicted["conflict"]
    second_reviewer.email = "approver@example.test"
    second_reviewer.save(update_fields=["email"])
    mail.outbox.clear()
    revocation.case_revoke(case=case, actor=reviewer, reason="wrong store list")
    [sent] = mail.outbox
    assert f"lessons leaving retrieval: {failure.id}" in sent.body
    assert f"conflicts whose side changes: #{conflict.pk}" in sent.body


def test_review_preview_prints_every_part_of_the_impact(
    conflicted: dict[str, Any], reviewer: User
) -> None:
    case, failure, conflict = conflicted["case"], conflicted["failure"], conflicted["conflict"]
    args = ["revoke", case.id, "--as", reviewer.username, "--reason", "x", "--preview"]
    text = StringIO()
    call_command("review", *args, stdout=text)
    assert f"lessons leaving retrieval: {failure.id}" in text.getvalue()
    assert f"conflicts whose side changes: #{conflict.pk}" in text.getvalue()
    out = StringIO()
    call_command("review", *args, "--json", stdout=out)
    impact = json.loads(out.getvalue())["impact"]
    # The contract's fields stay; the new ones are added beside them.
    assert set(impact) >= {"skills", "runs"}
    assert impact["lessons"] == [failure.id] and impact["conflicts"] == [conflict.pk]
