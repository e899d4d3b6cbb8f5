"""How run outcomes move confidence: no single account can multiply its reports.

The rule (experience/lessons/domain.py, ``counted_outcomes``; docs/contracts.md): each account is
one vote per item and direction; a confirmation counts only from a reviewer; an item in an open
conflict gains no confirmation; a new version inherits its predecessors' outcomes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases.models import Case
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons import services as lessons
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.outcome_tallies import NONE as NO_VOTES
from experience.lessons.schema import parse_lesson
from experience.retrieval.service import retrieve_experience
from experience.review import conflicts, decisions
from experience.review.outcomes import run_outcome_report
from experience.runs import records as run_records
from experience.runs.claims import run_claim
from reviewconsole import clock
from reviewconsole.roles import Role
from tests.experience.conftest import QUERY, SCOPE, approve_checked, case_data
from tests.experience.lessons.test_lessons import SCENE, lesson_data

pytestmark = pytest.mark.django_db

LESSON_QUERY = "优惠券 无法使用"


@pytest.fixture
def approved_lesson(reviewer: User, second_reviewer: User) -> Callable[..., Lesson]:
    def make(data: dict[str, Any]) -> Lesson:
        lesson, _ = lessons.lesson_submit(content=parse_lesson(data), actor=reviewer)
        decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="seen twice")
        return lesson_selectors.lesson_get(lesson.id)

    return make


def read(agent: User, run_id: str, query: str = QUERY) -> dict[str, dict[str, Any]]:
    """What retrieval returns under ``run_id``, by id (and so reads it under that run)."""
    result = retrieve_experience(query, SCOPE, clock.now(), run_id, 10, actor=agent)
    return {item["id"]: item for item in result["items"]}


def case_score(case: Case) -> ld.Confidence:
    return lesson_selectors.item_confidences([case.id], [], clock.now())[case.id]


def lesson_score(lesson: Lesson) -> ld.Confidence:
    return lesson_selectors.lesson_confidence(lesson_selectors.lesson_get(lesson.id), clock.now())


# --- the regression of issue 23.3: one token, many runs ---------------------------------------


def test_one_agent_token_cannot_lift_a_case_by_reporting_its_own_runs(
    approved_case: Callable[..., Case], agent: User
) -> None:
    case = approved_case()
    before = case_score(case)
    for n in range(20):
        assert case.id in read(agent, f"inflate-{n}")
        run_outcome_report(run_id=f"inflate-{n}", outcome="resolved_by_lead", actor=agent)
    after = case_score(case)
    assert after.value == before.value
    assert (after.inputs.confirming_outcomes, after.inputs.unconfirmed_outcomes) == (0, 1)


def conflicted_pair(
    approved_lesson: Callable[..., Lesson], approved_case: Callable[..., Case], tag: str
) -> tuple[Lesson, Lesson]:
    """Two opposed lessons on one supporting case each (Wilson lower bound 0.5 at z = 1, under
    the 0.6 threshold): retrieval returns them flagged while their conflict is open."""
    case = approved_case(incident=f"INC-{tag}", title=f"二号店优惠券无法使用 {tag}")
    failure = approved_lesson(lesson_data([case.id], precondition=f"活动规则限定了适用门店 {tag}"))
    success = approved_lesson(
        lesson_data(
            [case.id],
            lesson_type="success_pattern",
            conclusion="先让顾客刷新缓存再重试",
            precondition=f"活动规则限定了适用门店 {tag}",
        )
    )
    assert LessonConflict.objects.filter(status=ConflictStatus.OPEN).exists()
    return failure, success


def resolve_keeping(lesson: Lesson, resolver: User) -> None:
    conflict = lesson_selectors.conflicts_of(lesson).get(status=ConflictStatus.OPEN)
    conflicts.conflict_resolve(
        conflict=conflict, keep=lesson.id, action="revoke", actor=resolver, reason="复核后保留"
    )


def test_a_conflicted_lesson_below_the_threshold_stays_below_whatever_one_agent_reports(
    approved_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    agent: User,
    make_user: Callable[[str, str], User],
) -> None:
    failure, _success = conflicted_pair(approved_lesson, approved_case, "a")
    for n in range(20):
        items = read(agent, f"lift-{n}", LESSON_QUERY)
        assert items[failure.id]["conflict"] is True
        run_outcome_report(run_id=f"lift-{n}", outcome="resolved_by_lead", actor=agent)
    resolve_keeping(failure, make_user("rhea", Role.REVIEWER))
    assert lesson_score(failure).value < ld.DEFAULT_THRESHOLD
    assert failure.id not in read(agent, "probe-after", LESSON_QUERY)


# --- one vote per account --------------------------------------------------------------------


def test_a_reviewers_report_confirms_an_agents_run_and_counts_once(
    approved_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    case = approved_case()
    before = case_score(case)
    read(agent, "run-1")
    run_outcome_report(run_id="run-1", outcome="resolved_by_lead", actor=agent)
    waiting = case_score(case)
    assert waiting.value == before.value and waiting.inputs.unconfirmed_outcomes == 1
    assert "awaiting a reviewer" in waiting.why()

    confirmed = run_outcome_report(
        run_id="run-1", outcome="resolved_by_lead", actor=reviewer
    ).as_json()
    assert confirmed["counts"] is True
    once = case_score(case)
    assert once.inputs.confirming_outcomes == 1 and once.inputs.unconfirmed_outcomes == 0
    # 2 successes against 1 (Wilson at z = 1): 0.667 against 0.5.
    assert once.wilson > before.wilson

    for n in range(2, 7):
        read(agent, f"run-{n}")
        run_outcome_report(run_id=f"run-{n}", outcome="resolved_by_lead", actor=reviewer)
    assert case_score(case).wilson == once.wilson  # the same reviewer, still one vote

    read(agent, "run-7")
    run_outcome_report(run_id="run-7", outcome="resolved_by_lead", actor=second_reviewer)
    assert case_score(case).inputs.confirming_outcomes == 2


def test_refutations_count_from_reviewers_once_per_account(
    approved_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    """Symmetric with confirmations (issue 37.1): agents' refutations wait for a reviewer."""
    case = approved_case()
    before = case_score(case)
    for n, account in enumerate((agent, make_user("agent-8", Role.AGENT))):
        read(account, f"agent-bad-{n}")
        report = run_outcome_report(
            run_id=f"agent-bad-{n}", outcome="lead_was_wrong", actor=account
        ).as_json()
        assert report["counts"] is False
    waiting = case_score(case)
    assert waiting.value == before.value
    assert (waiting.inputs.refuting_outcomes, waiting.inputs.unconfirmed_refutations) == (0, 2)
    for n in range(3):
        read(agent, f"bad-{n}")
        report = run_outcome_report(
            run_id=f"bad-{n}", outcome="lead_was_wrong", actor=reviewer
        ).as_json()
        assert report["counts"] is True
    assert case_score(case).inputs.refuting_outcomes == 1
    read(agent, "bad-other")
    run_outcome_report(run_id="bad-other", outcome="lead_was_wrong", actor=second_reviewer)
    assert case_score(case).inputs.refuting_outcomes == 2


def test_unresolved_says_nothing(
    approved_case: Callable[..., Case], agent: User, reviewer: User
) -> None:
    case = approved_case()
    before = case_score(case)
    read(agent, "open")
    report = run_outcome_report(run_id="open", outcome="unresolved", actor=reviewer).as_json()
    assert report["counts"] is False
    assert case_score(case) == before


def test_only_the_latest_outcome_of_a_run_is_its_vote(
    approved_case: Callable[..., Case], agent: User, reviewer: User
) -> None:
    case = approved_case()
    read(agent, "changed")
    run_outcome_report(run_id="changed", outcome="lead_was_wrong", actor=agent)
    run_outcome_report(run_id="changed", outcome="resolved_by_lead", actor=reviewer)
    inputs = case_score(case).inputs
    assert (inputs.confirming_outcomes, inputs.refuting_outcomes) == (1, 0)


# --- conflicts and versions ------------------------------------------------------------------


def test_lessons_in_an_open_conflict_gain_nothing_until_it_is_resolved(
    approved_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    cases = [
        approved_case(incident="INC-1", title="二号店优惠券无法使用：门店范围漏配"),
        approved_case(incident="INC-2", title="二号店水果茶券不可用：门店列表缺失"),
    ]
    failure = approved_lesson(lesson_data([c.id for c in cases]))
    success = approved_lesson(
        lesson_data(
            [c.id for c in cases],
            lesson_type="success_pattern",
            conclusion="先让顾客刷新缓存再重试",
        )
    )
    conflict = LessonConflict.objects.get()
    assert conflict.status == ConflictStatus.OPEN
    before = {lesson.id: lesson_score(lesson) for lesson in (failure, success)}
    items = read(agent, "in-conflict", LESSON_QUERY)
    assert {failure.id, success.id} <= set(items)
    run_outcome_report(run_id="in-conflict", outcome="resolved_by_lead", actor=reviewer)
    for lesson in (failure, success):
        assert lesson_score(lesson).value == before[lesson.id].value
        assert lesson_score(lesson).inputs.confirming_outcomes == 0

    conflicts.conflict_resolve(
        conflict=conflict,
        keep=failure.id,
        action="revoke",
        actor=make_user("rhea", Role.REVIEWER),
        reason="刷新无效",
    )
    kept = lesson_score(failure)
    assert kept.inputs.confirming_outcomes == 1 and kept.wilson > before[failure.id].wilson


def test_a_merged_lesson_inherits_every_outcome_of_its_predecessors(
    approved_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    operator: User,
    second_reviewer: User,
    settings: Any,
) -> None:
    first = approved_case(incident="INC-1", title="二号店优惠券无法使用：门店范围漏配")
    target = approved_lesson(lesson_data([first.id]))
    # A refutation before any confirmation would leave this one-incident lesson with as many
    # counterexamples as support, which makes it outdated (tests/experience/
    # test_outdated_lessons.py), and only an approved lesson is a merge target: the confirmation
    # comes first, and the threshold is low enough that the refutation leaves it above.
    settings.LESSON_CONFIDENCE_THRESHOLD = 0.3
    for run_id, outcome, actor in (
        ("right-1", "resolved_by_lead", second_reviewer),
        ("wrong-1", "lead_was_wrong", reviewer),
    ):
        # An agent's run read the lesson (claimed by it, as retrieval claims a run id).
        run_claim(run_id=run_id, actor=agent, tenant=target.tenant, at=clock.now())
        run_records.references_record(run_id=run_id, items=[(target.id, "lesson")], at=clock.now())
        run_outcome_report(run_id=run_id, outcome=outcome, actor=actor)
    refuted = lesson_score(target)
    assert (refuted.inputs.confirming_outcomes, refuted.inputs.refuting_outcomes) == (1, 1)

    third = approved_case(incident="INC-3", title="三号店优惠券无法使用")
    candidate, _ = lessons.lesson_submit(
        content=parse_lesson(lesson_data([third.id], scene={**SCENE, "tags": ["优惠券"]})),
        actor=operator,
    )
    merged = decisions.merge_accept(
        candidate=candidate, target=target, actor=second_reviewer, reason="same lesson"
    )
    inputs = lesson_score(Lesson.objects.get(pk=merged.merged)).inputs
    assert (inputs.confirming_outcomes, inputs.refuting_outcomes) == (1, 1)
    assert inputs.supporting_incidents == 2


def test_a_superseding_case_inherits_its_predecessors_outcomes(
    submit_case: Callable[..., Case],
    approved_case: Callable[..., Case],
    agent: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    old = approved_case()
    read(agent, "old-run")
    run_outcome_report(run_id="old-run", outcome="lead_was_wrong", actor=reviewer)
    new = submit_case(
        case_data(title="二号店优惠券无法使用：门店范围漏配（补充）", supersedes=old.id)
    )
    approve_checked(new, actor=second_reviewer, reason="更完整")
    assert Case.objects.get(pk=old.id).superseded_by == new.id
    assert case_score(Case.objects.get(pk=new.id)).inputs.refuting_outcomes == 1


# --- the bound, as properties ----------------------------------------------------------------

honest = st.lists(
    st.builds(
        ld.OutcomeVote,
        account=st.integers(min_value=100, max_value=110),
        confirmed=st.booleans(),
        refuted=st.booleans(),
        reviewer=st.booleans(),
        confirmed_at=st.none(),
        refuted_as_reviewer=st.booleans(),
    ),
    max_size=12,
)


def _value(votes: list[ld.OutcomeVote], supports: int, contradicts: int, conflict: bool) -> float:
    counted = ld.counted_outcomes(votes, in_open_conflict=conflict)
    return ld.wilson_lower_bound(
        supports + counted.confirming, contradicts + counted.refuting, ld.DEFAULT_Z
    )


@given(
    honest=honest,
    supports=st.integers(min_value=0, max_value=8),
    contradicts=st.integers(min_value=0, max_value=4),
    conflict=st.booleans(),
    reports=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=200),
    reviewer=st.booleans(),
)
def test_one_account_adds_at_most_one_success_and_one_failure_whatever_it_sends(
    honest: list[ld.OutcomeVote],
    supports: int,
    contradicts: int,
    conflict: bool,
    reports: list[tuple[bool, bool]],
    reviewer: bool,
) -> None:
    adversary = [
        ld.OutcomeVote(
            account=1, confirmed=c, refuted=r, reviewer=reviewer, refuted_as_reviewer=reviewer
        )
        for c, r in reports
    ]
    before = _value(honest, supports, contradicts, conflict)
    after = _value(honest + adversary, supports, contradicts, conflict)
    if not reviewer:
        assert after == before  # an agent token never moves an item, up or down
    else:
        counted = ld.counted_outcomes(honest, in_open_conflict=conflict)
        successes = supports + counted.confirming
        failures = contradicts + counted.refuting
        step = ld.wilson_step_bound(successes, failures, ld.DEFAULT_Z)
        assert after <= before + step + 1e-12
        # ... and no lower than one more failure would put it.
        assert after >= ld.wilson_lower_bound(successes, failures + 1, ld.DEFAULT_Z) - 1e-12


_examples = itertools.count()


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests=st.integers(min_value=1, max_value=12), refute_first=st.booleans())
def test_an_adversary_with_one_token_cannot_lift_a_lesson_across_the_threshold(
    approved_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    agent: User,
    make_user: Callable[[str, str], User],
    requests: int,
    refute_first: bool,
) -> None:
    # Fresh items per example: the database keeps what earlier examples made.
    tag = f"p{next(_examples)}"
    failure, _success = conflicted_pair(approved_lesson, approved_case, tag)
    for n in range(requests):
        run_id = f"adv-{tag}-{n}"
        read(agent, run_id, LESSON_QUERY)
        outcome = "lead_was_wrong" if refute_first and n == 0 else "resolved_by_lead"
        run_outcome_report(run_id=run_id, outcome=outcome, actor=agent)
    resolve_keeping(failure, make_user(f"rhea-{tag}", Role.REVIEWER))
    assert lesson_score(failure).value < ld.DEFAULT_THRESHOLD
    assert failure.id not in read(agent, f"probe-{tag}", LESSON_QUERY)


def test_the_case_page_shows_an_agents_confirmation_as_awaiting_a_reviewer(
    approved_case: Callable[..., Case], agent: User, reviewer: User, client: Any
) -> None:
    case = approved_case()
    read(agent, "shown")
    run_outcome_report(run_id="shown", outcome="resolved_by_lead", actor=agent)
    client.force_login(reviewer)
    page = client.get(case.get_absolute_url()).content.decode()
    assert "1 agent&#x27;s confirmation waits for a reviewer and does not count yet." in page
    run_outcome_report(run_id="shown", outcome="resolved_by_lead", actor=reviewer)
    page = client.get(case.get_absolute_url()).content.decode()
    assert "waits for a reviewer" not in page and "confirmed by 1 reviewer" in page


@pytest.mark.parametrize("in_open_conflict", [False, True])
def test_an_item_without_votes_counts_what_no_votes_count(in_open_conflict: bool) -> None:
    """``Tally.counted`` answers an item without votes (most items) without folding them."""
    counted = NO_VOTES.counted(in_open_conflict=in_open_conflict)
    assert counted == ld.counted_outcomes([], in_open_conflict=in_open_conflict)
