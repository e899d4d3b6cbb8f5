"""Approval conditions contributed by other apps through ``case_approval_guard_register``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from django.contrib.auth.models import User

from experience.cases import guards as guards_module
from experience.cases import selectors, services
from experience.cases.models import Case
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review import decisions
from reviewconsole.models import Action, Event
from tests.experience.conftest import approve_checked

pytestmark = pytest.mark.django_db


@pytest.fixture
def guards(monkeypatch: pytest.MonkeyPatch) -> list[guards_module.CaseApprovalGuard]:
    installed: list[guards_module.CaseApprovalGuard] = []
    monkeypatch.setattr(guards_module, "case_approval_guards", installed)
    return installed


def test_a_guard_s_unmet_names_refuse_the_approval(
    guards: list[guards_module.CaseApprovalGuard],
    submit_case: Callable[..., Case],
    second_reviewer: User,
    at_now: datetime,
) -> None:
    seen: list[str] = []

    def guard(case: Case) -> list[str]:
        seen.append(case.id)
        return ["cites_heldout_ticket", "reason_required"]

    guards_module.case_approval_guard_register(guard)
    guards_module.case_approval_guard_register(guard)
    case = submit_case()
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    with pytest.raises(ReviewRefused) as refused:
        decisions.case_approve(case=case, actor=second_reviewer, reason="")
    # Reported once each, after the memory's own conditions; the guard ran once.
    assert refused.value.unmet == ["reason_required", "cites_heldout_ticket"]
    assert seen == [case.id]
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    assert not Event.objects.filter(action=Action.CASE_APPROVE).exists()


def test_a_guard_with_nothing_to_say_lets_the_approval_through(
    guards: list[guards_module.CaseApprovalGuard],
    submit_case: Callable[..., Case],
    second_reviewer: User,
    at_now: datetime,
) -> None:
    guards_module.case_approval_guard_register(lambda case: [])
    case = submit_case()
    approve_checked(case, actor=second_reviewer)
    assert selectors.case_get(case.id).status == Status.APPROVED


def test_the_evaluation_app_installs_the_held_out_guard() -> None:
    from evaluation.services import heldout_approval_guard

    assert heldout_approval_guard in guards_module.case_approval_guards
