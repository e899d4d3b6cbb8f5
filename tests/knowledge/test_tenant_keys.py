"""Document keys are per tenant (issue 23, items 1 and 2): two tenants with identical keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from knowledge.models import Document
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import (
    CONTENT_DIFFERS,
    document_save_new_version,
    documents_import,
)
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import NOT_IN_TENANT
from tests.knowledge.conftest import document
from tests.knowledge.test_document_review import _change_form

pytestmark = pytest.mark.django_db

A = settings.DEMO_TENANT
B = "riverside"
A_TEXT = "甲方机密：会员券仅限周三使用。"
B_TEXT = "乙方规则：会员券每天可用。"


def rule(tenant: str, version: int, text: str, **overrides: Any) -> dict[str, Any]:
    return document(doc_key="rule-a", version=version, tenant=tenant, text=text, **overrides)


def client_for(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def alice(db: None) -> User:
    return user_set_role(username="alice", role=Role.OPERATOR, tenants=[A])


@pytest.fixture
def bob(db: None) -> User:
    return user_set_role(username="bob", role=Role.OPERATOR, tenants=[B])


@pytest.fixture
def becky(db: None) -> User:
    return user_set_role(username="becky", role=Role.REVIEWER, tenants=[B])


@pytest.fixture
def only_a(operator: User) -> Document:
    documents_import(items=[rule(A, 1, A_TEXT, approved=False)], actor=operator)
    return Document.objects.get()


@pytest.fixture
def two_tenants(operator: User, bob: User) -> None:
    """A has rule-a v1 and v2; B imports its own rule-a v1 and v50 (same keys, other text)."""
    documents_import(items=[rule(A, 1, A_TEXT), rule(A, 2, A_TEXT + "第二版")], actor=operator)
    documents_import(items=[rule(B, 1, B_TEXT), rule(B, 50, B_TEXT + "五十版")], actor=bob)


# --- item 1: a new version keeps its document's tenant --------------------------------------


@pytest.mark.parametrize("who", ["alice", "operator"])
def test_the_admin_refuses_moving_a_document_to_another_tenant(
    request: pytest.FixtureRequest, only_a: Document, who: str, settings: Any
) -> None:
    settings.TIME_ZONE = "UTC"
    user = request.getfixturevalue(who)
    response = client_for(user).post(
        f"/admin/knowledge/document/{only_a.pk}/change/", _change_form(only_a, tenant=B)
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["tenant"]
    assert list(Document.objects.values_list("tenant", "version")) == [(A, 1)]


def test_the_service_refuses_a_new_version_in_another_tenant(
    only_a: Document, operator: User
) -> None:
    with pytest.raises(PermissionRefused) as refused:
        document_save_new_version(base=only_a, changes={"tenant": B}, actor=operator)
    assert refused.value.unmet == NOT_IN_TENANT
    assert Document.objects.count() == 1


def test_the_console_form_refuses_another_tenant_for_a_deployment_wide_operator(
    only_a: Document, operator: User
) -> None:
    client = client_for(operator)
    url = f"/knowledge/{A}/rule-a/v1/new-version/"
    form = client.get(url).context["form"]
    data = {
        name: ("" if value is None else value)
        for name, value in form.initial.items()
        if not isinstance(value, datetime)
    }
    data.update(
        tenant=B,
        valid_from=only_a.valid_from.astimezone(UTC).strftime("%Y-%m-%dT%H:%M"),
        text="换租户的新版本。",
    )
    response = client.post(url, data)

    assert response.status_code == 422
    assert "tenant" in response.context["form"].errors
    assert Document.objects.count() == 1


# --- item 2: keys are per tenant ------------------------------------------------------------


def test_b_importing_a_key_only_a_has_creates_its_own(only_a: Document, bob: User) -> None:
    result = documents_import(items=[rule(B, 1, B_TEXT)], actor=bob)
    assert result.created == ["doc:rule-a@1"]
    assert set(Document.objects.values_list("tenant", "version")) == {(A, 1), (B, 1)}

    again = documents_import(items=[rule(B, 1, B_TEXT)], actor=bob)
    assert again.unchanged == ["doc:rule-a@1"] and not again.created

    with pytest.raises(ValidationFailure) as failure:
        documents_import(items=[rule(B, 1, B_TEXT + "改")], actor=bob)
    assert CONTENT_DIFFERS in failure.value.message


@pytest.mark.parametrize("who", ["bob", "becky"])
def test_b_sees_only_its_own_versions_and_diffs(
    request: pytest.FixtureRequest, two_tenants: None, who: str
) -> None:
    client = client_for(request.getfixturevalue(who))

    page = client.get("/knowledge/rule-a/v50/?against=2")
    assert page.status_code == 200
    html = page.content.decode()
    assert A_TEXT not in html and B_TEXT in html
    assert [v.version for v in page.context["versions"]] == [50, 1]
    assert page.context["against"] == 1

    diff = client.get("/knowledge/rule-a/v50/?against=1").content.decode()
    assert A_TEXT not in diff

    own = client.get("/knowledge/rule-a/v1/")
    assert own.status_code == 200 and own.context["document"].tenant == B


def test_another_tenants_version_is_answered_as_an_unknown_one(
    two_tenants: None, bob: User
) -> None:
    client = client_for(bob)
    unknown = client.get("/knowledge/rule-zz/v2/")
    assert unknown.status_code == 404
    assert client.get("/knowledge/rule-a/v2/").status_code == 404
    assert client.get(f"/knowledge/{A}/rule-a/v2/").status_code == 404
    assert client.get(f"/knowledge/{A}/rule-a/v1/").status_code == 404


def test_a_deployment_wide_user_chooses_the_tenant(two_tenants: None, operator: User) -> None:
    client = client_for(operator)
    choice = client.get("/knowledge/rule-a/v1/")
    assert choice.status_code == 200
    html = choice.content.decode()
    assert f"/knowledge/{A}/rule-a/v1/" in html and f"/knowledge/{B}/rule-a/v1/" in html

    a_page = client.get(f"/knowledge/{A}/rule-a/v1/")
    assert a_page.context["document"].tenant == A
    assert [v.version for v in a_page.context["versions"]] == [2, 1]
    assert client.get("/knowledge/rule-a/v50/").context["document"].tenant == B


def test_search_returns_only_the_tenants_own_text(two_tenants: None, bob: User) -> None:
    context = KnowledgeContext(
        tenant=B,
        brand=settings.DEMO_BRAND,
        store="store-100",
        campaign="campaign-x",
        occurred_at=datetime(2026, 9, 10, tzinfo=UTC),
        known_at=datetime(2026, 9, 10, tzinfo=UTC),
    )
    result = search_knowledge("会员券", context, actor=bob)
    answered = json.dumps(result, ensure_ascii=False)
    assert result["evidence"] and "甲方" not in answered and "乙方" in answered
