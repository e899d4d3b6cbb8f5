"""Sending a draft knowledge document version back for changes, the new version that answers
it, and threads on its fields (issue items 1 and 2, documents)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from knowledge.models import Document
from knowledge.services import (
    document_approve,
    document_changes_request,
    document_save_new_version,
    document_subject,
    document_submit,
    documents_import,
)
from reviewconsole import conversations
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, ChangeRequest, Event
from reviewconsole.roles import Role
from tests.knowledge.conftest import document
from tests.ui.conftest import csrf_client, csrf_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(operator: User) -> Document:
    documents_import(items=[document(approved=False)], actor=operator)
    return Document.objects.get()


@pytest.fixture
def second_operator(make_user: Callable[..., User]) -> User:
    return make_user("oscar", Role.OPERATOR)


def test_another_operator_sends_a_draft_back_and_a_new_version_answers(
    draft: Document, operator: User, second_operator: User, reviewer: User
) -> None:
    request = document_changes_request(
        document=draft, actor=second_operator, note="State the store list.", anchor="field:text"
    )
    assert request.returned_to == operator
    assert list(conversations.changes_requested_of(operator)) == [request]
    revision = document_save_new_version(
        base=draft, changes={"text": draft.text + " Store 2 included."}, actor=operator
    )
    request.refresh_from_db()
    assert request.resubmitted_as == revision.public_id
    assert list(conversations.changes_requested_of(operator)) == []
    rounds = conversations.rounds_of(document_subject(revision))
    assert [r.item_id for r in rounds] == [draft.public_id, revision.public_id]
    resubmitted = Event.objects.get(action=Action.CHANGES_RESUBMIT)
    assert resubmitted.target == draft.public_id
    # The revision is its author's draft until submitted with what it changes.
    document_submit(document=revision, actor=operator, change_note="Store 2 named.")
    # The thread is still open: approving goes through and records it.
    document_approve(document=revision, actor=second_operator, reason="store list stated")
    approval = Event.objects.get(action=Action.DOCUMENT_APPROVE, target=revision.public_id)
    assert approval.details["open_threads"] == 1


def test_the_author_a_reviewer_and_an_approved_version_are_refused(
    draft: Document, operator: User, second_operator: User, reviewer: User
) -> None:
    with pytest.raises(ValidationFailure):
        document_changes_request(document=draft, actor=operator, note="mine")
    with pytest.raises(PermissionRefused):
        document_changes_request(document=draft, actor=reviewer, note="not an operator")
    document_approve(document=draft, actor=second_operator, reason="fine")
    with pytest.raises(ValidationFailure):
        document_changes_request(document=draft, actor=second_operator, note="too late")
    assert not ChangeRequest.objects.exists()


def test_a_draft_not_yet_submitted_is_not_sent_back(
    draft: Document, operator: User, second_operator: User
) -> None:
    """No reviewer has been asked about a draft its author has not submitted: it is not theirs
    to send back."""
    unsubmitted = document_save_new_version(
        base=draft, changes={"text": draft.text + " Draft only."}, actor=operator
    )
    with pytest.raises(ValidationFailure, match="not submitted"):
        document_changes_request(document=unsubmitted, actor=second_operator, note="early")
    assert not ChangeRequest.objects.exists()


def test_the_page_sends_back_with_csrf_and_answers_404_for_another_tenant(
    draft: Document, second_operator: User
) -> None:
    from django.urls import reverse

    from reviewconsole.services import user_set_role

    url = reverse("knowledge:tenant-document-changes", args=draft.url_args)
    client = csrf_client(second_operator)
    assert client.post(url, {"note": "x"}).status_code == 403  # no CSRF token
    response = client.post(
        url, {"note": "Name the stores.", "csrfmiddlewaretoken": csrf_token(client)}
    )
    assert response.status_code == 303
    page = client.get(draft.get_absolute_url()).content.decode()
    assert 'id="returned-note"' in page and "Name the stores." in page
    outsider = user_set_role(username="tara", role=Role.OPERATOR, tenants=["milkbar"])
    other = csrf_client(outsider)
    assert (
        other.post(url, {"note": "x", "csrfmiddlewaretoken": csrf_token(other)}).status_code == 404
    )
    assert ChangeRequest.objects.count() == 1
