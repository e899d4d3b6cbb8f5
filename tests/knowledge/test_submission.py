"""A version is saved as a draft and submitted for review apart: only a submitted version is in
reviewers' queue, a submission carries a change note and asks the operators who may approve it
(a mail in the outbox), and the pages mark which approved version is current."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.selectors import dashboard_counts
from curation.models import OutboxMail
from knowledge.models import Document
from knowledge.schema import parse_document
from knowledge.selectors import document_approvers, documents_visible
from knowledge.services import (
    CHANGE_NOTE_REQUIRED,
    NOT_SUBMITTED,
    DocumentReviewRefused,
    document_add,
    document_approve,
    document_review_unmet,
    document_save_new_version,
    document_submit,
)
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.knowledge.conftest import document
from tests.ui.conftest import csrf_client, csrf_token

NOW = datetime(2026, 9, 20, 2, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


def _user(name: str, role: str, tenants: list[str], email: str = "") -> User:
    user = user_set_role(username=name, role=role, password="correct-horse-battery-staple")
    user_set_role(username=name, role=role, tenants=tenants)
    if email:
        user.email = email
        user.save(update_fields=["email"])
    return user


@pytest.fixture
def author(db: None) -> User:
    return _user("olga", Role.OPERATOR, ["teahouse"], "olga@example.test")


@pytest.fixture
def approver(db: None) -> User:
    return _user("oscar", Role.OPERATOR, ["teahouse"], "oscar@example.test")


@pytest.fixture
def outsider(db: None) -> User:
    """An operator of another tenant: never asked, never sees the draft."""
    return _user("otto", Role.OPERATOR, ["coffeehouse"], "otto@example.test")


def _draft(author: User, **overrides: Any) -> Document:
    raw = document(approved=False, tenant="teahouse", **overrides)
    return document_add(content=parse_document(raw).content, actor=author)


def test_a_saved_draft_is_in_no_reviewers_queue(author: User, approver: User) -> None:
    draft = _draft(author)

    assert draft.status == "draft" and draft.submitted_at is None
    assert not documents_visible(approver, status="submitted").exists()
    counts = dashboard_counts(now=NOW, with_documents=True, user=approver)
    assert counts.draft_documents == 0
    assert NOT_SUBMITTED in document_review_unmet(
        document=draft, actor=approver, reason="looks right", approve=True
    )
    with pytest.raises(DocumentReviewRefused):
        document_approve(document=draft, actor=approver, reason="looks right")
    assert not Document.objects.filter(approved=True).exists()


def test_a_submitted_version_is_what_reviewers_see(author: User, approver: User) -> None:
    draft = _draft(author)

    submission = document_submit(document=draft, actor=author, change_note="first rulebook entry")

    draft.refresh_from_db()
    assert draft.status == "submitted" and draft.change_note == "first rulebook entry"
    assert (draft.submitted_at, draft.submitted_by) == (NOW, author)
    assert list(documents_visible(approver, status="submitted")) == [draft]
    assert dashboard_counts(now=NOW, with_documents=True, user=approver).draft_documents == 1
    event = Event.objects.get(action=Action.DOCUMENT_SUBMIT)
    assert (event.actor, event.target, event.reason) == (
        author,
        draft.public_id,
        "first rulebook entry",
    )
    assert submission.approvers == ["oscar"]
    document_approve(document=draft, actor=approver, reason="matches the rulebook")
    draft.refresh_from_db()
    assert draft.status == "approved"


@pytest.mark.parametrize("note", ["", "   "])
def test_a_submission_needs_a_change_note_and_writes_nothing_without(
    author: User, approver: User, note: str
) -> None:
    draft = _draft(author)

    with pytest.raises(ValidationFailure) as refused:
        document_submit(document=draft, actor=author, change_note=note)

    assert (refused.value.field, refused.value.message) == ("change_note", CHANGE_NOTE_REQUIRED)
    draft.refresh_from_db()
    assert draft.status == "draft"
    assert not Event.objects.filter(action=Action.DOCUMENT_SUBMIT).exists()
    assert not OutboxMail.objects.exists()


def test_the_submission_mails_the_approvers_of_its_tenant_only(
    author: User, approver: User, outsider: User, mailoutbox: list[Any]
) -> None:
    draft = _draft(author)
    document_submit(document=draft, actor=author, change_note="活动X只限小程序")

    mails = list(OutboxMail.objects.select_related("user"))
    # The approver of the tenant: not the author (four eyes), not another tenant's operator.
    assert [mail.user for mail in mails] == [approver]
    assert draft.public_id in mails[0].body and "活动X只限小程序" in mails[0].body
    # The outbox's send task (run at once in tests) delivers it.
    assert [mail.to for mail in mailoutbox] == [["oscar@example.test"]]


def test_only_its_author_submits_a_draft_once(author: User, approver: User) -> None:
    draft = _draft(author)
    with pytest.raises(ValidationFailure) as not_author:
        document_submit(document=draft, actor=approver, change_note="mine now")
    assert not_author.value.field == "document"

    document_submit(document=draft, actor=author, change_note="first")
    with pytest.raises(ValidationFailure) as twice:
        document_submit(document=draft, actor=author, change_note="again")
    assert twice.value.field == "document"
    assert Event.objects.filter(action=Action.DOCUMENT_SUBMIT).count() == 1


def test_another_tenants_operator_may_not_submit(author: User, outsider: User) -> None:
    draft = _draft(author)
    with pytest.raises(PermissionRefused):
        document_submit(document=draft, actor=outsider, change_note="not mine")
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_a_reviewer_may_not_submit(author: User, reviewer: User) -> None:
    draft = _draft(author)
    with pytest.raises(PermissionRefused):
        document_submit(document=draft, actor=reviewer, change_note="x")


def test_a_new_version_carries_its_change_note(author: User, approver: User) -> None:
    first = _draft(author)
    document_submit(document=first, actor=author, change_note="first")
    document_approve(document=first, actor=approver, reason="ok")

    second = document_save_new_version(
        base=first, changes={"text": "新版正文。"}, actor=author, change_note="delivery too"
    )

    assert (second.version, second.status, second.change_note) == (2, "draft", "delivery too")


# --- the pages ---------------------------------------------------------------------------------


def _submit_url(draft: Document) -> str:
    return reverse("knowledge:tenant-document-submit", args=draft.url_args)


def test_the_page_submits_with_the_change_note_and_names_the_approvers(
    author: User, approver: User
) -> None:
    draft = _draft(author)
    client = csrf_client(author)
    page = client.get(draft.get_absolute_url()).content.decode()
    assert 'id="document-submit"' in page and "a draft is in no reviewer" in page

    response = client.post(
        _submit_url(draft),
        {"change_note": "first rulebook entry", "csrfmiddlewaretoken": csrf_token(client)},
        follow=True,
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "is submitted for review" in html and "oscar" in html
    draft.refresh_from_db()
    assert draft.status == "submitted"


def test_the_page_refuses_a_submission_without_a_note_naming_the_field(author: User) -> None:
    draft = _draft(author)
    client = csrf_client(author)
    response = client.post(
        _submit_url(draft), {"change_note": " ", "csrfmiddlewaretoken": csrf_token(client)}
    )
    assert response.status_code == 422
    assert "change_note" in response.content.decode()
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_the_submission_needs_a_csrf_token(author: User) -> None:
    draft = _draft(author)
    response = csrf_client(author).post(_submit_url(draft), {"change_note": "first"})
    assert response.status_code == 403
    draft.refresh_from_db()
    assert draft.status == "draft"


def test_another_tenants_draft_answers_404(author: User, outsider: User) -> None:
    draft = _draft(author)
    client = csrf_client(outsider)
    response = client.post(
        _submit_url(draft), {"change_note": "x", "csrfmiddlewaretoken": csrf_token(client)}
    )
    assert response.status_code == 404


def test_a_past_valid_from_on_a_draft_says_when_it_applies(author: User) -> None:
    past = (NOW - timedelta(days=3)).isoformat()
    draft = _draft(author, valid_from=past, published_at=past)
    client = Client()
    client.force_login(author)
    note = "valid from is past: it will apply from approval"
    assert note in client.get(draft.get_absolute_url()).content.decode()
    assert note in client.get(reverse("knowledge:document-list")).content.decode()


def test_the_list_and_history_mark_current_and_superseded(author: User, approver: User) -> None:
    first = _draft(author)
    document_submit(document=first, actor=author, change_note="first")
    document_approve(document=first, actor=approver, reason="ok")
    second = document_save_new_version(base=first, changes={"text": "新版正文。"}, actor=author)
    document_submit(document=second, actor=author, change_note="second")
    document_approve(document=second, actor=approver, reason="ok")

    client = Client()
    client.force_login(approver)
    listing = client.get(reverse("knowledge:document-list")).content.decode()
    assert 'class="badge badge-current"' in listing
    assert 'class="badge badge-superseded"' in listing
    history = client.get(first.get_absolute_url()).content.decode()
    rows = history.split('id="versions-heading"', 1)[1]
    v2, v1 = rows.split("<tr>")[2:4]
    assert "badge-current" in v2 and "second" in v2
    assert "badge-superseded" in v1 and "first" in v1


def test_the_submission_reads_in_chinese(author: User) -> None:
    past = (NOW - timedelta(days=3)).isoformat()
    draft = _draft(author, valid_from=past, published_at=past)
    client = Client()
    client.force_login(author)
    html = client.get(draft.get_absolute_url(), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "提交审核" in html and "变更说明（提交时必填）" in html
    assert "生效时间已过：将自批准时起生效" in html and "草稿" in html
    assert "Submit for review" not in html


def test_the_approvers_are_read_in_a_fixed_number_of_queries(
    author: User, approver: User, outsider: User
) -> None:
    draft = _draft(author)
    with CaptureQueriesContext(connection) as few:
        assert [u.username for u in document_approvers(draft)] == ["oscar"]
    for n in range(4):
        _user(f"op{n}", Role.OPERATOR, ["teahouse"])
    with CaptureQueriesContext(connection) as many:
        assert len(document_approvers(draft)) == 5
    assert len(many) == len(few)
