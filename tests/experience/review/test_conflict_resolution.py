"""Lesson conflicts resolve as the design says (issue 27, item 5): narrowing resolves a conflict
of any kind, ``explicit_link`` included, because the narrowed version's links are re-evaluated
against the kept lesson instead of copied; the better-supported side is named and the other is
put in the re-review queue."""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation.models import ReReview, ReReviewReason, ReReviewResolution, ReReviewStatus
from experience.cases.models import Case
from experience.core.models import Status
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.review import conflicts, decisions, lesson_conflicts
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_cases(two_cases: list[Case], approved_case: Callable[..., Case]) -> list[Case]:
    third = approved_case(incident="INC-3", title="二号店优惠券：服务端缓存过期")
    return [*two_cases, third]


def open_conflicts() -> list[LessonConflict]:
    return list(LessonConflict.objects.filter(status=ConflictStatus.OPEN))


def test_narrowing_resolves_an_explicit_link_conflict(
    approved_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    """A tool-usage lesson and a domain-knowledge lesson (types that never oppose) dispute one
    case: the first cites INC-1 as support, the second as a counterexample. The second is
    narrowed to the server-cache situation; once approved, the conflict is closed and stays
    closed, and no new conflict opens between the kept lesson and the narrowed version."""
    first, second, third = three_cases
    kept = approved_lesson(
        lesson_data(
            [first.id, second.id],
            lesson_type="tool_usage",
            conclusion="用活动配置工具核对适用门店",
        )
    )
    other = approved_lesson(
        lesson_data(
            [third.id],
            contradicts=[first.id],
            lesson_type="domain_knowledge",
            conclusion="优惠券失败多因服务端缓存",
        )
    )
    (conflict,) = open_conflicts()
    assert conflict.found_by == ld.EXPLICIT_LINK
    result = conflicts.conflict_resolve(
        conflict=conflict,
        keep=kept.id,
        action="narrow",
        actor=make_user("rhea", "reviewer"),
        reason="只在服务端缓存过期时成立",
        precondition="服务端缓存已过期",
        tags=["服务端缓存"],
    )
    narrowed = Lesson.objects.get(pk=result.narrowed)
    approval = decisions.lesson_approve(lesson=narrowed, actor=second_reviewer, reason="narrowed")
    # No conflict opens at once between the kept lesson and the narrowed version.
    assert approval.conflicts == ()
    assert open_conflicts() == []
    closed = LessonConflict.objects.get(pk=conflict.pk)
    assert (closed.status, closed.resolution, closed.kept) == (
        ConflictStatus.RESOLVED,
        "narrowed",
        kept.id,
    )
    assert Lesson.objects.get(pk=other.id).status == Status.SUPERSEDED
    # Its links were re-evaluated: the case the kept lesson cites the other way is no longer
    # cited; its own support stays.
    evidence = lesson_selectors.lesson_evidence(narrowed)
    assert [c.id for c in evidence.supports] == [third.id]
    assert evidence.contradicts == []
    # The scan finds nothing either.
    assert lesson_conflicts.conflicts_scan(actor=None, now=clock.now()) == []
    assert open_conflicts() == []


def test_narrowing_resolves_a_type_opposition_conflict_for_good(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    """The narrowed version keeps the scene's description, so the scenes still overlap as text;
    the narrowing a second reviewer approved is what sets the two apart, at approval and on
    every scan after it, and for later versions of either."""
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    success = approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    (conflict,) = open_conflicts()
    assert conflict.found_by == ld.TYPE_OPPOSITION
    result = conflicts.conflict_resolve(
        conflict=conflict,
        keep=failure.id,
        action="narrow",
        actor=make_user("rhea", "reviewer"),
        reason="只在服务端缓存过期时成立",
        precondition="服务端缓存已过期",
        tags=["服务端缓存"],
    )
    narrowed = Lesson.objects.get(pk=result.narrowed)
    approval = decisions.lesson_approve(lesson=narrowed, actor=second_reviewer, reason="narrowed")
    assert approval.conflicts == ()
    assert open_conflicts() == []
    assert lesson_conflicts.conflicts_scan(actor=None, now=clock.now()) == []
    assert Lesson.objects.get(pk=success.id).status == Status.SUPERSEDED


def test_a_new_counterexample_after_narrowing_is_a_conflict_again(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    """Narrowing settles the dispute it was about; a later version that cites a case of the kept
    lesson against it starts a new one (explicit links are always read from the links)."""
    first, second, third = three_cases
    kept = approved_lesson(
        lesson_data([first.id, second.id], lesson_type="tool_usage", conclusion="核对适用门店")
    )
    approved_lesson(
        lesson_data(
            [third.id],
            contradicts=[first.id],
            lesson_type="domain_knowledge",
            conclusion="优惠券失败多因服务端缓存",
        )
    )
    (conflict,) = open_conflicts()
    result = conflicts.conflict_resolve(
        conflict=conflict,
        keep=kept.id,
        action="narrow",
        actor=make_user("rhea", "reviewer"),
        reason="只在服务端缓存过期时成立",
        precondition="服务端缓存已过期",
    )
    narrowed = Lesson.objects.get(pk=result.narrowed)
    decisions.lesson_approve(lesson=narrowed, actor=second_reviewer, reason="narrowed")
    later = submit_lesson(
        lesson_data(
            [third.id],
            contradicts=[second.id],
            lesson_type="domain_knowledge",
            conclusion="优惠券失败多因服务端缓存",
            precondition="服务端缓存已过期",
            supersedes=narrowed.id,
        ),
        actor=make_user("rex", "reviewer"),
    )
    approval = decisions.lesson_approve(lesson=later, actor=second_reviewer, reason="new evidence")
    (reopened,) = open_conflicts()
    assert approval.conflicts == (reopened.pk,) and reopened.found_by == ld.EXPLICIT_LINK


def test_narrowing_is_refused_when_every_support_is_contested(
    approved_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    first, _second, third = three_cases
    kept = approved_lesson(
        lesson_data([first.id], contradicts=[third.id], lesson_type="tool_usage")
    )
    approved_lesson(lesson_data([third.id], contradicts=[first.id], lesson_type="domain_knowledge"))
    (conflict,) = open_conflicts()
    with pytest.raises(ValidationFailure) as refusal:
        conflicts.conflict_resolve(
            conflict=conflict,
            keep=kept.id,
            action="narrow",
            actor=make_user("rhea", "reviewer"),
            reason="只在服务端缓存过期时成立",
            precondition="服务端缓存已过期",
        )
    assert refusal.value.field == "action"
    assert refusal.value.message == conflicts.NARROW_LEAVES_NO_SUPPORT
    assert Lesson.objects.count() == 2  # nothing was written


def test_the_better_supported_side_is_named_and_the_other_waits_for_re_review(
    approved_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    first, second, third = three_cases
    strong = approved_lesson(lesson_data([first.id, second.id]))  # two incidents: 0.667
    weak = approved_lesson(
        lesson_data([third.id], lesson_type="success_pattern", conclusion="先让顾客刷新缓存再重试")
    )  # one incident: 0.5
    (conflict,) = open_conflicts()
    assert conflict.found_by == ld.TYPE_OPPOSITION
    assert conflict.favoured == strong.id
    entry = ReReview.objects.get(reason=ReReviewReason.CONFLICT)
    assert (entry.item_id, entry.detail, entry.status) == (
        weak.id,
        str(conflict.pk),
        ReReviewStatus.OPEN,
    )
    assert not ReReview.objects.filter(item_id=strong.id).exists()
    page = Client()
    page.force_login(make_user("rex", "reviewer"))
    html = page.get(conflict.get_absolute_url()).content.decode()
    assert 'id="conflict-favoured"' in html and strong.conclusion in html
    queue = page.get(reverse("curation:rereview-list")).content.decode()
    assert conflict.get_absolute_url() in queue
    # Resolving the conflict (here keeping the weaker side: the choice stays the reviewer's)
    # closes the entry.
    conflicts.conflict_resolve(
        conflict=conflict,
        keep=weak.id,
        action="revoke",
        actor=make_user("rhea", "reviewer"),
        reason="刷新确实有效",
    )
    entry.refresh_from_db()
    assert (entry.status, entry.resolution) == (ReReviewStatus.CLOSED, ReReviewResolution.SETTLED)


def test_the_favoured_side_rule() -> None:
    side = ld.ConflictSide
    assert ld.favoured_side(side("a", True, 0.6), side("b", True, 0.5)) == "a"
    assert ld.favoured_side(side("a", True, 0.5), side("b", True, 0.6)) == "b"
    assert ld.favoured_side(side("a", True, 0.5), side("b", True, 0.5)) == ""
    # Evidence first: a side without usable support is never kept over one with it.
    assert ld.favoured_side(side("a", False, 0.9), side("b", True, 0.1)) == "b"
    assert ld.favoured_side(side("a", False, 0.0), side("b", False, 0.0)) == ""
