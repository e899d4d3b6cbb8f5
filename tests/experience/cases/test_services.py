"""Submission, checks, review and revocation, each with its audit event."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import selectors, services
from experience.cases.models import Case, Evidence, EvidenceCheck, Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review import decisions, revocation
from experience.review import impact as impacts
from experience.review import imports as review_imports
from experience.runs import records as run_records
from experience.runs.models import Reference, RevocationImpact
from reviewconsole.errors import ImmutableContentError, PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from tests.experience.conftest import (
    NOW,
    approve_checked,
    case_data,
    skill_data,
    without_verified,
)

pytestmark = pytest.mark.django_db


def events(action: Action, target: str) -> list[Event]:
    return list(Event.objects.filter(action=action, target=target))


def refused(call: Callable[[], Any]) -> list[str]:
    with pytest.raises(ReviewRefused) as refusal:
        call()
    return refusal.value.unmet


# --- identity and immutability -------------------------------------------------------------------


def test_identical_content_is_stored_once(reviewer: User, at_now: datetime) -> None:
    first, created = services.case_submit(content=parse_case(case_data()), actor=reviewer)
    again, created_again = services.case_submit(content=parse_case(case_data()), actor=reviewer)
    assert (created, created_again) == (True, False)
    assert first.id == again.id and Case.objects.count() == 1
    assert first.id == f"case:{first.content_hash}"
    assert len(events(Action.CASE_SUBMIT, first.id)) == 1


def test_changed_content_is_a_new_row(submit_case: Callable[..., Case]) -> None:
    first = submit_case()
    second = submit_case(case_data(diagnosis={"statement": "另一诊断", "evidence": []}))
    assert first.id != second.id and Case.objects.count() == 2


def test_hashed_content_cannot_be_updated(submit_case: Callable[..., Case]) -> None:
    case = submit_case()
    case.title = "edited"
    with pytest.raises(ImmutableContentError):
        case.save()
    with pytest.raises(ImmutableContentError):
        Case.objects.filter(pk=case.pk).update(title="edited")
    evidence = Evidence.objects.filter(case=case).first()
    assert evidence is not None
    evidence.excerpt = "edited"
    with pytest.raises(ImmutableContentError):
        evidence.save()
    assert selectors.case_get(case.id).title != "edited"


def test_submission_records_the_authenticated_submitter(operator: User, at_now: datetime) -> None:
    case, _ = services.case_submit(
        content=parse_case(without_verified(case_data())), actor=operator
    )
    assert case.submitted_by == operator and case.status == Status.CANDIDATE
    assert case.evidence_items.count() == 4
    assert not EvidenceCheck.objects.exists()


def test_admin_may_not_submit(admin_user: User, at_now: datetime) -> None:
    with pytest.raises(PermissionRefused):
        services.case_submit(content=parse_case(without_verified(case_data())), actor=admin_user)


# --- checked evidence ----------------------------------------------------------------------------


def test_import_verified_needs_the_verify_permission(operator: User, at_now: datetime) -> None:
    with pytest.raises(ValidationFailure) as failure:
        review_imports.items_import(items=[case_data()], actor=operator)
    assert failure.value.field == "[0].diagnosis.evidence[0].verified"
    assert failure.value.message == services.VERIFIED_NEEDS_PERMISSION
    assert not Case.objects.exists()


def test_import_verified_is_the_importers_check(reviewer: User, at_now: datetime) -> None:
    [result] = review_imports.items_import(items=[case_data()], actor=reviewer)
    check = EvidenceCheck.objects.get()
    assert check.evidence.key == "diagnosis/0" and check.checked_by == reviewer
    assert check.checked_at == NOW
    assert events(Action.CASE_VERIFY, result.id)[0].actor == reviewer


def test_agent_proposal_is_never_checked(agent: User, at_now: datetime) -> None:
    # The body claims the diagnosis evidence was verified; the claim is ignored.
    case, created = services.case_propose(data=case_data(), actor=agent)
    assert created and case.submitted_via == "api" and case.submitted_by == agent
    assert not EvidenceCheck.objects.exists()
    again, created_again = services.case_propose(data=without_verified(case_data()), actor=agent)
    assert again.id == case.id and not created_again


def test_agent_cannot_import_or_verify(agent: User, submit_case: Callable[..., Case]) -> None:
    with pytest.raises(PermissionRefused):
        review_imports.items_import(items=[without_verified(case_data())], actor=agent)
    case = submit_case()
    with pytest.raises(PermissionRefused) as refusal:
        services.evidence_check(case=case, key="diagnosis/0", actor=agent)
    assert refusal.value.unmet == domain.NOT_REVIEWER


def test_reviewer_checks_evidence(
    operator: User, reviewer: User, submit_case: Callable[..., Case]
) -> None:
    case = submit_case(without_verified(case_data()), actor=operator)
    check = services.evidence_check(
        case=case, key="counterevidence/0/0", actor=reviewer, note="看过原消息"
    )
    assert (check.checked_by, check.note, check.checked_at) == (reviewer, "看过原消息", NOW)
    [event] = events(Action.CASE_VERIFY, case.id)
    assert event.details == {"evidence": ["counterevidence/0/0"]} and event.reason == "看过原消息"
    with pytest.raises(ValidationFailure) as failure:
        services.evidence_check(case=case, key="diagnosis/7", actor=reviewer)
    assert failure.value.field == "evidence"


# --- approval --------------------------------------------------------------------------------------


def test_approve(submit_case: Callable[..., Case], second_reviewer: User) -> None:
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    outcome = decisions.case_approve(case=case, actor=second_reviewer, reason=" 证据已核对 ")
    case.refresh_from_db()
    assert outcome.status == case.status == Status.APPROVED
    assert (case.approved_by, case.approved_at, case.approved_reason) == (
        second_reviewer,
        NOW,
        "证据已核对",
    )
    [event] = events(Action.CASE_APPROVE, case.id)
    assert event.actor == second_reviewer and event.reason == "证据已核对"


def test_four_eyes(submit_case: Callable[..., Case], reviewer: User) -> None:
    case = submit_case()
    # The submitter's own check (``verified: true`` in the import) does not count either.
    assert refused(lambda: decisions.case_approve(case=case, actor=reviewer, reason="ok")) == [
        domain.OWN_SUBMISSION,
        domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
    ]
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    assert not events(Action.CASE_APPROVE, case.id)


def test_only_reviewers_approve(
    submit_case: Callable[..., Case], operator: User, agent: User, second_reviewer: User
) -> None:
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    for actor in (operator, agent):
        assert refused(partial(decisions.case_approve, case=case, actor=actor, reason="ok")) == [
            domain.NOT_REVIEWER
        ]


def test_identity_never_comes_from_content(
    submit_case: Callable[..., Case], reviewer: User, second_reviewer: User
) -> None:
    # A body that names someone else as submitter or approver is not even accepted.
    with pytest.raises(ValidationFailure) as failure:
        parse_case(case_data(approved_by=second_reviewer.username))
    assert failure.value.field == "approved_by"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {
                "diagnosis": {
                    "statement": "推测缓存",
                    "evidence": [{"source_id": "s", "excerpt": "e"}],
                }
            },
            [domain.NO_CHECKED_DIAGNOSIS_EVIDENCE],
        ),
        # The diagnosis evidence is checked by its submitter only: that does not count.
        (
            {"counterevidence": []},
            [domain.NO_CHECKED_DIAGNOSIS_EVIDENCE, domain.NO_COUNTEREVIDENCE],
        ),
        (
            {
                "counterevidence": [
                    {"hypothesis": "h", "statement": "s", "refutes": "r", "evidence": []}
                ]
            },
            [domain.NO_CHECKED_DIAGNOSIS_EVIDENCE, domain.NO_COUNTEREVIDENCE],
        ),
    ],
)
def test_unmet_conditions_by_name(
    submit_case: Callable[..., Case],
    second_reviewer: User,
    changes: dict[str, Any],
    expected: list[str],
) -> None:
    case = submit_case(case_data(**changes))
    assert (
        refused(lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="ok"))
        == expected
    )


def test_checked_observation_is_not_checked_diagnosis(
    operator: User,
    reviewer: User,
    second_reviewer: User,
    submit_case: Callable[..., Case],
) -> None:
    case = submit_case(without_verified(case_data()), actor=operator)
    services.evidence_check(case=case, key="observations/0", actor=reviewer)
    services.evidence_check(case=case, key="outcome/0", actor=reviewer)
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="ok")
    ) == [domain.NO_CHECKED_DIAGNOSIS_EVIDENCE]
    services.evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    assert (
        decisions.case_approve(case=case, actor=second_reviewer, reason="ok").status == "approved"
    )


def test_reason_state_and_expiry(
    submit_case: Callable[..., Case],
    second_reviewer: User,
    frozen_clock: Callable[[datetime], Any],
) -> None:
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason=" ")
    ) == [domain.REASON_REQUIRED]
    frozen_clock(datetime.fromisoformat("2027-12-31T00:00:00+08:00"))
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="ok")
    ) == [domain.EXPIRED]
    frozen_clock(NOW)
    decisions.case_approve(case=case, actor=second_reviewer, reason="ok")
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="ok")
    ) == [domain.NOT_CANDIDATE]


def test_reject(submit_case: Callable[..., Case], second_reviewer: User) -> None:
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    assert refused(lambda: decisions.case_reject(case=case, actor=second_reviewer, reason="")) == [
        domain.REASON_REQUIRED
    ]
    outcome = decisions.case_reject(case=case, actor=second_reviewer, reason="证据不足")
    assert outcome.status == Status.REJECTED
    assert events(Action.CASE_REJECT, case.id)[0].reason == "证据不足"
    assert refused(
        lambda: decisions.case_approve(case=case, actor=second_reviewer, reason="ok")
    ) == [domain.NOT_CANDIDATE]


def test_supersede_on_approval(
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    second_reviewer: User,
) -> None:
    old = approved_case()
    correction = submit_case(case_data(supersedes=old.id, summary="更正：补充了服务端缓存的核对"))
    assert selectors.case_get(old.id).status == Status.APPROVED
    approve_checked(correction, actor=second_reviewer, reason="更正版")
    old.refresh_from_db()
    assert (old.status, old.superseded_by) == (Status.SUPERSEDED, correction.id)
    [event] = events(Action.CASE_SUPERSEDE, old.id)
    assert event.details == {"superseded_by": correction.id}


def test_supersedes_must_name_a_stored_case(reviewer: User, at_now: datetime) -> None:
    with pytest.raises(ValidationFailure) as failure:
        services.case_submit(
            content=parse_case(case_data(supersedes="case:" + "0" * 64)), actor=reviewer
        )
    assert failure.value.field == "supersedes"


# --- skills ----------------------------------------------------------------------------------


def submit_skill(cases: list[str], actor: User, **changes: Any) -> Skill:
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data(cases, **changes), tool_specs()), actor=actor
    )
    return skill


def test_skill_from_two_incidents(
    approved_case: Callable[..., Case], reviewer: User, second_reviewer: User
) -> None:
    a, b = approved_case(incident="INC-1"), approved_case(incident="INC-2")
    skill = submit_skill([a.id, b.id], reviewer)
    assert refused(lambda: decisions.skill_approve(skill=skill, actor=reviewer, reason="ok")) == [
        domain.OWN_SUBMISSION
    ]
    assert (
        decisions.skill_approve(skill=skill, actor=second_reviewer, reason="ok").status
        == "approved"
    )
    assert events(Action.SKILL_APPROVE, skill.id)[0].actor == second_reviewer


def test_two_summaries_of_one_incident_count_once(
    approved_case: Callable[..., Case], reviewer: User, second_reviewer: User
) -> None:
    a = approved_case(incident="INC-1")
    b = approved_case(incident="INC-1", title="同一事故的另一份摘要")
    skill = submit_skill([a.id, b.id], reviewer)
    assert refused(
        lambda: decisions.skill_approve(skill=skill, actor=second_reviewer, reason="ok")
    ) == [domain.TOO_FEW_INCIDENTS]


def test_skill_needs_approved_cases_of_its_scope(
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
) -> None:
    a = approved_case(incident="INC-1")
    pending = submit_case(case_data(incident="INC-2"))
    skill = submit_skill([a.id, pending.id], reviewer)
    assert refused(
        lambda: decisions.skill_approve(skill=skill, actor=second_reviewer, reason="ok")
    ) == [
        domain.CASE_UNAVAILABLE,
        domain.TOO_FEW_INCIDENTS,
    ]
    other = approved_case(
        incident="INC-3", scope={**case_data()["scope"], "deployment": "release-2"}
    )
    mixed = submit_skill([a.id, other.id], reviewer)
    assert refused(
        lambda: decisions.skill_approve(skill=mixed, actor=second_reviewer, reason="ok")
    ) == [domain.SCOPE_MISMATCH]


def test_skill_must_cite_stored_cases(reviewer: User, at_now: datetime) -> None:
    with pytest.raises(ValidationFailure) as failure:
        submit_skill(["case:" + "0" * 64], reviewer)
    assert failure.value.field == "cases[0]"


def test_import_resolves_file_references(
    reviewer: User, second_reviewer: User, at_now: datetime
) -> None:
    items = [
        skill_data(["#1", "#2"]),
        case_data(incident="INC-1"),
        case_data(incident="INC-2"),
    ]
    results = review_imports.items_import(items=items, actor=reviewer)
    assert [r.type for r in results] == ["skill", "case", "case"]
    skill = selectors.skill_get(results[0].id)
    assert sorted(skill.cases.values_list("id", flat=True)) == sorted(
        [results[1].id, results[2].id]
    )
    again = review_imports.items_import(items=items, actor=reviewer)
    assert [r.id for r in again] == [r.id for r in results]
    assert not any(r.created for r in again)


@pytest.mark.parametrize(
    ("refs", "field"),
    [
        (["#0", "#1"], "[0].cases[0]"),
        (["#1", "#5"], "[0].cases[1]"),
        (["#1", "#1"], "[0].cases[1]"),
    ],
)
def test_import_rejects_bad_file_references(
    reviewer: User, at_now: datetime, refs: list[str], field: str
) -> None:
    with pytest.raises(ValidationFailure) as failure:
        review_imports.items_import(items=[skill_data(refs), case_data()], actor=reviewer)
    assert failure.value.field == field
    assert not Case.objects.exists() and not Skill.objects.exists()


def test_import_is_all_or_nothing(reviewer: User, at_now: datetime) -> None:
    bad = skill_data(
        ["#0"], recipe=[{"tool": "search_knowledge", "arguments": {"query": "x", "store": "s"}}]
    )
    with pytest.raises(ValidationFailure) as failure:
        review_imports.items_import(items=[case_data(), bad], actor=reviewer)
    assert failure.value.field == "[1].recipe[0].arguments.store"
    assert (
        not Case.objects.exists() and not Event.objects.filter(action=Action.CASE_SUBMIT).exists()
    )


# --- revocation and impact -------------------------------------------------------------------------


def test_revoke_needs_reason_and_approved_state(
    submit_case: Callable[..., Case], second_reviewer: User, operator: User
) -> None:
    case = submit_case()
    assert refused(
        lambda: revocation.case_revoke(case=case, actor=second_reviewer, reason="x")
    ) == [domain.NOT_APPROVED]
    approve_checked(case, actor=second_reviewer, reason="ok")
    assert refused(lambda: revocation.case_revoke(case=case, actor=second_reviewer, reason="")) == [
        domain.REASON_REQUIRED
    ]
    assert refused(lambda: revocation.case_revoke(case=case, actor=operator, reason="x")) == [
        domain.NOT_REVIEWER
    ]


def test_impact_lists_exactly_the_skills_and_runs_that_used_the_case(
    approved_skill: Callable[..., Skill],
    approved_case: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
) -> None:
    skill = approved_skill()
    cited = list(skill.cases.order_by("incident"))
    target = cited[0]
    unrelated_case = approved_case(incident="INC-7", title="无关案例")
    unrelated_skill = approved_skill(tag="（另一门店复盘）", title="另一个技能")
    run_records.references_record(run_id="run-case", items=[(target.id, "case")], at=NOW)
    run_records.references_record(run_id="run-skill", items=[(skill.id, "skill")], at=NOW)
    run_records.references_record(run_id="run-skill", items=[(cited[1].id, "case")], at=NOW)
    run_records.references_record(run_id="run-sibling", items=[(cited[1].id, "case")], at=NOW)
    run_records.references_record(run_id="run-other", items=[(unrelated_case.id, "case")], at=NOW)
    run_records.references_record(
        run_id="run-other-skill", items=[(unrelated_skill.id, "skill")], at=NOW
    )

    preview = impacts.revocation_impact(target.id)
    outcome = revocation.case_revoke(case=target, actor=reviewer, reason="诊断有误")
    assert preview == outcome.impact
    assert outcome.impact.skills == [skill.id]
    assert outcome.impact.runs == ["run-case", "run-skill"]
    stored = RevocationImpact.objects.get(item_id=target.id)
    assert (stored.skills, stored.runs, stored.revoked_by) == (
        [skill.id],
        ["run-case", "run-skill"],
        reviewer,
    )
    [event] = events(Action.CASE_REVOKE, target.id)
    assert event.details == {"impact": {"skills": [skill.id], "runs": ["run-case", "run-skill"]}}
    # The skill's own status need not change; it is unavailable because its case is.
    assert selectors.skill_get(skill.id).status == Status.APPROVED
    _, availability = selectors.skill_availability(skill.id, NOW)
    assert not availability and target.id in availability.reason


def test_revoking_a_skill_lists_runs_that_read_it(
    approved_skill: Callable[..., Skill], second_reviewer: User
) -> None:
    skill = approved_skill()
    case_id = skill.cases.values_list("id", flat=True)[0]
    run_records.references_record(
        run_id="run-1", items=[(skill.id, "skill"), (case_id, "case")], at=NOW
    )
    run_records.references_record(run_id="run-2", items=[(case_id, "case")], at=NOW)
    outcome = revocation.skill_revoke(skill=skill, actor=second_reviewer, reason="配方过时")
    assert outcome.impact.as_json() == {"skills": [], "runs": ["run-1"]}
    assert RevocationImpact.objects.get(item_id=skill.id).runs == ["run-1"]
    assert events(Action.SKILL_REVOKE, skill.id)[0].reason == "配方过时"


def test_revocation_does_not_rewrite_history(
    approved_case: Callable[..., Case], second_reviewer: User
) -> None:
    case = approved_case()
    run_records.references_record(
        run_id="run-1", items=[(case.id, "case")], at=NOW - timedelta(hours=1)
    )
    revocation.case_revoke(case=case, actor=second_reviewer, reason="错误")
    assert Reference.objects.filter(item_id=case.id, run_id="run-1").count() == 1
