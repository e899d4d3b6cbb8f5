"""Review claims (issue 39, item 3): who holds an item under review, for how long; lapsing,
releasing, breaking; a decision on another's unlapsed claim refused unless taken over; tenants."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review.decisions import case_approve, case_reject
from knowledge.models import Document
from knowledge.services import DocumentReviewRefused, document_approve
from reviewconsole import claims, clock
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event, ReviewClaim
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist
from tests.ui.conftest import knowledge  # noqa: F401  (the shared knowledge fixture)
from tests.ui.factories import approved_case, submit_case

pytestmark = pytest.mark.django_db


@pytest.fixture
def candidate(operator: User, reviewer: User) -> Case:
    """A candidate ``ravi`` could approve: its diagnosis evidence checked by ``rita``."""
    case = submit_case(operator, incident="INC-CLAIM")
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    return case


def _events(action: Action, target: str) -> list[Event]:
    return list(Event.objects.filter(action=action, target=target))


def test_a_claim_is_seen_by_others_with_its_holder_and_end_and_audited(
    candidate: Case, reviewer: User, second_reviewer: User, settings: Any
) -> None:
    settings.REVIEW_CLAIM_TTL_MINUTES = 45
    now = clock.now()
    claim = claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse", now=now)
    assert claim.expires_at == now + timedelta(minutes=45)
    seen = claims.claim_on(candidate.id, "teahouse", second_reviewer, now)
    assert seen is not None and seen.holder == reviewer
    assert claims.claims_on([candidate.id], second_reviewer, now)[candidate.id].holder == reviewer
    assert list(claims.claims_held(reviewer, now)) == [claim]
    (event,) = _events(Action.CLAIM_TAKE, candidate.id)
    assert event.actor == reviewer and event.details["tenant"] == "teahouse"


def test_another_reviewer_cannot_claim_a_held_item_until_it_lapses(
    candidate: Case, reviewer: User, second_reviewer: User, frozen_clock: Any
) -> None:
    start = clock.now()
    frozen_clock(start)
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    with pytest.raises(claims.ClaimHeld) as held:
        claims.claim_take(actor=second_reviewer, item_id=candidate.id, tenant="teahouse")
    assert held.value.field == "item" and "rita" in held.value.message
    assert len(_events(Action.CLAIM_TAKE, candidate.id)) == 1

    frozen_clock(start + timedelta(minutes=60, seconds=1))  # the default TTL has passed
    assert claims.claim_on(candidate.id, "teahouse", second_reviewer, clock.now()) is None
    assert list(claims.claims_held(reviewer, clock.now())) == []
    taken = claims.claim_take(actor=second_reviewer, item_id=candidate.id, tenant="teahouse")
    assert taken.holder == second_reviewer and ReviewClaim.objects.count() == 1
    assert _events(Action.CLAIM_TAKE, candidate.id)[0].details["lapsed_claim_of"] == "rita"


def test_the_holder_renews_and_releases_and_nobody_else_releases(
    candidate: Case, reviewer: User, second_reviewer: User, frozen_clock: Any
) -> None:
    start = clock.now()
    frozen_clock(start)
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    frozen_clock(start + timedelta(minutes=30))
    renewed = claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    assert renewed.expires_at == start + timedelta(minutes=90)
    with pytest.raises(ValidationFailure) as refused:
        claims.claim_release(actor=second_reviewer, item_id=candidate.id, tenant="teahouse")
    assert refused.value.message == claims.NOT_HOLDER
    claims.claim_release(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    assert not ReviewClaim.objects.exists()
    assert len(_events(Action.CLAIM_RELEASE, candidate.id)) == 1


def test_an_admin_breaks_a_claim_with_a_reason_and_a_reviewer_cannot(
    candidate: Case, reviewer: User, second_reviewer: User, admin_user: User
) -> None:
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    with pytest.raises(PermissionRefused):
        claims.claim_break(
            actor=second_reviewer, item_id=candidate.id, tenant="teahouse", reason="mine now"
        )
    with pytest.raises(ValidationFailure) as refused:
        claims.claim_break(actor=admin_user, item_id=candidate.id, tenant="teahouse", reason=" ")
    assert (refused.value.field, refused.value.message) == ("reason", claims.BREAK_REASON_REQUIRED)
    holder = claims.claim_break(
        actor=admin_user, item_id=candidate.id, tenant="teahouse", reason="rita is on leave"
    )
    assert holder == "rita" and not ReviewClaim.objects.exists()
    (event,) = _events(Action.CLAIM_BREAK, candidate.id)
    assert event.actor == admin_user and event.reason == "rita is on leave"
    assert event.details["holder"] == "rita"


def test_approving_an_item_another_holds_is_refused_unless_taken_over(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    with pytest.raises(ReviewRefused) as refused:
        case_approve(case=candidate, actor=second_reviewer, reason="checked")
    assert refused.value.unmet == [claims.CLAIMED_BY_OTHER]
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE
    assert not _events(Action.CASE_APPROVE, candidate.id)
    assert ReviewClaim.objects.get().holder == reviewer

    case_approve(case=candidate, actor=second_reviewer, reason="checked", take_over=True)
    candidate.refresh_from_db()
    assert candidate.status == Status.APPROVED and candidate.approved_by == second_reviewer
    (taken,) = _events(Action.CLAIM_TAKE_OVER, candidate.id)
    assert taken.actor == second_reviewer and taken.details["holder"] == "rita"
    assert not ReviewClaim.objects.exists()


def test_rejecting_an_item_another_holds_is_refused_the_same_way(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    with pytest.raises(ReviewRefused) as refused:
        case_reject(case=candidate, actor=second_reviewer, reason="wrong store")
    assert refused.value.unmet == [claims.CLAIMED_BY_OTHER]


def test_the_holders_decision_ends_the_claim_and_a_lapsed_claim_does_not_stand_in_the_way(
    operator: User, reviewer: User, second_reviewer: User, frozen_clock: Any
) -> None:
    start = clock.now()
    frozen_clock(start)
    own = submit_case(operator, incident="INC-OWN")
    evidence_check(case=own, key="diagnosis/0", actor=second_reviewer)
    claims.claim_take(actor=reviewer, item_id=own.id, tenant="teahouse")
    case_approve(case=own, actor=reviewer, reason="checked")
    assert not ReviewClaim.objects.exists()
    assert not _events(Action.CLAIM_TAKE_OVER, own.id)

    lapsing = submit_case(operator, incident="INC-LAPSED")
    evidence_check(case=lapsing, key="diagnosis/0", actor=reviewer)
    claims.claim_take(actor=reviewer, item_id=lapsing.id, tenant="teahouse")
    frozen_clock(start + timedelta(hours=2))
    case_approve(case=lapsing, actor=second_reviewer, reason="checked")
    assert not ReviewClaim.objects.exists()
    assert not _events(Action.CLAIM_TAKE_OVER, lapsing.id)


def test_only_items_under_review_are_claimed_and_only_by_who_may_review_them(
    operator: User, reviewer: User, candidate: Case
) -> None:
    approved = approved_case(submitter=operator, reviewer=reviewer, incident="INC-DONE")
    with pytest.raises(ValidationFailure) as refused:
        claims.claim_take(actor=reviewer, item_id=approved.id, tenant="teahouse")
    assert refused.value.message == claims.NOT_UNDER_REVIEW
    with pytest.raises(PermissionRefused):
        claims.claim_take(actor=operator, item_id=candidate.id, tenant="teahouse")
    assert not ReviewClaim.objects.exists()


def test_another_tenants_reviewer_can_neither_see_nor_take_nor_release_a_claim(
    candidate: Case, reviewer: User
) -> None:
    tenants_exist("riverside")
    outsider = user_set_role(username="otto", role="reviewer", tenants=["riverside"])
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    now = clock.now()
    assert claims.claim_on(candidate.id, "teahouse", outsider, now) is None
    assert claims.claims_on([candidate.id], outsider, now) == {}
    unknown = "case:" + "0" * 64
    for item_id in (candidate.id, unknown):
        for write in (claims.claim_take, claims.claim_release):
            with pytest.raises(ValidationFailure) as refused:
                write(actor=outsider, item_id=item_id, tenant="teahouse")
            # Another tenant's item is refused exactly as an unknown one.
            assert refused.value.message == f"{claims.NO_SUCH_ITEM}: {item_id}"
    # Naming another tenant for a case of teahouse finds nothing either.
    with pytest.raises(ValidationFailure):
        claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="riverside")
    assert ReviewClaim.objects.get().holder == reviewer


@pytest.mark.usefixtures("knowledge")
def test_a_draft_document_claimed_by_one_operator_is_approved_by_another_only_by_taking_over(
    operator: User, make_user: Any
) -> None:
    other = make_user("otis", "operator")
    draft = Document.objects.get(doc_key="case-a-draft", version=1)
    claims.claim_take(actor=other, item_id=draft.public_id, tenant=draft.tenant)
    # The importer may not approve its own version; a third operator holds the claim.
    approver = make_user("oona", "operator")
    with pytest.raises(DocumentReviewRefused) as refused:
        document_approve(document=draft, actor=approver, reason="matches the campaign notice")
    assert refused.value.conditions == [claims.CLAIMED_BY_OTHER]
    document_approve(
        document=draft, actor=approver, reason="matches the campaign notice", take_over=True
    )
    draft.refresh_from_db()
    assert draft.approved
    assert _events(Action.CLAIM_TAKE_OVER, draft.public_id)[0].details["holder"] == "otis"
    assert not ReviewClaim.objects.exists()


@pytest.mark.usefixtures("knowledge")
def test_withdrawing_a_draft_another_operator_holds_needs_a_take_over_too(
    make_user: Any,
) -> None:
    from knowledge import hooks

    draft = Document.objects.get(doc_key="case-a-draft", version=1)
    holder = make_user("otis", "operator")
    claims.claim_take(actor=holder, item_id=draft.public_id, tenant=draft.tenant)
    other = make_user("oona", "operator")
    with pytest.raises(DocumentReviewRefused) as refused:
        hooks.document_revoke(document=draft, actor=other, reason="duplicate draft")
    assert refused.value.conditions == [claims.CLAIMED_BY_OTHER]
    draft.refresh_from_db()
    assert not draft.revoked and ReviewClaim.objects.exists()
    hooks.document_revoke(document=draft, actor=other, reason="duplicate draft", take_over=True)
    draft.refresh_from_db()
    assert draft.revoked and not ReviewClaim.objects.exists()
    assert _events(Action.CLAIM_TAKE_OVER, draft.public_id)[0].actor == other


def test_review_approve_on_the_command_line_is_refused_while_another_holds_the_claim(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    from tests.helpers import run_json

    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    code, answer = run_json(
        "review", "approve", candidate.id, "--as", "ravi", "--reason", "checked", "--json"
    )
    assert code != 0 and answer["ok"] is False
    assert answer["unmet"] == [claims.CLAIMED_BY_OTHER]
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE
