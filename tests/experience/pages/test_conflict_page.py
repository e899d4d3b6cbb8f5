"""The conflict page tells the truth: each side's current availability and confidence, a banner
worded from those same figures, and a warning before a decision that leaves neither lesson of
the conflict in retrieval (``experience/pages/conflicts.py``: ``_conflict_side``, ``_standing``)."""

# The fixtures are imported from the modules that define them; pytest passes them as same-named
# arguments.
# ruff: noqa: F811

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from experience.core.models import Status
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.review import revocation
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)
from tests.experience.review.test_revocation_impact import conflicted  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _page(user: User, conflict: LessonConflict) -> str:
    client = Client()
    client.force_login(user)
    return client.get(conflict.get_absolute_url()).content.decode()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", html)).strip()


def _part(html: str, start: str, end: str) -> str:
    return html.split(start, 1)[1].split(end, 1)[0]


def _sides(html: str) -> list[str]:
    return html.split('<div class="conflict-sides">', 1)[1].split('<section class="panel"')[1:3]


def _revoke_the_only_support(conflicted: dict[str, Any], reviewer: User) -> None:
    revocation.case_revoke(case=conflicted["case"], actor=reviewer, reason="wrong store list")


def test_a_side_whose_every_supporting_case_is_revoked_shows_unavailable(
    conflicted: dict[str, Any], reviewer: User, make_user: Any
) -> None:
    _revoke_the_only_support(conflicted, reviewer)
    failure, success = conflicted["failure"], conflicted["success"]
    sides = {
        failure.id if failure.conclusion in side else success.id: side
        for side in _sides(_page(make_user("rhea", "reviewer"), conflicted["conflict"]))
    }
    assert "approved, unavailable" in sides[failure.id]
    assert "Unavailable:" in sides[failure.id]
    assert "Confidence 0.0 —" in _text(sides[failure.id])
    assert "approved, unavailable" not in sides[success.id]
    assert "Confidence 0.5 —" in _text(sides[success.id])


def test_the_banner_is_worded_from_the_figures_beside_it(
    conflicted: dict[str, Any], reviewer: User, make_user: Any
) -> None:
    rhea = make_user("rhea", "reviewer")
    before = _text(_part(_page(rhea, conflicted["conflict"]), 'id="conflict-standing">', "</div>"))
    # Found with the same support on each side: neither was ahead, and neither is now.
    assert "Neither lesson is better supported now" in before and "confidence 0.5" in before

    _revoke_the_only_support(conflicted, reviewer)
    html = _page(rhea, conflicted["conflict"])
    banner = _text(_part(html, 'id="conflict-standing">', "</div>"))
    success, failure = conflicted["success"], conflicted["failure"]
    now = _text(_part(html, 'id="conflict-favoured-now">', "</p>"))
    assert now.startswith("Better supported now: the success pattern")
    # The figures each side shows (confidence 0.5 against 0.0), with the side they belong to.
    assert f"“{success.conclusion}” (confidence 0.5)" in now
    assert f"“{failure.conclusion}” (confidence 0.0)" in now
    # What was true when the conflict was found is said as that, after the figures of now.
    assert "Neither lesson was better supported when the conflict was found." in banner
    assert banner.index("Better supported now") < banner.index("when the conflict was found")


def test_keeping_the_unavailable_side_is_warned_before_and_after(
    conflicted: dict[str, Any], reviewer: User, make_user: Any
) -> None:
    _revoke_the_only_support(conflicted, reviewer)
    rhea = make_user("rhea", "reviewer")
    conflict, failure, success = (
        conflicted["conflict"],
        conflicted["failure"],
        conflicted["success"],
    )
    html = _page(rhea, conflict)
    keep_failure = _part(html, f'name="keep" value="{failure.id}"', 'name="keep"')
    keep_success = html.split(f'name="keep" value="{success.id}"', 1)[1]
    assert "leaves neither lesson of this conflict in retrieval" in keep_failure
    assert "leaves neither lesson" not in keep_success.split("</fieldset>", 1)[0]

    client = Client()
    client.force_login(rhea)
    done = client.post(
        conflict.get_absolute_url(),
        {"keep": failure.id, "action": "revoke", "reason": "the failure lesson is right"},
        follow=True,
    )
    assert Lesson.objects.get(pk=success.id).status == Status.REVOKED
    assert LessonConflict.objects.get().status == ConflictStatus.RESOLVED
    assert "Neither lesson of this conflict is in retrieval now" in done.content.decode()


def test_the_chinese_page_says_it_too(
    conflicted: dict[str, Any], reviewer: User, make_user: Any
) -> None:
    _revoke_the_only_support(conflicted, reviewer)
    client = Client()
    client.force_login(make_user("rhea", "reviewer"))
    html = client.get(
        conflicted["conflict"].get_absolute_url(), headers={"Accept-Language": "zh-hans"}
    ).content.decode()
    for english in (
        "Better supported now",
        "leaves neither lesson",
        "approved, unavailable",
        "Lesson conflicts whose side changes",
        "context block",
    ):
        assert english not in html, english
