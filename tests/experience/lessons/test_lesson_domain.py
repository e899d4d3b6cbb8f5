"""Lessons' pure rules: the confidence estimator, approval, availability, conflicts and merges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experience.core import availability, domain
from experience.core.availability import CitedCase, GateFields, lesson_availability
from experience.core.domain import Reviewer
from experience.lessons import domain as ld

NOW = datetime(2026, 10, 1, tzinfo=UTC)
SCOPE = {"tenant": "t", "brand": "b", "store": "s", "campaign": "c", "deployment": "d"}


def cited(
    incident: str, *, status: str = "approved", scope: dict[str, str] | None = None
) -> CitedCase:
    return CitedCase(
        case_id=f"case:{incident}",
        status=status,
        scope=scope or SCOPE,
        incident=incident,
        valid_from=NOW - timedelta(days=30),
        valid_to=NOW + timedelta(days=30),
    )


# --- confidence ------------------------------------------------------------------------------


def test_wilson_lower_bound_by_hand() -> None:
    # z = 1: n successes of n give n / (n + 1); no evidence gives 0.
    assert ld.wilson_lower_bound(0, 0, 1.0) == 0.0
    assert ld.wilson_lower_bound(1, 0, 1.0) == pytest.approx(0.5)
    assert ld.wilson_lower_bound(2, 0, 1.0) == pytest.approx(2 / 3)
    # 2 of 3: (2/3 + 1/6 - sqrt(2/27 + 1/36)) / (4/3)
    expected = (2 / 3 + 1 / 6 - (2 / 27 + 1 / 36) ** 0.5) / (4 / 3)
    assert ld.wilson_lower_bound(2, 1, 1.0) == pytest.approx(expected)


def test_decay_halves_every_half_life() -> None:
    assert ld.decay_factor(NOW, NOW, 180) == 1.0
    assert ld.decay_factor(NOW - timedelta(days=180), NOW, 180) == pytest.approx(0.5)
    assert ld.decay_factor(NOW - timedelta(days=360), NOW, 180) == pytest.approx(0.25)
    assert ld.decay_factor(None, NOW, 180) == 1.0


def test_confidence_shows_its_inputs() -> None:
    inputs = ld.ConfidenceInputs(2, 0, last_confirmed=NOW - timedelta(days=180))
    score = ld.confidence(inputs, now=NOW, z=1.0, half_life_days=180)
    assert score.value == pytest.approx(round(2 / 3 * 0.5, 3))
    shown = score.as_json()
    assert shown["supporting_incidents"] == 2 and shown["contradicting_incidents"] == 0
    assert shown["decay"] == 0.5 and shown["half_life_days"] == 180
    assert "2 supporting incident(s)" in score.why()


counts = st.integers(min_value=0, max_value=60)
days = st.floats(min_value=0, max_value=2000, allow_nan=False)


@given(counts, counts, counts, counts, days, st.sampled_from([0.5, 1.0, 1.96, 2.58]))
def test_a_contradicting_incident_never_raises_confidence(
    support: int, contra: int, good: int, bad: int, age: float, z: float
) -> None:
    last = NOW - timedelta(days=age)
    before = ld.confidence(ld.ConfidenceInputs(support, contra, good, bad, last), now=NOW, z=z)
    after = ld.confidence(ld.ConfidenceInputs(support, contra + 1, good, bad, last), now=NOW, z=z)
    assert after.value <= before.value


@given(counts, counts, counts, counts, days, st.sampled_from([0.5, 1.0, 1.96, 2.58]))
def test_a_supporting_incident_never_lowers_confidence(
    support: int, contra: int, good: int, bad: int, age: float, z: float
) -> None:
    last = NOW - timedelta(days=age)
    before = ld.confidence(ld.ConfidenceInputs(support, contra, good, bad, last), now=NOW, z=z)
    # A new supporting case is confirmed no earlier than the last confirmation.
    after = ld.confidence(ld.ConfidenceInputs(support + 1, contra, good, bad, last), now=NOW, z=z)
    assert after.value >= before.value
    assert 0.0 <= after.value <= 1.0


MOMENTS = st.integers(min_value=-400, max_value=400).map(lambda h: NOW + timedelta(hours=h))
STATUSES = st.sampled_from(["candidate", "approved", "rejected", "revoked", "superseded"])


@st.composite
def counted_outcomes(draw: st.DrawFn) -> ld.CountedOutcomes:
    votes = draw(
        st.lists(
            st.builds(
                ld.OutcomeVote,
                account=st.integers(1, 4),
                confirmed=st.booleans(),
                refuted=st.booleans(),
                reviewer=st.booleans(),
                confirmed_at=st.none() | MOMENTS,
            ),
            max_size=6,
        )
    )
    return ld.counted_outcomes(votes, in_open_conflict=False)


@given(
    status=STATUSES,
    valid_from=MOMENTS,
    hours=st.integers(min_value=1, max_value=500),
    approved_at=st.none() | MOMENTS,
    outcomes=counted_outcomes(),
    now=MOMENTS,
    z=st.sampled_from([0.5, 1.0, 1.96]),
    half_life=st.sampled_from([0.0, 30.0, 180.0]),
)
def test_a_cases_confidence_is_the_estimator_over_the_case_alone(
    status: str,
    valid_from: datetime,
    hours: int,
    approved_at: datetime | None,
    outcomes: ld.CountedOutcomes,
    now: datetime,
    z: float,
    half_life: float,
) -> None:
    """``case_confidence`` (retrieval and the context block score cases with it) is the
    definition: the estimator over the evidence inputs of the case as its own one supporting
    case, its approval the one approval."""
    valid_to = valid_from + timedelta(hours=hours)
    case = CitedCase("case:1", status, SCOPE, "case:1", valid_from, valid_to)
    inputs = ld.evidence_inputs([case], [], approvals=[approved_at], now=now, outcomes=outcomes)
    expected = ld.confidence(inputs, now=now, z=z, half_life_days=half_life)
    usable = availability.case_usable_values(
        status=status, valid_from=valid_from, valid_to=valid_to, now=now
    )
    assert usable == availability.case_usable(case, now)
    found = ld.case_confidence(
        usable=usable,
        approved_at=approved_at,
        now=now,
        outcomes=outcomes,
        z=z,
        half_life_days=half_life,
    )
    assert found == expected
    # The same datetime object is kept as the last confirmation (as_json shows its offset).
    assert found.inputs.last_confirmed is expected.inputs.last_confirmed


def test_the_latest_confirmation_is_the_first_latest_as_max_picks_it() -> None:
    at = NOW - timedelta(days=2)
    same_instant = at.astimezone(timezone(timedelta(hours=8)))
    outcomes = ld.CountedOutcomes(confirming=1, last_confirmed=same_instant)
    found = ld.case_confidence(usable=True, approved_at=at, now=NOW, outcomes=outcomes)
    assert found.inputs.last_confirmed is at
    assert ld.confidence(ld.ConfidenceInputs(1, 0), now=NOW).decay == 1.0


def test_distinct_incidents_count_once_and_only_usable_cases() -> None:
    supports = [cited("INC-1"), cited("INC-1"), cited("INC-2"), cited("INC-3", status="revoked")]
    inputs = ld.evidence_inputs(supports, [cited("INC-9")], approvals=[NOW], now=NOW)
    assert (inputs.supporting_incidents, inputs.contradicting_incidents) == (2, 1)


# --- approval and availability ----------------------------------------------------------------


def facts(**changes: object) -> ld.LessonFacts:
    base: dict[str, object] = {
        "status": "candidate",
        "submitted_by": 1,
        "scope": SCOPE,
        "valid_to": NOW + timedelta(days=1),
        "supports": (cited("INC-1"),),
        "contradicts": (),
    }
    base.update(changes)
    return ld.LessonFacts(**base)  # type: ignore[arg-type]


def test_approval_needs_a_usable_supporting_case_of_the_scope() -> None:
    reviewer = Reviewer(user_id=2, can_review=True)
    assert ld.lesson_approval_unmet(facts(), reviewer=reviewer, reason="ok", now=NOW) == []
    revoked = facts(supports=(cited("INC-1", status="revoked"),))
    assert ld.lesson_approval_unmet(revoked, reviewer=reviewer, reason="ok", now=NOW) == [
        ld.NO_SUPPORTING_CASE
    ]
    other = facts(supports=(cited("INC-1", scope={**SCOPE, "store": "x"}),))
    assert ld.lesson_approval_unmet(other, reviewer=reviewer, reason="ok", now=NOW) == [
        ld.NO_SUPPORTING_CASE,
        domain.SCOPE_MISMATCH,
    ]


def test_approval_names_every_unmet_condition_at_once() -> None:
    own = Reviewer(user_id=1, can_review=False)
    unmet = ld.lesson_approval_unmet(
        facts(status="approved", supports=(), replaces_conflicted=True),
        reviewer=own,
        reason=" ",
        now=NOW,
    )
    assert unmet == [
        domain.NOT_REVIEWER,
        domain.REASON_REQUIRED,
        domain.NOT_CANDIDATE,
        domain.OWN_SUBMISSION,
        ld.NO_SUPPORTING_CASE,
        ld.CONFLICT_UNRESOLVED,
    ]


def test_unavailable_when_every_supporting_case_is_gone() -> None:
    gate = GateFields("approved", SCOPE, NOW - timedelta(days=1), NOW + timedelta(days=1), NOW)
    assert lesson_availability(gate, [cited("INC-1"), cited("INC-2", status="revoked")], NOW)
    gone = lesson_availability(gate, [cited("INC-2", status="revoked")], NOW)
    assert not gone and "supporting" in gone.reason


# --- conflicts and merges ---------------------------------------------------------------------


def shape(lesson_id: str, lesson_type: str, tags: set[str], **changes: object) -> ld.LessonShape:
    base: dict[str, object] = {
        "id": lesson_id,
        "lesson_type": lesson_type,
        "scope": SCOPE,
        "tags": frozenset(tags),
        "description": "小程序优惠券无法使用",
        "conclusion": "先核对活动适用门店",
        "supports": frozenset(),
        "contradicts": frozenset(),
    }
    base.update(changes)
    return ld.LessonShape(**base)  # type: ignore[arg-type]


def test_success_pattern_and_failure_lesson_of_one_scene_conflict() -> None:
    a = shape("lesson:a", ld.SUCCESS_PATTERN, {"coupon", "miniapp"})
    b = shape("lesson:b", ld.FAILURE_LESSON, {"coupon", "miniapp"}, description="别的描述")
    assert ld.conflict_reason(a, b) == ld.TYPE_OPPOSITION


def test_no_conflict_across_scopes_scenes_or_same_types() -> None:
    a = shape("lesson:a", ld.SUCCESS_PATTERN, {"coupon"})
    elsewhere = shape("lesson:b", ld.FAILURE_LESSON, {"coupon"}, scope={**SCOPE, "store": "x"})
    other_scene = shape("lesson:c", ld.FAILURE_LESSON, {"refund"}, description="退款到账延迟")
    same_type = shape("lesson:d", ld.SUCCESS_PATTERN, {"coupon"})
    assert [ld.conflict_reason(a, b) for b in (elsewhere, other_scene, same_type)] == [None] * 3


def test_an_explicit_link_is_a_conflict_whatever_the_types() -> None:
    a = shape("lesson:a", ld.TOOL_USAGE, {"x"}, supports=frozenset({"case:1"}))
    b = shape(
        "lesson:b",
        ld.DOMAIN_KNOWLEDGE,
        {"y"},
        description="无关",
        contradicts=frozenset({"case:1"}),
    )
    assert ld.conflict_reason(a, b) == ld.EXPLICIT_LINK


def test_merge_needs_same_type_scope_and_near_duplicate_text() -> None:
    approved = shape("lesson:a", ld.FAILURE_LESSON, {"coupon"})
    near = shape("lesson:b", ld.FAILURE_LESSON, {"coupon"})
    assert ld.is_merge_candidate(near, approved)
    assert not ld.is_merge_candidate(shape("lesson:c", ld.SUCCESS_PATTERN, {"coupon"}), approved)
    assert not ld.is_merge_candidate(
        shape("lesson:d", ld.FAILURE_LESSON, {"refund"}, description="退款", conclusion="等待"),
        approved,
    )
