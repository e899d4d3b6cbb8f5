"""The Django admin's document pages: every role that may open them gets a page, never an error."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from knowledge.models import Document
from knowledge.services import documents_import
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db


def client_for(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def stored(operator: User) -> Document:
    documents_import(items=[document(approved=False)], actor=operator)
    return Document.objects.get()


@pytest.mark.parametrize("role_fixture", ["reviewer", "admin_user", "operator"])
def test_the_change_page_opens_for_every_role_that_may_view_documents(
    request: pytest.FixtureRequest, stored: Document, role_fixture: str
) -> None:
    response = client_for(request.getfixturevalue(role_fixture)).get(
        f"/admin/knowledge/document/{stored.pk}/change/"
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "活动X优惠券使用条件" in page and "store-100" in page


@pytest.mark.parametrize("role_fixture", ["reviewer", "admin_user"])
def test_view_only_roles_are_offered_no_lifecycle_actions(
    request: pytest.FixtureRequest, stored: Document, role_fixture: str
) -> None:
    client = client_for(request.getfixturevalue(role_fixture))
    listing = client.get("/admin/knowledge/document/").content.decode()
    assert "doc:rule-x@1" in listing and "approve_selected" not in listing

    client.post(
        "/admin/knowledge/document/",
        {
            "action": "approve_selected",
            "_selected_action": [str(stored.pk)],
            "confirm": "yes",
            "reason": "looks fine",
        },
    )
    stored.refresh_from_db()
    assert not stored.approved


def test_operators_are_offered_both_actions(stored: Document, operator: User) -> None:
    listing = client_for(operator).get("/admin/knowledge/document/").content.decode()
    assert "approve_selected" in listing and "revoke_selected" in listing
