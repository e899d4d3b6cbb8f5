"""Held-out tickets never feed memory: the leak check both ways, registration and approval."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from evaluation.domain import parse_ticket_set
from evaluation.models import HeldoutRun, HeldoutTicket
from evaluation.selectors import (
    CITED_BY_CASE,
    CITED_BY_DOCUMENT,
    REFERENCED,
    HeldoutLeaked,
    heldout_check,
    heldout_leaks,
)
from evaluation.services import RUN_OF_OTHER_TICKET, heldout_register
from experience.cases import selectors, services
from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.core import domain as experience_domain
from experience.core.models import ItemType, Status
from experience.core.review import ReviewRefused
from experience.review import decisions, revocation
from experience.runs import records as run_records
from knowledge.services import documents_import
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from tests.evaluation.conftest import ticket, ticket_set
from tests.experience.conftest import approve_checked, case_data

pytestmark = pytest.mark.django_db

HELD_OUT = "thread://held-out/t-1"
HELD_OUT_RUN = "run-held-out-1"


@pytest.fixture
def now(frozen_clock: Any) -> datetime:
    at = datetime.fromisoformat("2026-10-01T12:00:00+08:00")
    frozen_clock(at)
    return at


def citing(source_id: str, *, incident: str = "INC-CITES") -> dict[str, Any]:
    """An approvable case whose observation cites ``source_id``."""
    data = case_data(incident=incident, title=f"引用 {source_id} 的案例")
    data["observations"] = [{"source_id": source_id, "excerpt": "顾客：券用不了。"}]
    return data


def submitted(data: dict[str, Any], reviewer: User) -> Case:
    case, _ = services.case_submit(content=parse_case(data), actor=reviewer)
    return case


def approved(data: dict[str, Any], reviewer: User, approver: User) -> Case:
    case = submitted(data, reviewer)
    approve_checked(case, actor=approver)
    return selectors.case_get(case.id)


def the_set(*tickets: dict[str, Any]) -> Any:
    return parse_ticket_set(ticket_set(*(tickets or (ticket(1),))))


# --- accepted --------------------------------------------------------------------------------


def test_a_set_no_memory_has_seen_is_accepted(demo_memory: dict[str, Any]) -> None:
    assert heldout_leaks(the_set(ticket(1), ticket(2))) == []
    heldout_check(the_set())


def test_memory_that_cannot_be_returned_is_no_leak(
    now: datetime, reviewer: User, second_reviewer: User
) -> None:
    # A candidate and a revoked case citing the ticket, and a run that read only those.
    candidate = submitted(citing(f"{HELD_OUT}#m2", incident="INC-A"), reviewer)
    revoked = approved(citing(HELD_OUT, incident="INC-B"), reviewer, second_reviewer)
    revocation.case_revoke(case=revoked, actor=second_reviewer, reason="wrong")
    run_records.references_record(
        run_id=HELD_OUT_RUN,
        items=[(candidate.id, ItemType.CASE), (revoked.id, ItemType.CASE)],
        at=now,
    )
    assert heldout_leaks(the_set()) == []


def test_a_similar_looking_id_is_not_a_citation(
    now: datetime, reviewer: User, second_reviewer: User
) -> None:
    approved(citing(f"{HELD_OUT}0#m1"), reviewer, second_reviewer)
    approved(citing("run-held-out-10", incident="INC-2"), reviewer, second_reviewer)
    assert heldout_leaks(the_set()) == []


# --- refused ---------------------------------------------------------------------------------


def test_a_run_of_the_ticket_that_read_an_approved_case_is_a_leak(
    demo_memory: dict[str, Any], now: datetime
) -> None:
    case_id = demo_memory["cases"][0]
    run_records.references_record(run_id=HELD_OUT_RUN, items=[(case_id, ItemType.CASE)], at=now)
    [leak] = heldout_leaks(the_set(ticket(2), ticket(1)))
    assert (leak.field, leak.reason, leak.via, leak.item_id) == (
        "tickets[1].run_ids[0]",
        REFERENCED,
        HELD_OUT_RUN,
        case_id,
    )


def test_a_run_that_read_an_approved_skill_is_a_leak(
    demo_memory: dict[str, Any], now: datetime
) -> None:
    run_records.references_record(
        run_id=HELD_OUT_RUN, items=[(demo_memory["skill"], ItemType.SKILL)], at=now
    )
    assert [leak.reason for leak in heldout_leaks(the_set())] == [REFERENCED]


@pytest.mark.parametrize(
    ("source_id", "field"),
    [
        (HELD_OUT, "tickets[0].id"),
        (f"{HELD_OUT}#m3", "tickets[0].id"),
        (f"{HELD_OUT}/attachments/1", "tickets[0].id"),
        (HELD_OUT_RUN, "tickets[0].run_ids[0]"),
        (f"{HELD_OUT_RUN}#step-1", "tickets[0].run_ids[0]"),
    ],
)
def test_an_approved_case_citing_the_ticket_or_its_run_is_a_leak(
    now: datetime,
    reviewer: User,
    second_reviewer: User,
    source_id: str,
    field: str,
) -> None:
    case = approved(citing(source_id), reviewer, second_reviewer)
    [leak] = heldout_leaks(the_set())
    assert (leak.field, leak.reason, leak.via, leak.item_id) == (
        field,
        CITED_BY_CASE,
        source_id,
        case.id,
    )
    with pytest.raises(HeldoutLeaked) as refused:
        heldout_check(the_set())
    assert refused.value.field == field
    assert refused.value.as_json()["leaks"][0]["item"] == case.id


def _historical_case(source: str, *, revoked: bool) -> dict[str, Any]:
    return {
        "doc_key": "held-out-case",
        "version": 1,
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "stores": ["store-002"],
        "campaign": "campaign-b",
        "kind": "case",
        "title": "历史案例",
        "text": "二号店券不可用。",
        "source": source,
        "valid_from": "2026-09-01T00:00:00+08:00",
        "valid_to": None,
        "published_at": "2026-09-01T00:00:00+08:00",
        "approved": True,
        "revoked": revoked,
        "requirements": {},
    }


@pytest.mark.parametrize(("revoked", "leaks"), [(False, [CITED_BY_DOCUMENT]), (True, [])])
def test_a_confirmed_historical_case_built_from_the_ticket_is_a_leak(
    operator: User, now: datetime, revoked: bool, leaks: list[str]
) -> None:
    documents_import(items=[_historical_case(f"{HELD_OUT}#m1", revoked=revoked)], actor=operator)
    assert [leak.reason for leak in heldout_leaks(the_set())] == leaks


# --- registration and approval -----------------------------------------------------------------


def test_registration_is_audited_once_and_idempotent(
    demo_memory: dict[str, Any], reviewer: User
) -> None:
    assert heldout_register(ticket_set=the_set(ticket(1), ticket(2)), actor=reviewer) == [
        HELD_OUT,
        "thread://held-out/t-2",
    ]
    assert heldout_register(ticket_set=the_set(ticket(1)), actor=reviewer) == []
    assert HeldoutTicket.objects.count() == 2 and HeldoutRun.objects.count() == 2
    [event] = Event.objects.filter(action=Action.HELDOUT_REGISTER)
    assert event.actor == reviewer and event.details["tickets"] == [
        HELD_OUT,
        "thread://held-out/t-2",
    ]


def test_a_run_id_cannot_belong_to_two_held_out_tickets(demo_memory: dict[str, Any]) -> None:
    heldout_register(ticket_set=the_set(ticket(1)), actor=None)
    other = ticket(9, run_ids=["run-9", HELD_OUT_RUN])
    with pytest.raises(ValidationFailure) as refused:
        heldout_register(ticket_set=the_set(other), actor=None)
    assert refused.value.field == "tickets[0].run_ids[1]"
    assert RUN_OF_OTHER_TICKET in refused.value.message
    assert not HeldoutTicket.objects.filter(ticket_id="thread://held-out/t-9").exists()


def test_a_leaking_set_is_not_registered(
    now: datetime, reviewer: User, second_reviewer: User
) -> None:
    approved(citing(HELD_OUT), reviewer, second_reviewer)
    events = Event.objects.count()
    with pytest.raises(HeldoutLeaked):
        heldout_register(ticket_set=the_set(), actor=reviewer)
    assert HeldoutTicket.objects.count() == 0 and Event.objects.count() == events


@pytest.mark.parametrize("source_id", [f"{HELD_OUT}#m2", f"{HELD_OUT_RUN}/trace"])
def test_approving_a_case_that_cites_a_held_out_ticket_is_refused(
    now: datetime, reviewer: User, second_reviewer: User, source_id: str
) -> None:
    heldout_register(ticket_set=the_set(), actor=reviewer)
    data = citing("thread://other/t-1")
    data["counterevidence"][0]["evidence"] = [{"source_id": source_id, "excerpt": "刷新无效。"}]
    case = submitted(data, reviewer)
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    with pytest.raises(ReviewRefused) as refused:
        decisions.case_approve(case=case, actor=second_reviewer, reason="checked")
    assert refused.value.unmet == [experience_domain.CITES_HELDOUT_TICKET]
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    assert not Event.objects.filter(action=Action.CASE_APPROVE, target=case.id).exists()


def test_the_refusal_joins_the_other_unmet_conditions(now: datetime, reviewer: User) -> None:
    heldout_register(ticket_set=the_set(), actor=reviewer)
    case = submitted(citing(HELD_OUT), reviewer)
    with pytest.raises(ReviewRefused) as refused:
        decisions.case_approve(case=case, actor=reviewer, reason="")
    assert refused.value.unmet[-1] == experience_domain.CITES_HELDOUT_TICKET
    assert {"reason_required", "own_submission"} <= set(refused.value.unmet)


def test_a_case_citing_other_threads_is_still_approved(
    now: datetime, reviewer: User, second_reviewer: User
) -> None:
    heldout_register(ticket_set=the_set(), actor=reviewer)
    case = approved(citing("thread://other/t-1"), reviewer, second_reviewer)
    assert case.status == Status.APPROVED


def test_registration_happens_before_approval_can_leak(
    now: datetime, reviewer: User, second_reviewer: User
) -> None:
    """Whichever comes first, a held-out ticket and an approved case citing it never coexist."""
    case = submitted(citing(HELD_OUT), reviewer)
    heldout_register(ticket_set=the_set(), actor=reviewer)
    services.evidence_check(case=case, key="diagnosis/0", actor=second_reviewer)
    with pytest.raises(ReviewRefused) as refused:
        decisions.case_approve(case=case, actor=second_reviewer, reason="checked")
    assert refused.value.unmet == [experience_domain.CITES_HELDOUT_TICKET]
    assert heldout_leaks(the_set()) == []
