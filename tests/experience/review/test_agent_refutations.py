"""Agents' refutations never take memory out alone, and restore is never one's own item.

Issue 37, items 1 and 2. One fresh agent token used to outdate an approved lesson of two
incidents with two requests (a retrieval under a new run id, then ``lead_was_wrong``) and to push
the cases it cited out of the context block. The rule is now symmetric with confirmations
(``experience.lessons.domain.counted_outcomes``): an agent's refutation is kept, shown on the item
and queues a re-review naming its runs, and counts once a reviewer reports that run's outcome.
"""

# The lesson fixtures are imported from test_lessons; pytest passes them as same-named arguments.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation.models import ReReview, ReReviewReason, ReReviewResolution, ReReviewStatus
from curation.rereview import rereview_confirm
from curation.scan import curation_scan
from experience.cases import selectors, services
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons.models import Lesson
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review import decisions, revocation
from experience.review import outdating as review_outdating
from experience.review.outcomes import REVIEWED_OUTCOME, run_outcome_report
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from tests.experience.conftest import SCOPE, skill_data
from tests.experience.lessons.test_lessons import (  # noqa: F401 (fixtures)
    approved_lesson,
    lesson_data,
    submit_lesson,
    two_cases,
)

pytestmark = pytest.mark.django_db

WORDS = "优惠券 无法使用"


def retrieved(actor: User, run_id: str) -> dict[str, dict[str, Any]]:
    result = retrieve_experience(WORDS, SCOPE, clock.now(), run_id, 10, actor=actor)
    return {item["id"]: item for item in result["items"]}


def in_block(actor: User, run_id: str) -> set[str]:
    block = experience_context(WORDS, SCOPE, clock.now(), run_id, 4000, actor=actor)
    return {item["id"] for item in block["items"]}


def scores(*ids: str) -> dict[str, ld.Confidence]:
    """The confidence of each case, skill or lesson named."""
    now = clock.now()
    found = lesson_selectors.item_confidences(
        [i for i in ids if i.startswith("case:")], [i for i in ids if i.startswith("skill:")], now
    )
    for lesson_id in (i for i in ids if i.startswith("lesson:")):
        found[lesson_id] = lesson_selectors.lesson_confidence(
            lesson_selectors.lesson_get(lesson_id), now
        )
    return found


@pytest.fixture
def memory(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    reviewer: User,
    second_reviewer: User,
) -> tuple[Lesson, list[Case], Skill]:
    """An approved lesson on two incidents (0.667, above the 0.6 recall threshold), its two
    cases (0.5 each, above the context block's 0.3) and a skill citing both (0.667)."""
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data([c.id for c in two_cases]), tool_specs()), actor=reviewer
    )
    decisions.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    return lesson, two_cases, selectors.skill_get(skill.id)


def test_one_fresh_agent_token_refuting_one_run_takes_nothing_out(
    memory: tuple[Lesson, list[Case], Skill], agent: User
) -> None:
    lesson, cases, skill = memory
    ids = [lesson.id, *(c.id for c in cases), skill.id]
    before = {i: s.value for i, s in scores(*ids).items()}
    assert before[cases[0].id] == 0.5 and before[skill.id] == 0.667
    read = retrieved(agent, "fresh-run")
    assert lesson.id in read and all(c.id in read for c in cases)

    report = run_outcome_report(run_id="fresh-run", outcome="lead_was_wrong", actor=agent).as_json()

    assert report["counts"] is False
    after = scores(*ids)
    assert {i: s.value for i, s in after.items()} == before
    for item_id in ids:
        inputs = after[item_id].inputs
        assert (inputs.refuting_outcomes, inputs.unconfirmed_refutations) == (0, 1), item_id
        assert "refutation(s) awaiting a reviewer" in after[item_id].why()
    stored = Lesson.objects.get(pk=lesson.id)
    assert stored.status == Status.APPROVED
    assert not Event.objects.filter(action=Action.LESSON_OUTDATE).exists()
    assert lesson.id in retrieved(agent, "probe-1")
    assert {c.id for c in cases} <= in_block(agent, "probe-2")
    # The refutation queues a re-review of each item the run read, naming the run.
    entries = ReReview.objects.filter(reason=ReReviewReason.REFUTED, status=ReReviewStatus.OPEN)
    assert {e.item_id for e in entries} == set(ids)
    assert all(e.runs == ["fresh-run"] for e in entries)


def test_an_agent_flooding_refutations_adds_one_entry_per_item_and_moves_nothing(
    memory: tuple[Lesson, list[Case], Skill], agent: User
) -> None:
    lesson, _cases, _skill = memory
    before = scores(lesson.id)[lesson.id].value
    for n in range(6):
        retrieved(agent, f"flood-{n}")
        run_outcome_report(run_id=f"flood-{n}", outcome="lead_was_wrong", actor=agent)
    assert scores(lesson.id)[lesson.id].value == before
    entry = ReReview.objects.get(item_id=lesson.id, reason=ReReviewReason.REFUTED)
    assert entry.runs == [f"flood-{n}" for n in range(6)]
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_a_reviewers_report_of_the_run_makes_the_refutation_count(
    memory: tuple[Lesson, list[Case], Skill], agent: User, reviewer: User
) -> None:
    lesson, _cases, _skill = memory
    retrieved(agent, "fresh-run")
    run_outcome_report(run_id="fresh-run", outcome="lead_was_wrong", actor=agent)
    report = run_outcome_report(
        run_id="fresh-run", outcome="lead_was_wrong", actor=reviewer
    ).as_json()
    assert report["counts"] is True
    # Two incidents for it, one counted refutation: 0.386, below the threshold it was above.
    stored = Lesson.objects.get(pk=lesson.id)
    assert (stored.status, stored.outdated_cause) == (Status.OUTDATED, ld.CONFIDENCE_FELL)
    inputs = scores(lesson.id)[lesson.id].inputs
    assert (inputs.refuting_outcomes, inputs.unconfirmed_refutations) == (1, 0)
    # The reviewer's report answered the agent's refutation: its entry is closed.
    entry = ReReview.objects.get(item_id=lesson.id, reason=ReReviewReason.REFUTED)
    assert (entry.status, entry.resolution) == (
        ReReviewStatus.CLOSED,
        ReReviewResolution.REPORTED,
    )
    assert entry.resolved_by == reviewer


def test_a_reviewer_confirms_the_item_holds_and_the_entry_closes(
    memory: tuple[Lesson, list[Case], Skill], agent: User, reviewer: User
) -> None:
    lesson, _cases, _skill = memory
    retrieved(agent, "fresh-run")
    run_outcome_report(run_id="fresh-run", outcome="lead_was_wrong", actor=agent)
    entry = ReReview.objects.get(item_id=lesson.id, reason=ReReviewReason.REFUTED)
    rereview_confirm(entry=entry, actor=reviewer, reason="the run asked another question")
    entry.refresh_from_db()
    assert (entry.status, entry.resolution) == (
        ReReviewStatus.CLOSED,
        ReReviewResolution.CONFIRMED,
    )
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_an_agent_cannot_undo_a_reviewers_report_of_its_run(
    memory: tuple[Lesson, list[Case], Skill], agent: User, reviewer: User
) -> None:
    lesson, cases, _skill = memory
    retrieved(agent, "run-1")
    run_outcome_report(run_id="run-1", outcome="resolved_by_lead", actor=reviewer)
    confirmed = scores(cases[0].id)[cases[0].id]
    assert confirmed.inputs.confirming_outcomes == 1
    with pytest.raises(ValidationFailure) as refused:
        run_outcome_report(run_id="run-1", outcome="lead_was_wrong", actor=agent)
    assert (refused.value.field, refused.value.message) == ("run_id", REVIEWED_OUTCOME)
    assert scores(cases[0].id)[cases[0].id] == confirmed
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


@pytest.fixture
def contradicted(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    approved_case: Callable[..., Case],
    settings: Any,
) -> Lesson:
    """An approved lesson on two incidents against a third (its approver saw 2 against 1)."""
    settings.LESSON_CONFIDENCE_THRESHOLD = 0.2
    counter = approved_case(incident="INC-3", title="二号店优惠券：门店已配置，仍失败")
    return approved_lesson(lesson_data([c.id for c in two_cases], contradicts=[counter.id]))


def outdated_by_evidence(lesson: Lesson, supporting: Case, revoker: User) -> None:
    """One supporting case revoked: one incident for, one against; the scan outdates it."""
    revocation.case_revoke(case=supporting, actor=revoker, reason="wrong diagnosis")
    assert [found.id for found in curation_scan().outdated] == [lesson.id]


@pytest.fixture
def restored(
    contradicted: Lesson,
    two_cases: list[Case],
    second_reviewer: User,
    make_user: Callable[[str, str], User],
    agent: User,
) -> Lesson:
    """The contradicted lesson, read by an agent's run that refuted it, outdated by its evidence
    and restored by a reviewer."""
    retrieved(agent, "old-run")
    run_outcome_report(run_id="old-run", outcome="lead_was_wrong", actor=agent)
    outdated_by_evidence(contradicted, two_cases[1], second_reviewer)
    review_outdating.lesson_restore(
        lesson=contradicted, actor=make_user("rhea", "reviewer"), reason="the campaign differs"
    )
    return Lesson.objects.get(pk=contradicted.id)


def test_flipping_an_old_runs_outcome_does_not_undo_a_restore(
    restored: Lesson, agent: User
) -> None:
    assert restored.status == Status.APPROVED
    for outcome in ("resolved_by_lead", "unresolved", "lead_was_wrong", "lead_was_wrong"):
        run_outcome_report(run_id="old-run", outcome=outcome, actor=agent)
        assert Lesson.objects.get(pk=restored.id).status == Status.APPROVED, outcome
    assert curation_scan().outdated == []
    assert Event.objects.filter(action=Action.LESSON_OUTDATE).count() == 1
    # Each change is audited with what it replaced and who had reported that.
    changes = Event.objects.filter(action=Action.RUN_OUTCOME, target="old-run").order_by("id")
    assert [e.details["previous"] for e in changes] == [
        None,
        "lead_was_wrong",
        "resolved_by_lead",
        "unresolved",
        "lead_was_wrong",
    ]
    last = changes.last()
    assert last is not None and last.details["previous_reported_by"] == agent.username


# --- item 2: four eyes on restore --------------------------------------------------------------


def test_the_submitter_cannot_restore_her_own_lesson(
    contradicted: Lesson, two_cases: list[Case], second_reviewer: User, reviewer: User
) -> None:
    """``reviewer`` submitted the lesson (test_lessons.submit_lesson): restoring it is hers no
    more than approving it was; any other reviewer may."""
    assert contradicted.submitted_by == reviewer
    outdated_by_evidence(contradicted, two_cases[1], second_reviewer)
    with pytest.raises(ReviewRefused) as refusal:
        review_outdating.lesson_restore(
            lesson=contradicted, actor=reviewer, reason="mine and it holds"
        )
    assert refusal.value.unmet == [domain.OWN_SUBMISSION]
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED
    client = Client()
    client.force_login(reviewer)
    url = reverse("experience:lesson-restore", args=[contradicted.digest])
    assert client.post(url, {"reason": "mine and it holds"}).status_code == 422
    assert Lesson.objects.get(pk=contradicted.id).status == Status.OUTDATED
    assert not Event.objects.filter(action=Action.LESSON_RESTORE).exists()
    review_outdating.lesson_restore(lesson=contradicted, actor=second_reviewer, reason="it holds")
    assert Lesson.objects.get(pk=contradicted.id).status == Status.APPROVED


# --- the console: shown on the item, queued with its runs ------------------------------------


def test_the_console_shows_the_refutation_and_a_reviewer_confirms_it_from_the_queue(
    memory: tuple[Lesson, list[Case], Skill], agent: User, second_reviewer: User
) -> None:
    lesson, _cases, _skill = memory
    retrieved(agent, "fresh-run")
    run_outcome_report(run_id="fresh-run", outcome="lead_was_wrong", actor=agent)
    client = Client()
    client.force_login(second_reviewer)
    page = client.get(lesson.get_absolute_url()).content.decode()
    assert "1 agent&#x27;s refutation waits for a reviewer and does not count yet." in page
    queue = client.get(reverse("curation:rereview-list"), {"reason": "refuted"}).content.decode()
    entry = ReReview.objects.get(item_id=lesson.id, reason=ReReviewReason.REFUTED)
    assert reverse("experience:run-detail", args=["fresh-run"]) in queue
    confirm = reverse("curation:rereview-confirm", args=[entry.pk])
    assert confirm in queue
    assert client.post(confirm, {"reason": "the run asked about another campaign"}).status_code in (
        302,
        303,
    )
    entry.refresh_from_db()
    assert (entry.status, entry.resolution, entry.resolved_by) == (
        ReReviewStatus.CLOSED,
        ReReviewResolution.CONFIRMED,
        second_reviewer,
    )
    event = Event.objects.get(action=Action.REREVIEW_CONFIRM, target=lesson.id)
    assert event.actor == second_reviewer


def test_the_lesson_page_offers_its_submitter_no_restore(
    contradicted: Lesson, two_cases: list[Case], second_reviewer: User, reviewer: User
) -> None:
    outdated_by_evidence(contradicted, two_cases[1], second_reviewer)
    restore = reverse("experience:lesson-restore", args=[contradicted.digest])
    for user, offered in ((reviewer, False), (second_reviewer, True)):
        client = Client()
        client.force_login(user)
        page = client.get(contradicted.get_absolute_url()).content.decode()
        assert (f'action="{restore}"' in page) is offered, user.username
        assert ('id="restore-not-yours"' in page) is not offered, user.username
