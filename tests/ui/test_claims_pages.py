"""Claims on the console (issue 39, item 3): the buttons in an item's decision area, who holds
each item on its page and in the queue, a refused approval that offers the take-over, the admin's
break, "Waiting on you" on the dashboard, and tenants."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation.models import ReReview, ReReviewReason
from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.models import Status
from reviewconsole import claims, clock
from reviewconsole.models import Action, Event, ReviewClaim
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist
from tests.ui.conftest import csrf_client, csrf_token
from tests.ui.factories import approved_case, submit_case

pytestmark = pytest.mark.django_db

CLAIM = "/claims/"


@pytest.fixture
def candidate(operator: User, reviewer: User) -> Case:
    case = submit_case(operator, incident="INC-CLAIM-PAGE")
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    return case


def _post(client: Client, url: str, data: dict[str, str], **headers: str) -> Any:
    return client.post(url, data, HTTP_X_CSRFTOKEN=csrf_token(client), headers=headers)


def _claim(client: Client, case: Case, action: str = "take", **extra: str) -> Any:
    return _post(client, CLAIM, {"item": case.id, "tenant": case.tenant, "action": action, **extra})


def test_a_reviewer_claims_from_the_item_page_and_another_sees_it_there_and_in_the_queue(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    rita = csrf_client(reviewer)
    page = rita.get(candidate.get_absolute_url()).content.decode()
    assert 'id="claim-take"' in page and reverse("claim") in page

    response = _claim(rita, candidate)
    assert response.status_code == 303 and response["Location"] == candidate.get_absolute_url()
    mine = rita.get(candidate.get_absolute_url()).content.decode()
    assert "You hold a claim on it until" in mine and 'id="claim-release"' in mine

    ravi = csrf_client(second_reviewer)
    theirs = ravi.get(candidate.get_absolute_url()).content.decode()
    assert 'data-claim-holder="rita"' in theirs and "Claimed by rita until" in theirs
    assert 'id="take-over"' in theirs and 'id="claim-take"' not in theirs
    queue = ravi.get(reverse("experience:queue")).content.decode()
    assert 'data-claimed-by="rita"' in queue and "Claimed by rita" in queue

    # Ravi's claim is refused, saying whose it is; nothing changed.
    refused = _claim(ravi, candidate)
    assert refused.status_code == 303
    page = ravi.get(candidate.get_absolute_url()).content.decode()
    assert "rita holds a claim on it until" in page
    assert ReviewClaim.objects.get().holder == reviewer


def test_approving_an_item_another_holds_is_refused_with_the_take_over_offered_then_taken(
    candidate: Case, reviewer: User, second_reviewer: User
) -> None:
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    ravi = csrf_client(second_reviewer)
    review = reverse("experience:case-review", args=[candidate.digest])
    refused = _post(ravi, review, {"decision": "approve", "reason": "checked"})
    assert refused.status_code == 422
    html = refused.content.decode()
    assert f'data-condition="{claims.CLAIMED_BY_OTHER}"' in html
    assert 'id="take-over"' in html and "Take over rita’s claim" in html
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE

    taken = _post(ravi, review, {"decision": "approve", "reason": "checked", "take_over": "1"})
    assert taken.status_code == 303
    candidate.refresh_from_db()
    assert candidate.status == Status.APPROVED
    assert Event.objects.filter(action=Action.CLAIM_TAKE_OVER, target=candidate.id).exists()


def test_the_holder_releases_and_an_admin_breaks_with_a_reason(
    candidate: Case, reviewer: User, admin_user: User
) -> None:
    rita = csrf_client(reviewer)
    _claim(rita, candidate)
    assert _claim(rita, candidate, "release").status_code == 303
    assert not ReviewClaim.objects.exists()

    _claim(rita, candidate)
    ada = csrf_client(admin_user)
    page = ada.get(candidate.get_absolute_url()).content.decode()
    assert 'id="claim-break"' in page
    no_reason = _claim(ada, candidate, "break", reason="")
    assert no_reason.status_code == 303 and ReviewClaim.objects.exists()
    assert (
        "Breaking a claim needs a reason." in ada.get(candidate.get_absolute_url()).content.decode()
    )
    assert _claim(ada, candidate, "break", reason="rita is away").status_code == 303
    assert not ReviewClaim.objects.exists()
    assert Event.objects.get(action=Action.CLAIM_BREAK).details["holder"] == "rita"
    # A reviewer is offered no break button.
    _claim(rita, candidate)
    assert (
        'id="claim-break"'
        not in csrf_client(reviewer).get(candidate.get_absolute_url()).content.decode()
    )


def test_another_tenants_reviewer_gets_404_and_sees_no_claim(
    candidate: Case, reviewer: User
) -> None:
    tenants_exist("riverside")
    outsider = user_set_role(username="otto", role="reviewer", tenants=["riverside"])
    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    otto = csrf_client(outsider)
    for action in ("take", "release"):
        assert _claim(otto, candidate, action).status_code == 404
    unknown = _post(
        otto, CLAIM, {"item": "case:" + "0" * 64, "tenant": "teahouse", "action": "take"}
    )
    assert unknown.status_code == 404
    assert (
        _post(otto, CLAIM, {"item": "nonsense", "tenant": "x", "action": "take"}).status_code == 404
    )
    queue = otto.get(reverse("experience:queue")).content.decode()
    assert "Claimed by" not in queue
    assert ReviewClaim.objects.get().holder == reviewer


def test_claims_need_post_a_token_and_a_signed_in_person(
    candidate: Case, reviewer: User, agent: User
) -> None:
    assert csrf_client(reviewer).get(CLAIM).status_code == 405
    no_token = csrf_client(reviewer).post(
        CLAIM, {"item": candidate.id, "tenant": "teahouse", "action": "take"}
    )
    assert no_token.status_code == 403
    assert _claim(csrf_client(None), candidate).status_code == 302
    assert _claim(csrf_client(agent), candidate).status_code == 403
    assert not ReviewClaim.objects.exists()


def test_the_dashboard_shows_what_waits_on_the_user(
    candidate: Case, operator: User, reviewer: User, second_reviewer: User
) -> None:
    empty = csrf_client(reviewer).get(reverse("home")).content.decode()
    assert "Waiting on you" in empty and "Nothing waits on you" in empty

    claims.claim_take(actor=reviewer, item_id=candidate.id, tenant="teahouse")
    approved = approved_case(submitter=operator, reviewer=reviewer, incident="INC-MINE")
    other = approved_case(submitter=operator, reviewer=second_reviewer, incident="INC-THEIRS")
    for case in (approved, other):
        ReReview.objects.create(
            item_id=case.id,
            item_type="case",
            tenant="teahouse",
            title=case.title,
            reason=ReReviewReason.UNUSED,
            detected_at=clock.now(),
        )
    html = csrf_client(reviewer).get(reverse("home")).content.decode()
    waiting = html.split('id="waiting-on-you"', 1)[1].split("</section>", 1)[0]
    claimed = waiting.split('data-waiting="claimed"', 1)[1].split("</ul>", 1)[0]
    assert candidate.get_absolute_url() in claimed and candidate.title in claimed
    rereviews = waiting.split('data-waiting="rereviews"', 1)[1].split("</ul>", 1)[0]
    assert approved.digest in rereviews and other.digest not in rereviews
    # Ravi holds nothing, and approved only the other case.
    theirs = csrf_client(second_reviewer).get(reverse("home")).content.decode()
    section = theirs.split('id="waiting-on-you"', 1)[1].split("</section>", 1)[0]
    assert 'data-waiting="claimed"' not in section and other.digest in section


@pytest.mark.usefixtures("knowledge")
def test_an_operator_claims_a_draft_document_and_another_operator_sees_it(
    operator: User, make_user: Any
) -> None:
    from knowledge.models import Document

    draft = Document.objects.get(doc_key="case-a-draft", version=1)
    olivia = csrf_client(operator)
    assert 'id="claim-take"' in olivia.get(draft.get_absolute_url()).content.decode()
    response = _post(
        olivia, CLAIM, {"item": draft.public_id, "tenant": draft.tenant, "action": "take"}
    )
    assert response.status_code == 303 and response["Location"] == draft.get_absolute_url()
    other = csrf_client(make_user("otis", "operator"))
    page = other.get(draft.get_absolute_url()).content.decode()
    assert 'data-claim-holder="olivia"' in page and 'id="take-over"' in page
