"""Outdated lessons: counterexamples that reach the support, or a confidence that falls below the
threshold after having been above it, take an approved lesson out of reuse (retrieval, the context
block), put it in the re-review queue and tell its approvers; a reviewer restores it (with a
reason) or revokes it (with the revocation impact). Issue 27, item 4."""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse

from curation.models import ReReview, ReReviewReason, ReReviewResolution, ReReviewStatus
from curation.scan import curation_scan
from experience.cases.models import Case
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from experience.retrieval.block import experience_context
from experience.review import decisions, revocation
from experience.review import outdating as review_outdating
from experience.review.outcomes import run_outcome_report
from experience.runs.claims import run_claim
from experience.runs.records import references_record
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event, TenantMembership
from reviewconsole.services import user_set_role
from tests.experience.conftest import SCOPE
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    recall,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db

QUERY_WORDS = "优惠券 无法使用"


def recalled(agent: User) -> set[str]:
    """What recall returns (read under ``run-l``)."""
    return {item["id"] for item in recall(agent, QUERY_WORDS)}


def in_context_block(agent: User, run_id: str) -> set[str]:
    block = experience_context(QUERY_WORDS, SCOPE, clock.now(), run_id, 2000, actor=agent)
    return {item["id"] for item in block["items"]}


def read_by_run(lesson: Lesson, run_id: str, actor: User) -> None:
    """A run of ``actor`` that read the lesson (by id, as a skill run or an investigation does)."""
    with transaction.atomic():
        run_claim(run_id=run_id, actor=actor, tenant=lesson.tenant, at=clock.now())
        references_record(run_id=run_id, items=[(lesson.id, "lesson")], at=clock.now())


def with_email(user: User) -> User:
    user.email = f"{user.username}@example.test"
    user.save(update_fields=["email"])
    return user


@pytest.fixture
def three_cases(two_cases: list[Case], approved_case: Callable[..., Case]) -> list[Case]:
    counter = approved_case(incident="INC-3", title="二号店优惠券：门店已配置，仍失败")
    return [*two_cases, counter]


@pytest.fixture
def contradicted(
    approved_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    second_reviewer: User,
    agent: User,
    settings: Any,
) -> Lesson:
    """A lesson supported by two incidents and contradicted by a third, read by a run, whose
    second supporting case is then revoked: its counterexamples reach its support. The recall and
    context thresholds are lowered so that the lesson is in both before (its confidence is
    0.386) and after a restoration (0.211 with one incident on each side)."""
    settings.LESSON_CONFIDENCE_THRESHOLD = 0.2
    settings.CONTEXT_CONFIDENCE_THRESHOLD = 0.2
    with_email(second_reviewer)
    supports, counter = three_cases[:2], three_cases[2]
    lesson = approved_lesson(lesson_data([c.id for c in supports], contradicts=[counter.id]))
    assert lesson.status == Status.APPROVED  # its approver saw 2 supports against 1
    assert lesson.id in recalled(agent)
    assert lesson.id in in_context_block(agent, "run-block")
    revocation.case_revoke(case=supports[1], actor=second_reviewer, reason="wrong diagnosis")
    mail.outbox.clear()
    return lesson


def test_counterexamples_reaching_the_support_make_a_lesson_outdated_out_of_reuse(
    contradicted: Lesson, agent: User, second_reviewer: User
) -> None:
    report = curation_scan()
    assert [lesson.id for lesson in report.outdated] == [contradicted.id]
    lesson = Lesson.objects.get(pk=contradicted.id)
    assert (lesson.status, lesson.outdated_cause) == (Status.OUTDATED, ld.CONTRADICTED)
    assert lesson.outdated_at == clock.now()
    # Out of retrieval and the context block.
    assert contradicted.id not in recalled(agent)
    assert contradicted.id not in in_context_block(agent, "run-block-2")
    # In the re-review queue, reported by the scan.
    entry = ReReview.objects.get(item_id=contradicted.id)
    assert (entry.item_type, entry.reason, entry.status) == (
        "lesson",
        ReReviewReason.OUTDATED,
        ReReviewStatus.OPEN,
    )
    assert entry.detail == ld.CONTRADICTED and entry.tenant == SCOPE["tenant"]
    assert entry in report.queued
    # Its approver is told, once.
    assert [m.to for m in mail.outbox] == [[second_reviewer.email]]
    assert contradicted.id in mail.outbox[0].body and "outdated" in mail.outbox[0].body
    # Audited as the evidence's doing, with the figures.
    event = Event.objects.get(action=Action.LESSON_OUTDATE, target=contradicted.id)
    assert event.actor is None
    assert event.details["cause"] == ld.CONTRADICTED and event.details["on"] == "scan"
    assert (event.details["successes"], event.details["failures"]) == (1, 1)


def test_the_check_is_idempotent(contradicted: Lesson) -> None:
    curation_scan()
    again = curation_scan()
    assert again.outdated == [] and again.queued == []
    assert ReReview.objects.filter(item_id=contradicted.id).count() == 1
    assert Event.objects.filter(action=Action.LESSON_OUTDATE).count() == 1
    assert len(mail.outbox) == 1


def test_curate_json_names_the_outdated_lessons(contradicted: Lesson) -> None:
    out = StringIO()
    call_command("curate", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["outdated_lessons"] == [{"id": contradicted.id, "cause": ld.CONTRADICTED}]
    assert [e["item_id"] for e in result["rereview"]] == [contradicted.id]


def test_restore_needs_a_reason_and_brings_the_lesson_back(
    contradicted: Lesson, agent: User, make_user: Callable[[str, str], User]
) -> None:
    curation_scan()
    restorer = make_user("rhea", "reviewer")
    with pytest.raises(ReviewRefused) as refusal:
        review_outdating.lesson_restore(lesson=contradicted, actor=restorer, reason="  ")
    assert refusal.value.unmet == [domain.REASON_REQUIRED]
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED

    outcome = review_outdating.lesson_restore(
        lesson=contradicted, actor=restorer, reason="the revoked case was a different campaign"
    )
    assert outcome.status == Status.APPROVED
    lesson = Lesson.objects.get(pk=contradicted.id)
    assert (lesson.status, lesson.outdated_cause, lesson.outdated_at) == (Status.APPROVED, "", None)
    assert contradicted.id in recalled(agent)
    assert contradicted.id in in_context_block(agent, "run-block-3")
    entry = ReReview.objects.get(item_id=contradicted.id)
    assert (entry.status, entry.resolution) == (ReReviewStatus.CLOSED, ReReviewResolution.RESTORED)
    event = Event.objects.get(action=Action.LESSON_RESTORE, target=contradicted.id)
    assert event.actor == restorer and event.reason == "the revoked case was a different campaign"
    # The restorer saw this evidence: the next scan leaves it alone.
    assert curation_scan().outdated == []
    # Restoring twice is refused by name.
    with pytest.raises(ReviewRefused) as twice:
        review_outdating.lesson_restore(lesson=contradicted, actor=restorer, reason="again")
    assert twice.value.unmet == [ld.NOT_OUTDATED]


def test_restore_needs_the_review_permission(contradicted: Lesson, operator: User) -> None:
    curation_scan()
    with pytest.raises(ReviewRefused) as refusal:
        review_outdating.lesson_restore(lesson=contradicted, actor=operator, reason="holds")
    assert refusal.value.unmet == [domain.NOT_REVIEWER]


def test_revoking_an_outdated_lesson_stores_its_impact_and_closes_the_entry(
    contradicted: Lesson, make_user: Callable[[str, str], User]
) -> None:
    curation_scan()
    outcome = revocation.lesson_revoke(
        lesson=contradicted, actor=make_user("rhea", "reviewer"), reason="no longer true"
    )
    assert outcome.status == Status.REVOKED
    # The runs that had read it: the recall and the context block of the fixture.
    assert {"run-l", "run-block"} <= set(outcome.impact.runs)
    entry = ReReview.objects.get(item_id=contradicted.id)
    assert (entry.status, entry.resolution) == (ReReviewStatus.CLOSED, ReReviewResolution.REVOKED)


def test_confidence_falling_below_the_threshold_after_being_above_makes_it_outdated(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], agent: User, reviewer: User
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))  # 0.667, above 0.6
    assert lesson.confident_at is not None
    assert lesson.id in recalled(agent)  # read under run-l
    # The agent's own refutation counts nothing (tests/experience/review/test_agent_refutations.py);
    # a reviewer's report of the run does.
    result = run_outcome_report(run_id="run-l", outcome="lead_was_wrong", actor=reviewer).as_json()
    assert result["counts"] is True
    # Two incidents for it, one refutation: 0.386, below the threshold; fewer counterexamples
    # than support, so it is the fall that makes it outdated, found when the outcome came in.
    outdated = Lesson.objects.get(pk=lesson.id)
    assert (outdated.status, outdated.outdated_cause) == (Status.OUTDATED, ld.CONFIDENCE_FELL)
    event = Event.objects.get(action=Action.LESSON_OUTDATE, target=lesson.id)
    assert (event.details["on"], event.details["detail"]) == ("outcome", "run-l")
    assert ReReview.objects.filter(item_id=lesson.id, status=ReReviewStatus.OPEN).exists()
    assert lesson.id not in recalled(agent)


def test_a_lesson_never_above_the_threshold_does_not_turn_outdated(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    agent: User,
    reviewer: User,
    settings: Any,
) -> None:
    settings.LESSON_CONFIDENCE_THRESHOLD = 0.7
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))  # 0.667, never above 0.7
    assert lesson.confident_at is None
    read_by_run(lesson, "run-by-id", agent)
    run_outcome_report(run_id="run-by-id", outcome="lead_was_wrong", actor=reviewer)
    assert curation_scan().outdated == []
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED
    assert not Event.objects.filter(action=Action.LESSON_OUTDATE).exists()


def test_time_alone_does_not_make_a_lesson_outdated(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case]
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    assert curation_scan(now=clock.now() + timedelta(days=400)).outdated == []
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_a_new_version_supersedes_an_outdated_lesson(
    contradicted: Lesson,
    submit_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    make_user: Callable[[str, str], User],
) -> None:
    curation_scan()
    version = submit_lesson(lesson_data([three_cases[0].id], supersedes=contradicted.id))
    decisions.lesson_approve(lesson=version, actor=make_user("rhea", "reviewer"), reason="reworded")
    assert Lesson.objects.get(pk=contradicted.id).status == Status.SUPERSEDED
    entry = ReReview.objects.get(item_id=contradicted.id)
    assert (entry.status, entry.resolution) == (
        ReReviewStatus.CLOSED,
        ReReviewResolution.SUPERSEDED,
    )


# --- the console -----------------------------------------------------------------------------


def client_for(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_the_lesson_page_and_the_lists_show_it_outdated_and_restore_works(
    contradicted: Lesson, make_user: Callable[[str, str], User]
) -> None:
    curation_scan()
    client = client_for(make_user("rhea", "reviewer"))
    page = client.get(contradicted.get_absolute_url()).content.decode()
    assert 'id="lesson-outdated"' in page and "badge-outdated" in page
    assert 'id="lesson-revoke"' in page  # revocable, with its impact preview
    listing = client.get(reverse("experience:lesson-list"), {"status": "outdated"})
    assert contradicted.title in listing.content.decode()
    queue = client.get(reverse("curation:rereview-list")).content.decode()
    restore_url = reverse("experience:lesson-restore", args=[contradicted.digest])
    assert restore_url in queue
    refused = client.post(restore_url, {"reason": ""})
    assert refused.status_code == 422
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED
    done = client.post(restore_url, {"reason": "still holds"})
    assert done.status_code == 303
    assert Lesson.objects.get(pk=contradicted.id).status == Status.APPROVED


def test_restoring_from_the_console_needs_the_permission_and_a_csrf_token(
    contradicted: Lesson, operator: User, make_user: Callable[[str, str], User]
) -> None:
    curation_scan()
    url = reverse("experience:lesson-restore", args=[contradicted.digest])
    assert client_for(operator).post(url, {"reason": "holds"}).status_code == 403
    assert (
        client_for(make_user("rhea", "reviewer"), csrf=True)
        .post(url, {"reason": "holds"})
        .status_code
        == 403
    )
    assert client_for(make_user("rex", "reviewer")).get(url).status_code == 405
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED


def test_another_tenants_reviewer_can_neither_see_nor_restore_it(contradicted: Lesson) -> None:
    curation_scan()
    outsider = user_set_role(username="otto", role="reviewer", password="x-Pass-12345")
    TenantMembership.objects.create(user=outsider, tenant="other")
    client = client_for(outsider)
    assert client.get(contradicted.get_absolute_url()).status_code == 404
    url = reverse("experience:lesson-restore", args=[contradicted.digest])
    assert client.post(url, {"reason": "mine now"}).status_code == 404
    assert contradicted.id not in client.get(reverse("curation:rereview-list")).content.decode()
    with pytest.raises(ValidationFailure) as refusal:
        review_outdating.lesson_restore(lesson=contradicted, actor=outsider, reason="mine now")
    assert refusal.value.field == "id"
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED


def test_the_rule_itself() -> None:
    """The pure rule, on figures: counterexamples reaching the support beyond what the reviewer
    saw; a fall below the threshold only once armed."""
    now = clock.now()

    def score(successes: int, failures: int) -> ld.Confidence:
        inputs = ld.ConfidenceInputs(
            supporting_incidents=successes, contradicting_incidents=failures
        )
        return ld.confidence(inputs, now=now)

    fresh = ld.OutdatedMarks(was_confident=False, seen_successes=2, seen_failures=0)
    assert ld.outdated_cause(score(2, 2), fresh, threshold=0.6) == ld.CONTRADICTED
    assert ld.outdated_cause(score(2, 1), fresh, threshold=0.6) is None
    accepted = ld.OutdatedMarks(was_confident=False, seen_successes=1, seen_failures=1)
    assert ld.outdated_cause(score(1, 1), accepted, threshold=0.6) is None
    assert ld.outdated_cause(score(1, 2), accepted, threshold=0.6) == ld.CONTRADICTED
    armed = ld.OutdatedMarks(was_confident=True, seen_successes=2, seen_failures=0)
    assert ld.outdated_cause(score(2, 1), armed, threshold=0.6) == ld.CONFIDENCE_FELL
    assert ld.outdated_cause(score(3, 0), armed, threshold=0.6) is None


def test_the_batch_confidences_equal_the_one_lesson_reads(
    contradicted: Lesson,
    approved_lesson: Callable[..., Lesson],
    three_cases: list[Case],
    agent: User,
    reviewer: User,
) -> None:
    other = approved_lesson(
        lesson_data([three_cases[2].id], lesson_type="success_pattern", conclusion="先刷新缓存")
    )
    read_by_run(other, "run-other", agent)
    run_outcome_report(run_id="run-other", outcome="lead_was_wrong", actor=reviewer)
    lessons_ = list(Lesson.objects.filter(pk__in=[contradicted.id, other.id]))
    now = clock.now()
    for aware in (True, False):
        batch = lesson_selectors.lesson_confidences(lessons_, now, conflict_aware=aware)
        for lesson in lessons_:
            assert batch[lesson.id] == lesson_selectors.lesson_confidence(
                lesson, now, conflict_aware=aware
            )
