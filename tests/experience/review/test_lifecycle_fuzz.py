"""Stateful fuzzing of the case, skill and lesson lifecycle (hypothesis RuleBasedStateMachine).

Whatever sequence of submissions, checks, approvals, rejections, revocations and conflict
resolutions happens:
- no approved case lacks a checked diagnosis evidence item or a counterevidence entry with evidence;
- retrieval never returns a revoked, rejected or candidate item;
- a skill is never available while one of its cited cases is unavailable;
- retrieval returns a lesson only while a supporting case is usable, and only at or above the
  confidence threshold or flagged as in an open conflict; an item is flagged exactly when it is;
- every pair of approved lessons that conflicts has a conflict record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from experience.cases import selectors, services
from experience.cases.models import Case, EvidenceCheck, Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import domain as lesson_domain
from experience.lessons import selectors as lesson_selectors
from experience.lessons import services as lessons
from experience.lessons.models import Lesson, LessonConflict
from experience.lessons.schema import parse_lesson
from experience.retrieval.service import retrieve_experience
from experience.review import conflicts, decisions, revocation
from experience.review import revocation as revocation_
from reviewconsole.errors import PermissionRefused, ValidationFailure
from tests.experience.conftest import NOW, SCOPE, case_data, skill_data, without_verified

REFUSALS: tuple[type[Exception], ...] = (ReviewRefused, ValidationFailure, PermissionRefused)


def build_machine(submitter: User, approver: User, agent: User) -> type[RuleBasedStateMachine]:
    class Lifecycle(RuleBasedStateMachine):
        cases = Bundle("cases")
        skills = Bundle("skills")
        lesson_ids = Bundle("lessons")

        def __init__(self) -> None:
            super().__init__()
            self.savepoint = transaction.savepoint()
            self.serial = 0

        def teardown(self) -> None:
            transaction.savepoint_rollback(self.savepoint)

        @rule(
            target=cases,
            verified=st.booleans(),
            with_counterevidence=st.booleans(),
            incident=st.sampled_from(["INC-1", "INC-2", "INC-3"]),
        )
        def submit_case(self, verified: bool, with_counterevidence: bool, incident: str) -> str:
            self.serial += 1
            data = case_data(incident=incident, title=f"优惠券无法使用 {self.serial}")
            if not verified:
                data = without_verified(data)
            if not with_counterevidence:
                data["counterevidence"] = []
            case, _ = services.case_submit(content=parse_case(data), actor=submitter)
            return case.id

        @rule(case_id=cases)
        def check_diagnosis(self, case_id: str) -> None:
            services.evidence_check(
                case=selectors.case_get(case_id), key="diagnosis/0", actor=approver
            )

        @rule(case_id=cases, own=st.booleans())
        def approve_case(self, case_id: str, own: bool) -> None:
            with contextlib.suppress(*REFUSALS):
                decisions.case_approve(
                    case=selectors.case_get(case_id),
                    actor=submitter if own else approver,
                    reason="fuzz",
                )

        @rule(case_id=cases)
        def reject_case(self, case_id: str) -> None:
            with contextlib.suppress(*REFUSALS):
                decisions.case_reject(case=selectors.case_get(case_id), actor=approver, reason="no")

        @rule(case_id=cases)
        def revoke_case(self, case_id: str) -> None:
            with contextlib.suppress(*REFUSALS):
                revocation.case_revoke(case=selectors.case_get(case_id), actor=approver, reason="x")

        @rule(target=skills, first=cases, second=cases)
        def submit_skill(self, first: str, second: str) -> str:
            self.serial += 1
            data = skill_data(sorted({first, second}), title=f"核对适用条件 {self.serial}")
            try:
                skill, _ = services.skill_submit(
                    content=parse_skill(data, tool_specs()), actor=submitter
                )
            except REFUSALS:
                return ""
            return skill.id

        @rule(skill_id=skills)
        def approve_skill(self, skill_id: str) -> None:
            if skill_id:
                with contextlib.suppress(*REFUSALS):
                    decisions.skill_approve(
                        skill=selectors.skill_get(skill_id), actor=approver, reason="ok"
                    )

        @rule(skill_id=skills)
        def revoke_skill(self, skill_id: str) -> None:
            if skill_id:
                with contextlib.suppress(*REFUSALS):
                    revocation.skill_revoke(
                        skill=selectors.skill_get(skill_id), actor=approver, reason="x"
                    )

        @rule(
            target=lesson_ids,
            first=cases,
            second=cases,
            counter=cases,
            lesson_type=st.sampled_from(lesson_domain.LESSON_TYPES),
            tags=st.sampled_from([["优惠券"], ["优惠券", "小程序"], ["退款"]]),
        )
        def submit_lesson(
            self, first: str, second: str, counter: str, lesson_type: str, tags: list[str]
        ) -> str:
            self.serial += 1
            supports = sorted({first, second})
            data = {
                "type": "lesson",
                "lesson_type": lesson_type,
                "scope": dict(SCOPE),
                "scene": {"tags": tags, "description": "小程序优惠券无法使用"},
                "precondition": "活动规则限定了适用门店",
                "conclusion": f"核对活动适用门店 {self.serial}",
                "supports": supports,
                "contradicts": [] if counter in supports else [counter],
                "valid_from": "2026-09-01T00:00:00+08:00",
                "valid_to": "2027-12-31T00:00:00+08:00",
            }
            lesson, _ = lessons.lesson_submit(content=parse_lesson(data), actor=submitter)
            return lesson.id

        @rule(lesson_id=lesson_ids, own=st.booleans())
        def approve_lesson(self, lesson_id: str, own: bool) -> None:
            with contextlib.suppress(*REFUSALS):
                decisions.lesson_approve(
                    lesson=lesson_selectors.lesson_get(lesson_id),
                    actor=submitter if own else approver,
                    reason="fuzz",
                )

        @rule(lesson_id=lesson_ids)
        def reject_lesson(self, lesson_id: str) -> None:
            with contextlib.suppress(*REFUSALS):
                decisions.lesson_reject(
                    lesson=lesson_selectors.lesson_get(lesson_id), actor=approver, reason="no"
                )

        @rule(lesson_id=lesson_ids)
        def revoke_lesson(self, lesson_id: str) -> None:
            with contextlib.suppress(*REFUSALS):
                revocation_.lesson_revoke(
                    lesson=lesson_selectors.lesson_get(lesson_id), actor=approver, reason="x"
                )

        @rule(first=st.booleans())
        def resolve_a_conflict(self, first: bool) -> None:
            conflict = LessonConflict.objects.filter(status="open").order_by("pk").first()
            if conflict is None:
                return
            keep = conflict.lesson_a_id if first else conflict.lesson_b_id
            with contextlib.suppress(*REFUSALS):
                conflicts.conflict_resolve(
                    conflict=conflict, keep=keep, action="revoke", actor=approver, reason="fuzz"
                )

        @invariant()
        def approved_lessons_had_four_eyes(self) -> None:
            for lesson in Lesson.objects.filter(status=Status.APPROVED):
                assert lesson.approved_by_id != lesson.submitted_by_id

        @invariant()
        def conflicting_approved_lessons_are_recorded(self) -> None:
            shapes = lesson_selectors.shapes_in_scope(SCOPE)
            recorded = set(LessonConflict.objects.values_list("lesson_a_id", "lesson_b_id"))
            for i, a in enumerate(shapes):
                for b in shapes[i + 1 :]:
                    if lesson_domain.conflict_reason(a, b):
                        assert tuple(sorted((a.id, b.id))) in recorded

        @invariant()
        def approved_cases_carry_their_evidence(self) -> None:
            for case in Case.objects.filter(status=Status.APPROVED):
                # Four eyes on evidence: a check by someone other than the submitter.
                assert (
                    EvidenceCheck.objects.filter(
                        evidence__case=case, evidence__key__startswith="diagnosis/"
                    )
                    .exclude(checked_by_id=case.submitted_by_id)
                    .exists()
                )
                assert case.evidence_items.filter(key__startswith="counterevidence/").exists()
                assert case.approved_by_id != case.submitted_by_id

        @invariant()
        def retrieval_returns_only_approved_items(self) -> None:
            result = retrieve_experience(
                "优惠券无法使用 核对适用条件", SCOPE, NOW, run_id="fuzz", limit=20, actor=agent
            )
            models = {"case": Case, "skill": Skill, "lesson": Lesson}
            conflicted = lesson_selectors.open_conflict_ids(
                list(Lesson.objects.values_list("pk", flat=True))
            )
            threshold = lesson_selectors.confidence_settings().threshold
            for item in result["items"]:
                row = models[item["type"]].objects.get(pk=item["id"])
                assert row.status == Status.APPROVED
                assert item["conflict"] is (item["id"] in conflicted)
                if isinstance(row, Lesson):
                    assert lesson_selectors.lesson_availability(row, NOW)
                    assert item["confidence"] >= threshold or item["conflict"]

        @invariant()
        def available_skills_cite_only_usable_cases(self) -> None:
            for skill in Skill.objects.all():
                _, availability = selectors.skill_availability(skill.id, NOW)
                if availability:
                    assert skill.status == Status.APPROVED
                    for case in selectors.skill_cases(skill):
                        assert case.status == Status.APPROVED

    return Lifecycle


@pytest.mark.django_db
def test_no_sequence_breaks_the_lifecycle_rules(
    reviewer: User,
    second_reviewer: User,
    agent: User,
    frozen_clock: Callable[[datetime], Any],
) -> None:
    frozen_clock(NOW)
    run_state_machine_as_test(
        build_machine(reviewer, second_reviewer, agent),
        settings=settings(
            max_examples=30,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
