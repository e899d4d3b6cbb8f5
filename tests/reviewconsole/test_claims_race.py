"""Claims racing each other and racing a decision, with real threads and connections (SQLite
file, PostgreSQL): the item's row lock orders them, so one consistent state comes out."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review.decisions import case_approve
from reviewconsole import claims
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event, ReviewClaim
from tests.experience.cases.test_concurrency import in_threads
from tests.ui.factories import submit_case

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def candidate(operator: User, reviewer: User) -> Case:
    case = submit_case(operator, incident="INC-CLAIM-RACE")
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    return case


def test_two_reviewers_claiming_at_once_give_one_claim(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    actors = [reviewer, second_reviewer]
    results = in_threads(
        2,
        lambda i: claims.claim_take(actor=actors[i], item_id=candidate.id, tenant="teahouse"),
    )
    held = [r for r in results if isinstance(r, claims.ClaimHeld)]
    taken = [r for r in results if isinstance(r, ReviewClaim)]
    assert len(taken) == 1 and len(held) == 1, results
    assert ReviewClaim.objects.get().holder_id == taken[0].holder_id
    assert Event.objects.filter(action=Action.CLAIM_TAKE).count() == 1


def test_a_claim_racing_anothers_approval_ends_in_one_consistent_state(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    def work(index: int) -> object:
        if index == 0:
            return claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
        return case_approve(case=candidate, actor=second_reviewer, reason="checked")

    claimed, approved = in_threads(2, work)
    candidate.refresh_from_db()
    if isinstance(approved, ReviewRefused):
        # The claim came first: the approval was refused, the claim stands.
        assert approved.unmet == [claims.CLAIMED_BY_OTHER]
        assert isinstance(claimed, ReviewClaim)
        assert candidate.status == Status.CANDIDATE
        assert ReviewClaim.objects.get().holder == reviewer
    else:
        # The approval came first: nothing under review is left to claim.
        assert isinstance(claimed, ValidationFailure), claimed
        assert claimed.message == claims.NOT_UNDER_REVIEW
        assert candidate.status == Status.APPROVED
        assert not ReviewClaim.objects.exists()
