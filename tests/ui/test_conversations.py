"""The conversation on an item's page: request changes, revise, threads (issue items 1, 2, 11
and the decision bar of 9): CSRF on every write, 403 for a role that may not, 404 for another
tenant's item, and what the page says."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.core.models import Status
from reviewconsole.models import ChangeRequest, Event, ReviewThread
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.ui.conftest import csrf_client, csrf_token
from tests.ui.factories import case_data

pytestmark = pytest.mark.django_db


def _url(name: str, case: Case) -> str:
    return reverse(f"experience:{name}", args=[case.digest])


def _post(client: Client, url: str, data: dict[str, str]) -> Any:
    return client.post(url, {**data, "csrfmiddlewaretoken": csrf_token(client)})


def test_request_changes_needs_the_csrf_token(candidate: Case, reviewer: User) -> None:
    client = csrf_client(reviewer)
    response = client.post(_url("case-changes", candidate), {"note": "fix"})
    assert response.status_code == 403
    assert not ChangeRequest.objects.exists()


def test_an_operator_may_not_request_changes_and_another_tenant_gets_404(
    candidate: Case, make_user: object
) -> None:
    other_operator = user_set_role(username="otto", role=Role.OPERATOR)
    response = _post(csrf_client(other_operator), _url("case-changes", candidate), {"note": "x"})
    assert response.status_code == 403
    outsider = user_set_role(username="tess", role=Role.REVIEWER, tenants=["milkbar"])
    client = csrf_client(outsider)
    for name in ("case-changes", "case-threads", "case-revise"):
        assert (
            _post(
                client, _url(name, candidate), {"note": "x", "op": "open", "body": "x"}
            ).status_code
            == 404
        )
    assert client.get(_url("case-revise", candidate)).status_code == 404
    assert not ChangeRequest.objects.exists() and not ReviewThread.objects.exists()


def test_sent_back_the_page_says_so_and_the_submitter_revises(
    candidate: Case, reviewer: User, operator: User, second_reviewer: User
) -> None:
    client = csrf_client(reviewer)
    response = _post(
        client,
        _url("case-changes", candidate),
        {"note": "Which store list?", "anchor": "evidence:diagnosis/0"},
    )
    assert response.status_code == 303
    page = client.get(candidate.get_absolute_url()).content.decode()
    assert 'id="returned-note"' in page and "Which store list?" in page
    assert 'href="#thread-' in page  # beside the evidence item it is anchored to
    assert 'id="open-threads-warning"' in page

    submitter = csrf_client(operator)
    form = submitter.get(_url("case-revise", candidate))
    assert form.status_code == 200
    data = json.loads(form.context["content"])
    data["title"] = "二号店优惠券：门店列表漏配（修订）"
    response = _post(submitter, _url("case-revise", candidate), {"content": json.dumps(data)})
    assert response.status_code == 303
    revision = Case.objects.get(title=data["title"])
    assert response["Location"] == revision.get_absolute_url()
    candidate.refresh_from_db()
    assert candidate.status == Status.SUPERSEDED

    page = csrf_client(second_reviewer).get(revision.get_absolute_url()).content.decode()
    assert 'id="review-rounds"' in page and 'data-round="2"' in page
    assert "Which store list?" in page


def test_a_bad_revision_says_the_field_and_saves_nothing(candidate: Case, operator: User) -> None:
    client = csrf_client(operator)
    before = (Case.objects.count(), Event.objects.count())
    response = _post(client, _url("case-revise", candidate), {"content": "{not json"})
    assert response.status_code == 422 and "content" in response.content.decode()
    data = json.loads(client.get(_url("case-revise", candidate)).context["content"])
    data["title"] = ""
    response = _post(client, _url("case-revise", candidate), {"content": json.dumps(data)})
    assert response.status_code == 422 and "<strong>title</strong>" in response.content.decode()
    assert (Case.objects.count(), Event.objects.count()) == before


def test_another_operator_may_not_revise(candidate: Case) -> None:
    other_operator = user_set_role(username="otto", role=Role.OPERATOR)
    data = case_data(incident="INC-UI-CANDIDATE", title="moved")
    client = csrf_client(other_operator)
    assert client.get(_url("case-revise", candidate)).status_code == 403
    response = _post(client, _url("case-revise", candidate), {"content": json.dumps(data)})
    assert response.status_code == 403
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE


def test_threads_are_opened_resolved_and_reopened_from_the_page(
    candidate: Case, reviewer: User, operator: User
) -> None:
    client = csrf_client(reviewer)
    response = _post(
        client,
        _url("case-threads", candidate),
        {"op": "open", "anchor": "section:diagnosis", "body": "Is the cause proven?"},
    )
    thread = ReviewThread.objects.get()
    assert response["Location"].endswith(f"#thread-{thread.pk}")
    _post(
        csrf_client(operator),
        _url("case-threads", candidate),
        {"op": "resolve", "thread": str(thread.pk)},
    )
    thread.refresh_from_db()
    assert thread.status == "resolved"
    page = client.get(candidate.get_absolute_url()).content.decode()
    assert "data-reopen" in page and 'id="open-threads-warning"' not in page
    _post(client, _url("case-threads", candidate), {"op": "reopen", "thread": str(thread.pk)})
    thread.refresh_from_db()
    assert thread.status == "open"


def test_a_case_without_diagnosis_evidence_says_it_cannot_be_approved(
    operator: User, reviewer: User
) -> None:
    data = case_data(incident="INC-UI-BARE")
    data["diagnosis"]["evidence"] = []
    from experience.cases.schema import parse_case
    from experience.cases.services import case_submit

    case, _ = case_submit(content=parse_case(data), actor=operator)
    page = csrf_client(reviewer).get(case.get_absolute_url()).content.decode()
    assert 'id="blocked-note"' in page
    assert 'data-condition="no_checked_diagnosis_evidence"' in page.split('id="blocked-note"')[1]
    # "c" goes to what unblocks it: the request-changes form, opened.
    assert "data-unblocks" in page and 'id="request-changes" open' in page


def test_a_case_with_diagnosis_evidence_is_not_blocked(candidate: Case, reviewer: User) -> None:
    page = csrf_client(reviewer).get(candidate.get_absolute_url()).content.decode()
    assert 'id="blocked-note"' not in page and "data-unblocks" not in page
    assert 'class="decision-bar"' in page and 'href="#review-panel"' in page
