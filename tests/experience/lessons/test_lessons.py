"""Lessons: import, review, confidence, availability, retrieval, conflicts and merges."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from experience.cases import services
from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import domain as ld
from experience.lessons import selectors as lesson_selectors
from experience.lessons import services as lessons
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.schema import parse_lesson
from experience.retrieval.service import retrieve_experience
from experience.review import conflicts, decisions, lesson_conflicts, revocation
from experience.review import imports as review_imports
from experience.runs.models import RevocationImpact
from reviewconsole import clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from tests.experience.conftest import NOW, SCOPE, VALID_FROM, VALID_TO, approve_checked, case_data

pytestmark = pytest.mark.django_db

SCENE = {"tags": ["优惠券", "小程序"], "description": "小程序优惠券无法使用"}


def lesson_data(supports: list[str], **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "lesson",
        "lesson_type": "failure_lesson",
        "scope": dict(SCOPE),
        "scene": dict(SCENE),
        "precondition": "活动规则限定了适用门店",
        "conclusion": "不要先让顾客刷新缓存；先核对活动适用门店",
        "supports": supports,
        "valid_from": VALID_FROM,
        "valid_to": VALID_TO,
    }
    data.update(changes)
    return data


@pytest.fixture
def two_cases(approved_case: Callable[..., Case]) -> list[Case]:
    return [
        approved_case(incident="INC-1", title="二号店优惠券无法使用：门店范围漏配"),
        approved_case(incident="INC-2", title="二号店水果茶券不可用：门店列表缺失"),
    ]


@pytest.fixture
def submit_lesson(reviewer: User) -> Callable[..., Lesson]:
    def submit(data: dict[str, Any], *, actor: User | None = None) -> Lesson:
        lesson, _ = lessons.lesson_submit(content=parse_lesson(data), actor=actor or reviewer)
        return lesson

    return submit


@pytest.fixture
def approved_lesson(
    submit_lesson: Callable[..., Lesson], second_reviewer: User
) -> Callable[..., Lesson]:
    def make(data: dict[str, Any]) -> Lesson:
        lesson = submit_lesson(data)
        decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="two incidents")
        return lesson_selectors.lesson_get(lesson.id)

    return make


def recall(agent: User, query: str = "优惠券 无法使用", **kw: Any) -> list[dict[str, Any]]:
    result = retrieve_experience(query, SCOPE, kw.pop("now", clock.now()), "run-l", 10, actor=agent)
    items: list[dict[str, Any]] = result["items"]
    return items


# --- import -----------------------------------------------------------------------------------


def test_import_accepts_lessons_citing_cases_of_the_same_file(
    tmp_path: Path, reviewer: User, at_now: object
) -> None:
    items = [case_data(), lesson_data(["#0"], contradicts=[])]
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    out = StringIO()
    call_command("import_cases", str(path), "--as", reviewer.username, "--json", stdout=out)
    result = json.loads(out.getvalue())["items"]
    assert [item["type"] for item in result] == ["case", "lesson"]
    lesson = Lesson.objects.get()
    assert result[1]["id"] == lesson.id == f"lesson:{lesson.content_hash}"
    assert [c.id for c in lesson_selectors.lesson_evidence(lesson).supports] == [result[0]["id"]]
    assert Event.objects.filter(action=Action.LESSON_SUBMIT, target=lesson.id).count() == 1
    # Identical content is a no-op.
    out = StringIO()
    call_command("import_cases", str(path), "--as", reviewer.username, "--json", stdout=out)
    assert [i["created"] for i in json.loads(out.getvalue())["items"]] == [False, False]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lesson_type": "hunch"}, "[1].lesson_type"),
        ({"scene": {"tags": [], "description": ""}}, "[1].scene.description"),
        ({"supports": []}, "[1].supports"),
        ({"supports": ["#5"]}, "[1].supports[0]"),
        ({"supports": ["#0"], "contradicts": ["#0"]}, "[1].contradicts[0]"),
        ({"confidence": 0.9}, "[1].confidence"),
        ({"scope": {**SCOPE, "store": "any"}}, "[1].scope.store"),
    ],
)
def test_a_bad_lesson_is_refused_naming_the_field_and_nothing_is_stored(
    reviewer: User, at_now: object, change: dict[str, Any], field: str
) -> None:
    items = [case_data(), {**lesson_data(["#0"]), **change}]
    with pytest.raises(ValidationFailure) as failure:
        review_imports.items_import(items=items, actor=reviewer)
    assert failure.value.field == field
    assert not Case.objects.exists() and not Lesson.objects.exists()


def test_a_case_of_another_tenant_is_not_citable(
    submit_lesson: Callable[..., Lesson], reviewer: User, at_now: object
) -> None:
    other, _ = services.case_submit(
        content=parse_case(case_data(scope={**SCOPE, "tenant": "other"})), actor=reviewer
    )
    with pytest.raises(ValidationFailure) as failure:
        submit_lesson(lesson_data([other.id]))
    assert failure.value.field == "supports[0]"


def test_submitting_needs_the_lesson_permission(agent: User, at_now: object) -> None:
    with pytest.raises(PermissionRefused):
        lessons.lesson_submit(content=parse_lesson(lesson_data(["case:" + "0" * 64])), actor=agent)


# --- review -----------------------------------------------------------------------------------


def test_approval_follows_four_eyes_reason_and_a_supporting_case(
    submit_lesson: Callable[..., Lesson],
    submit_case: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
) -> None:
    candidate_case = submit_case()
    lesson = submit_lesson(lesson_data([candidate_case.id]))
    with pytest.raises(ReviewRefused) as refusal:
        decisions.lesson_approve(lesson=lesson, actor=reviewer, reason="")
    assert refusal.value.unmet == [
        domain.REASON_REQUIRED,
        domain.OWN_SUBMISSION,
        ld.NO_SUPPORTING_CASE,
    ]
    assert Lesson.objects.get().status == Status.CANDIDATE
    approve_checked(candidate_case, actor=second_reviewer)
    outcome = decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="backed")
    assert outcome.status == Status.APPROVED
    assert Event.objects.filter(action=Action.LESSON_APPROVE, target=lesson.id).count() == 1


def test_review_command_approves_rejects_and_revokes_lessons(
    submit_lesson: Callable[..., Lesson], two_cases: list[Case], second_reviewer: User
) -> None:
    lesson = submit_lesson(lesson_data([c.id for c in two_cases]))
    other = submit_lesson(lesson_data([two_cases[0].id], conclusion="另一个结论"))

    def review(*args: str) -> dict[str, Any]:
        out = StringIO()
        call_command("review", *args, "--as", second_reviewer.username, "--json", stdout=out)
        answer: dict[str, Any] = json.loads(out.getvalue())
        return answer

    assert review("approve", lesson.id, "--reason", "ok")["status"] == "approved"
    assert review("reject", other.id, "--reason", "duplicate")["status"] == "rejected"
    preview = review("revoke", lesson.id, "--reason", "wrong", "--preview")
    assert preview["preview"] is True and preview["status"] == "approved"
    assert review("revoke", lesson.id, "--reason", "wrong")["status"] == "revoked"
    assert RevocationImpact.objects.filter(item_id=lesson.id, item_type="lesson").exists()


def test_revoking_every_supporting_case_makes_the_lesson_unavailable_and_is_in_the_impact(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], second_reviewer: User
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    first = revocation.case_revoke(case=two_cases[0], actor=second_reviewer, reason="wrong")
    assert "lessons" not in first.impact.as_json()  # the second case still supports it
    assert lesson_selectors.lesson_availability(lesson, clock.now())
    last = revocation.case_revoke(case=two_cases[1], actor=second_reviewer, reason="wrong")
    assert last.impact.lessons == [lesson.id]
    assert RevocationImpact.objects.get(item_id=two_cases[1].id).lessons == [lesson.id]
    assert not lesson_selectors.lesson_availability(lesson, clock.now())


# --- confidence and retrieval -----------------------------------------------------------------


def test_confidence_drops_when_a_counterexample_is_cited_and_approved(
    approved_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    two_cases: list[Case],
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    before = lesson_selectors.lesson_confidence(lesson, clock.now())
    assert before.inputs.supporting_incidents == 2
    assert before.value == pytest.approx(0.667)
    counter = approved_case(incident="INC-3", title="二号店优惠券：门店已配置，仍失败")
    newer = approved_lesson(
        lesson_data([c.id for c in two_cases], contradicts=[counter.id], supersedes=lesson.id)
    )
    after = lesson_selectors.lesson_confidence(newer, clock.now())
    assert after.inputs.contradicting_incidents == 1
    assert after.value < before.value
    assert Lesson.objects.get(pk=lesson.id).status == Status.SUPERSEDED


def test_confidence_decays_with_the_configured_half_life(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case]
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    later = clock.now() + timedelta(days=30)
    with override_settings(LESSON_HALF_LIFE_DAYS=30):
        score = lesson_selectors.lesson_confidence(lesson, later)
    assert score.decay == 0.5 and score.value == pytest.approx(0.333, abs=0.001)


def test_recall_returns_lessons_with_type_conclusion_confidence_and_why(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], agent: User
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    items = {item["id"]: item for item in recall(agent)}
    item = items[lesson.id]
    assert item["type"] == "lesson" and item["lesson_type"] == "failure_lesson"
    assert item["conclusion"] == lesson.conclusion
    assert item["confidence"] == pytest.approx(0.667) and item["conflict"] is False
    assert "2 supporting incident(s)" in item["why"]
    # Cases carry a confidence too (one incident each).
    assert items[two_cases[0].id]["confidence"] == pytest.approx(0.5)


def test_the_api_result_shape_carries_lessons(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], agent: User
) -> None:
    from agentapi.schemas import ExperienceRetrieveResult

    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    result = retrieve_experience("优惠券 无法使用", SCOPE, clock.now(), "run-api", 10, actor=agent)
    shaped = ExperienceRetrieveResult.model_validate(result).model_dump()
    (item,) = [i for i in shaped["items"] if i["id"] == lesson.id]
    assert (item["type"], item["lesson_type"], item["conflict"]) == (
        "lesson",
        "failure_lesson",
        False,
    )


def test_lessons_below_the_threshold_are_left_out(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], agent: User
) -> None:
    weak = approved_lesson(lesson_data([two_cases[0].id]))  # one incident: 0.5
    assert weak.id not in [item["id"] for item in recall(agent)]
    with override_settings(LESSON_CONFIDENCE_THRESHOLD=0.4):
        assert weak.id in [item["id"] for item in recall(agent)]


def test_a_decayed_lesson_drops_out_of_recall(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], agent: User
) -> None:
    lesson = approved_lesson(lesson_data([c.id for c in two_cases]))
    later = clock.now() + timedelta(days=200)
    assert lesson.id not in [item["id"] for item in recall(agent, now=later)]


# --- conflicts --------------------------------------------------------------------------------


def test_done_when_a_conflict_is_flagged_until_a_reviewer_resolves_it(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    agent: User,
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    success = approved_lesson(
        lesson_data(
            [c.id for c in two_cases],
            lesson_type="success_pattern",
            conclusion="先让顾客刷新缓存再重试",
        )
    )
    conflict = LessonConflict.objects.get()
    assert conflict.status == ConflictStatus.OPEN and conflict.found_by == ld.TYPE_OPPOSITION
    assert {conflict.lesson_a_id, conflict.lesson_b_id} == {failure.id, success.id}
    assert conflict.detected_on == "approval"
    items = {item["id"]: item for item in recall(agent)}
    assert items[failure.id]["conflict"] is True and items[success.id]["conflict"] is True

    third = make_user("rhea", "reviewer")
    with pytest.raises(ReviewRefused) as refusal:
        conflicts.conflict_resolve(
            conflict=conflict, keep=failure.id, action="revoke", actor=third, reason=""
        )
    assert refusal.value.unmet == [domain.REASON_REQUIRED]
    result = conflicts.conflict_resolve(
        conflict=conflict, keep=failure.id, action="revoke", actor=third, reason="刷新无效"
    )
    assert (result.status, result.kept) == (ConflictStatus.RESOLVED, failure.id)
    assert Lesson.objects.get(pk=success.id).status == Status.REVOKED
    items = {item["id"]: item for item in recall(agent)}
    assert success.id not in items and items[failure.id]["conflict"] is False
    assert Event.objects.filter(action=Action.LESSON_CONFLICT_RESOLVE).exists()


def test_narrowing_keeps_the_conflict_open_until_the_new_version_is_approved(
    approved_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    second_reviewer: User,
    make_user: Callable[[str, str], User],
) -> None:
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    success = approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    conflict = LessonConflict.objects.get()
    third = make_user("rhea", "reviewer")
    result = conflicts.conflict_resolve(
        conflict=conflict,
        keep=failure.id,
        action="narrow",
        actor=third,
        reason="只在服务端缓存过期时成立",
        precondition="服务端缓存已过期",
        tags=["服务端缓存"],
    )
    narrowed = Lesson.objects.get(pk=result.narrowed)
    assert narrowed.supersedes == success.id and narrowed.status == Status.CANDIDATE
    assert LessonConflict.objects.get(pk=conflict.pk).status == ConflictStatus.OPEN
    decisions.lesson_approve(lesson=narrowed, actor=second_reviewer, reason="narrowed")
    closed = LessonConflict.objects.get(pk=conflict.pk)
    assert (closed.status, closed.resolution) == (ConflictStatus.RESOLVED, "narrowed")
    assert Lesson.objects.get(pk=success.id).status == Status.SUPERSEDED


def test_a_new_version_of_a_conflicted_lesson_waits_for_the_conflict(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    second_reviewer: User,
) -> None:
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    version = submit_lesson(lesson_data([two_cases[0].id], supersedes=failure.id))
    with pytest.raises(ReviewRefused) as refusal:
        decisions.lesson_approve(lesson=version, actor=second_reviewer, reason="update")
    assert refusal.value.unmet == [ld.CONFLICT_UNRESOLVED]


def test_the_curation_scan_finds_conflicts_approval_did_not_record(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], second_reviewer: User
) -> None:
    first = approved_lesson(lesson_data([c.id for c in two_cases]))
    second = approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    LessonConflict.objects.all().delete()
    found = lesson_conflicts.conflicts_scan(actor=second_reviewer, now=clock.now())
    assert [(c.lesson_a_id, c.lesson_b_id) for c in found] == [tuple(sorted((first.id, second.id)))]
    assert found[0].detected_on == "scan"
    assert lesson_conflicts.conflicts_scan(actor=second_reviewer, now=clock.now()) == []


def test_curate_reports_lesson_conflicts(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case]
) -> None:
    approved_lesson(lesson_data([c.id for c in two_cases]))
    approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    LessonConflict.objects.all().delete()
    out = StringIO()
    call_command("curate", "--json", stdout=out)
    (found,) = json.loads(out.getvalue())["lesson_conflicts"]
    assert found["found_by"] == ld.TYPE_OPPOSITION
    assert LessonConflict.objects.get().detected_on == "scan"


def test_resolving_needs_the_permission(
    approved_lesson: Callable[..., Lesson], two_cases: list[Case], operator: User
) -> None:
    failure = approved_lesson(lesson_data([c.id for c in two_cases]))
    approved_lesson(
        lesson_data([c.id for c in two_cases], lesson_type="success_pattern", conclusion="刷新")
    )
    with pytest.raises(PermissionRefused):
        conflicts.conflict_resolve(
            conflict=LessonConflict.objects.get(),
            keep=failure.id,
            action="revoke",
            actor=operator,
            reason="x",
        )


# --- merges -----------------------------------------------------------------------------------


def test_accepting_a_merge_makes_a_new_version_with_both_cases_evidence(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    two_cases: list[Case],
    operator: User,
    second_reviewer: User,
) -> None:
    target = approved_lesson(lesson_data([two_cases[0].id]))
    third = approved_case(incident="INC-3", title="三号店优惠券无法使用")
    candidate = submit_lesson(
        lesson_data([third.id], scene={**SCENE, "tags": ["优惠券"]}), actor=operator
    )
    proposals = lesson_selectors.merge_proposals(candidate)
    assert [p.target for p in proposals] == [target.id]
    outcome = decisions.merge_accept(
        candidate=candidate, target=target, actor=second_reviewer, reason="same lesson"
    )
    merged = Lesson.objects.get(pk=outcome.merged)
    assert merged.status == Status.APPROVED and merged.supersedes == target.id
    assert merged.content_hash != target.content_hash
    assert sorted(c.id for c in lesson_selectors.lesson_evidence(merged).supports) == sorted(
        [two_cases[0].id, third.id]
    )
    assert Lesson.objects.get(pk=target.id).status == Status.SUPERSEDED
    assert Lesson.objects.get(pk=candidate.id).status == Status.SUPERSEDED
    assert lesson_selectors.lesson_confidence(merged, clock.now()).inputs.supporting_incidents == 2
    assert Event.objects.filter(action=Action.LESSON_MERGE, target=merged.id).count() == 1


def test_a_merge_by_the_candidates_submitter_is_refused(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    two_cases: list[Case],
    second_reviewer: User,
) -> None:
    target = approved_lesson(lesson_data([two_cases[0].id]))
    candidate = submit_lesson(lesson_data([two_cases[1].id]), actor=second_reviewer)
    with pytest.raises(ReviewRefused) as refusal:
        decisions.merge_accept(
            candidate=candidate, target=target, actor=second_reviewer, reason="x"
        )
    assert domain.OWN_SUBMISSION in refusal.value.unmet
    assert Lesson.objects.get(pk=target.id).status == Status.APPROVED


def test_accepting_a_merge_of_a_candidate_another_reviewer_claimed_needs_a_take_over(
    approved_lesson: Callable[..., Lesson],
    submit_lesson: Callable[..., Lesson],
    approved_case: Callable[..., Case],
    two_cases: list[Case],
    operator: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    from reviewconsole import claims
    from reviewconsole.models import ReviewClaim

    target = approved_lesson(lesson_data([two_cases[0].id]))
    third = approved_case(incident="INC-3", title="三号店优惠券无法使用")
    candidate = submit_lesson(
        lesson_data([third.id], scene={**SCENE, "tags": ["优惠券"]}), actor=operator
    )
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant=candidate.tenant)
    with pytest.raises(ReviewRefused) as refusal:
        decisions.merge_accept(
            candidate=candidate, target=target, actor=second_reviewer, reason="same lesson"
        )
    assert refusal.value.unmet == [claims.CLAIMED_BY_OTHER]
    assert Lesson.objects.get(pk=candidate.id).status == Status.CANDIDATE
    decisions.merge_accept(
        candidate=candidate,
        target=target,
        actor=second_reviewer,
        reason="same lesson",
        take_over=True,
    )
    assert Lesson.objects.get(pk=candidate.id).status == Status.SUPERSEDED
    assert not ReviewClaim.objects.exists()
    taken = Event.objects.get(action=Action.CLAIM_TAKE_OVER, target=candidate.id)
    assert taken.details["holder"] == reviewer.username


def test_frozen_now_is_used(at_now: object) -> None:
    assert clock.now() == NOW
