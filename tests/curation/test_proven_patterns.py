"""Skills from proven patterns (issue 27, item 2): a success pattern confirmed by enough distinct
incidents, with a high enough success rate, is proposed as a skill by the curation scan; a rare
or volatile one stays a lesson. Proposals are per scope, and reviewed with four eyes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from curation.domain.proposals import PATTERN_LESSON, pattern_record, proven
from curation.models import ProposalStatus, RunDraft, SkillProposal
from curation.proposals import NO_LONGER_PROVEN, proposal_adopt
from curation.scan import curation_scan
from curation.selectors.proposals import proposal_queue
from experience.cases.models import Case, Skill
from experience.cases.services import skill_approve
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.lessons.services import lesson_approve, lesson_submit
from experience.review.outcomes import run_outcome_report
from experience.runs.claims import run_claim
from experience.runs.records import references_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.curation.test_aar import approved_skill, run, skill
from tests.curation.test_aar_lessons import approve_case
from tests.experience.conftest import NOW, SCOPE, approved_case, submit_case

__all__ = ["approved_case", "approved_skill", "skill", "submit_case"]

OTHER = "milkbar"

pytestmark = pytest.mark.django_db


def lesson_data(cases: list[str], **changes: Any) -> dict[str, Any]:
    return {
        "type": "lesson",
        "lesson_type": "success_pattern",
        "scope": SCOPE,
        "scene": {"tags": ["coupon"], "description": "新活动上线当天优惠券在小程序里用不了"},
        "precondition": "活动当天刚上线",
        "conclusion": "先核对活动门店和商品范围的配置",
        "supports": cases,
        "valid_from": "2026-01-01T00:00:00+00:00",
        "valid_to": "2027-12-01T00:00:00+00:00",
        **changes,
    }


@pytest.fixture
def lesson(approved_case: Callable[..., Case], reviewer: User, second_reviewer: User) -> Lesson:
    """An approved success pattern supported by two cases of two distinct incidents."""
    one = approved_case(incident="INC-1")
    two = approved_case(incident="INC-2", title="另一张工单：优惠券无法使用")
    submitted, _ = lesson_submit(
        content=parse_lesson(lesson_data([one.id, two.id])), actor=reviewer
    )
    lesson_approve(lesson=submitted, actor=second_reviewer, reason="both cases show it")
    submitted.refresh_from_db()
    return submitted


def read_and_report(item: Lesson, run_id: str, outcome: str, *, by: User, reader: User) -> None:
    """``reader`` reads the lesson under ``run_id`` (as retrieval records a read) and ``by``
    reports the run's outcome."""
    with transaction.atomic():
        run_claim(run_id=run_id, actor=reader, tenant=item.tenant, at=NOW)
        references_record(run_id=run_id, items=[(item.id, "lesson")], at=NOW)
    run_outcome_report(run_id=run_id, outcome=outcome, actor=by, now=NOW)


def lesson_proposals() -> list[SkillProposal]:
    return list(SkillProposal.objects.filter(pattern_kind=PATTERN_LESSON))


def test_enough_confirmed_outcomes_propose_a_skill(
    lesson: Lesson, agent: User, reviewer: User
) -> None:
    curation_scan(now=NOW)
    assert lesson_proposals() == []  # two incidents: below the default of three
    read_and_report(lesson, "run-ok-1", "resolved_by_lead", by=reviewer, reader=agent)
    report = curation_scan(now=NOW)
    (proposal,) = lesson_proposals()
    assert proposal in report.proposals
    assert (proposal.pattern, proposal.status, proposal.scope) == (
        lesson.id,
        ProposalStatus.OPEN,
        SCOPE,
    )
    assert sorted(proposal.incidents) == ["INC-1", "INC-2", "run:run-ok-1"]
    assert proposal.recipe[0]["tool"] == "search_knowledge"
    assert "100%" in proposal.when
    # Drafted once: a later scan finds it there.
    curation_scan(now=NOW)
    assert len(lesson_proposals()) == 1
    # Its page names the lesson it stands on and offers Submit.
    client = Client()
    client.force_login(reviewer)
    html = client.get(proposal.get_absolute_url()).content.decode()
    assert lesson.id in html and "adopt-heading" in html and "no-longer-proven" not in html


def test_an_agents_own_confirmations_prove_nothing(lesson: Lesson, agent: User) -> None:
    for n in range(3):
        read_and_report(lesson, f"run-self-{n}", "resolved_by_lead", by=agent, reader=agent)
    curation_scan(now=NOW)
    assert lesson_proposals() == []


@pytest.mark.parametrize(
    ("minimum", "rate", "proposed"),
    # Three incidents at a rate of 0.75: enough for a bar of (3, 0.75) or (2, 0.7); below a bar
    # of four incidents; volatile against the default rate of 0.8, so it stays a lesson.
    [(3, 0.75, True), (2, 0.7, True), (4, 0.75, False), (3, 0.8, False)],
)
def test_the_bar_is_configurable_and_the_rate_must_be_met(
    lesson: Lesson,
    agent: User,
    reviewer: User,
    settings: Any,
    minimum: int,
    rate: float,
    proposed: bool,
) -> None:
    """Three successes (two cases, one confirmed run) and one failure: a rate of 0.75. The
    failure also takes the lesson's confidence below the default threshold, which turns it
    outdated (``test_an_outdated_pattern_is_never_proposed``); a lower threshold keeps it
    approved, so only the proposal bar decides here."""
    settings.LESSON_CONFIDENCE_THRESHOLD = 0.3
    settings.SKILL_PROPOSAL_MIN_INCIDENTS = minimum
    settings.SKILL_PROPOSAL_MIN_SUCCESS_RATE = rate
    read_and_report(lesson, "run-ok", "resolved_by_lead", by=reviewer, reader=agent)
    read_and_report(lesson, "run-wrong", "lead_was_wrong", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    assert bool(lesson_proposals()) == proposed


def test_an_outdated_pattern_is_never_proposed(
    lesson: Lesson, agent: User, reviewer: User, settings: Any
) -> None:
    """The bar is met (three incidents at 0.75 against a bar of 0.7), but the failure took the
    lesson's confidence below the threshold it had reached: it is outdated, waiting for a
    reviewer, and an outdated pattern is not solidified into a skill."""
    settings.SKILL_PROPOSAL_MIN_INCIDENTS = 2
    settings.SKILL_PROPOSAL_MIN_SUCCESS_RATE = 0.7
    read_and_report(lesson, "run-ok", "resolved_by_lead", by=reviewer, reader=agent)
    read_and_report(lesson, "run-wrong", "lead_was_wrong", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    lesson.refresh_from_db()
    assert lesson.status == "outdated"
    assert lesson_proposals() == []


def test_no_bar_lower_than_a_skills_approval_counts(
    approved_case: Callable[..., Case], reviewer: User, second_reviewer: User, settings: Any
) -> None:
    settings.SKILL_PROPOSAL_MIN_INCIDENTS = 1
    one = approved_case(incident="INC-ONLY")
    single, _ = lesson_submit(content=parse_lesson(lesson_data([one.id])), actor=reviewer)
    lesson_approve(lesson=single, actor=second_reviewer, reason="one case")
    curation_scan(now=NOW)
    assert lesson_proposals() == []


def test_proposals_of_two_tenants_never_mix(
    lesson: Lesson,
    agent: User,
    reviewer: User,
    second_reviewer: User,
    approved_case: Callable[..., Case],
) -> None:
    read_and_report(lesson, "run-ok-t", "resolved_by_lead", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    (proposal,) = lesson_proposals()
    assert proposal.tenant == SCOPE["tenant"]
    assert all(
        case.tenant == SCOPE["tenant"] for case in Case.objects.filter(pk__in=proposal.case_ids)
    )
    # The same pattern, proven the same way, in another tenant: a proposal of its own.
    elsewhere = {**SCOPE, "tenant": OTHER}
    cases = [
        approved_case(incident=f"INC-{n}", scope=elsewhere, title=f"别家工单 {n}") for n in (1, 2)
    ]
    theirs, _ = lesson_submit(
        content=parse_lesson(lesson_data([c.id for c in cases], scope=elsewhere)), actor=reviewer
    )
    lesson_approve(lesson=theirs, actor=second_reviewer, reason="both cases show it")
    read_and_report(theirs, "run-ok-other", "resolved_by_lead", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    mine, other = sorted(lesson_proposals(), key=lambda p: p.tenant != SCOPE["tenant"])
    assert mine == proposal and other.tenant == OTHER and other.pattern == theirs.id
    assert set(other.case_ids) == {c.id for c in cases}
    assert "run:run-ok-t" not in other.incidents and "run:run-ok-other" not in mine.incidents
    limited = user_set_role(username="lena", role=Role.REVIEWER, tenants=[OTHER])
    assert list(proposal_queue(limited).filter(pattern_kind=PATTERN_LESSON)) == [other]


def test_a_proposal_is_adopted_by_one_reviewer_and_approved_only_by_another(
    lesson: Lesson, agent: User, reviewer: User, second_reviewer: User
) -> None:
    read_and_report(lesson, "run-ok-a", "resolved_by_lead", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    (proposal,) = lesson_proposals()
    skill = proposal_adopt(
        proposal=proposal,
        actor=reviewer,
        title=proposal.title,
        when=proposal.when,
        queries=["活动门店和商品范围"],
        now=NOW,
    )
    assert (skill.status, skill.submitted_by) == (Status.CANDIDATE, reviewer)
    with pytest.raises(ReviewRefused) as refused:
        skill_approve(skill=skill, actor=reviewer, reason="mine", now=NOW)
    assert "own_submission" in refused.value.unmet
    outcome = skill_approve(skill=skill, actor=second_reviewer, reason="proven", now=NOW)
    assert outcome.status == Status.APPROVED


def test_an_agents_refutations_do_not_block_a_proven_pattern(
    lesson: Lesson, agent: User, reviewer: User
) -> None:
    """As for confidence (issue 37.1), an agent's ``lead_was_wrong`` counts nothing until a
    reviewer reports the run: one token's many runs do not sink a pattern's success rate."""
    read_and_report(lesson, "run-ok-a", "resolved_by_lead", by=reviewer, reader=agent)
    for n in range(5):
        read_and_report(lesson, f"run-agent-wrong-{n}", "lead_was_wrong", by=agent, reader=agent)
    curation_scan(now=NOW)
    assert len(lesson_proposals()) == 1


def test_a_pattern_that_turned_volatile_is_not_adopted(
    lesson: Lesson, agent: User, reviewer: User
) -> None:
    read_and_report(lesson, "run-ok-v", "resolved_by_lead", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    (proposal,) = lesson_proposals()
    for n in range(2):
        read_and_report(lesson, f"run-wrong-{n}", "lead_was_wrong", by=reviewer, reader=agent)
    with pytest.raises(ValidationFailure) as refused:
        proposal_adopt(
            proposal=proposal, actor=reviewer, title="t", when="w", queries=["q"], now=NOW
        )
    assert (refused.value.field, refused.value.message) == ("proposal", NO_LONGER_PROVEN)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.OPEN
    # Its page says so and offers no Submit.
    client = Client()
    client.force_login(reviewer)
    html = client.get(proposal.get_absolute_url()).content.decode()
    assert 'id="no-longer-proven"' in html and "adopt-heading" not in html
    assert lesson.id in html


# --- the pure rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("supporting", "contradicting", "confirmed", "refuted", "minimum", "rate", "expected"),
    [
        (["A", "B"], [], ["r1"], [], 3, 0.8, True),
        (["A", "B"], [], [], [], 3, 0.8, False),
        (["A", "A"], [], ["r1"], [], 3, 0.8, False),  # two summaries of one incident count once
        (["A", "B", "C"], ["D"], [], [], 3, 0.8, False),  # 0.75
        (["A", "B", "C", "E"], ["D"], [], [], 3, 0.8, True),  # 0.8
        (["run:r1"], [], ["r1"], [], 2, 0.5, False),  # a run and its own case: one incident
        (["A"], [], ["r1"], ["r2"], 2, 0.6, True),
    ],
)
def test_a_pattern_is_proven_by_distinct_incidents_and_its_rate(
    supporting: list[str],
    contradicting: list[str],
    confirmed: list[str],
    refuted: list[str],
    minimum: int,
    rate: float,
    expected: bool,
) -> None:
    record = pattern_record(
        supporting=supporting,
        contradicting=contradicting,
        confirmed_runs=confirmed,
        refuted_runs=refuted,
    )
    assert proven(record, min_incidents=minimum, min_rate=rate) is expected


# --- the loop, end to end ------------------------------------------------------------------------


def test_a_drafted_lesson_approved_and_confirmed_becomes_a_skill_proposal(
    skill: Skill, agent: User, reviewer: User, second_reviewer: User
) -> None:
    """A finished run drafts a lesson; a reviewer approves it; later runs that read it are
    confirmed by a reviewer; the scan proposes a skill from it, citing the runs' reviewed cases."""
    run(skill, agent, "loop-1")
    first = RunDraft.objects.get(run_id="loop-1")
    approve_case(Case.objects.get(pk=first.case_id), second_reviewer)
    lesson = Lesson.objects.get(pk=first.lesson_id)
    lesson_approve(lesson=lesson, actor=second_reviewer, reason="the trace shows it")
    for run_id in ("loop-2", "loop-3"):
        run(skill, agent, run_id)
        draft = RunDraft.objects.get(run_id=run_id)
        # The same lesson learned again: proposed as a merge into the approved one (the third
        # run's draft joins the second's candidate, which proposes that merge already).
        if run_id == "loop-2":
            assert draft.lesson_merge_into == lesson.id
        else:
            assert draft.lesson_attached
        approve_case(Case.objects.get(pk=draft.case_id), second_reviewer)
        read_and_report(lesson, run_id, "resolved_by_lead", by=reviewer, reader=agent)
    curation_scan(now=NOW)
    (proposal,) = lesson_proposals()
    assert proposal.pattern == lesson.id
    assert sorted(proposal.incidents) == ["run:loop-1", "run:loop-2", "run:loop-3"]
    assert set(proposal.case_ids) == {
        RunDraft.objects.get(run_id=r).case_id for r in ("loop-1", "loop-2", "loop-3")
    }
