"""Writing documents from the console pages: create, new version, approve or reject, revoke.

The rules are the ones documents follow everywhere (a reason, four eyes, an impact preview before
revoking and the impact stored with it); these tests drive them through the pages.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experience.core.models import ItemType
from experience.runs.models import Reference, RevocationImpact
from knowledge.forms import requirements_parse, requirements_text
from knowledge.models import Document
from knowledge.services import documents_import
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def form_data(**overrides: str) -> dict[str, str]:
    """The new-document form as a person fills it in, times in the console's zone (Shanghai)."""
    data = {
        "doc_key": "rule-new",
        "title": "新活动优惠券使用条件",
        "kind": "rule",
        "tenant": settings.DEMO_TENANT,
        "brand": settings.DEMO_BRAND,
        "campaign": "campaign-new",
        "stores": "store-002, store-001",
        "rule_key": "coupon-new",
        "source": "ops://rulebook/new",
        "text": "新活动的优惠券仅限小程序下单、满30元使用。",
        "requirements": "channel: miniapp\nbasket_cents: >= 3000",
        "valid_from": "2026-10-01T00:00",
        "valid_to": "2026-11-01T00:00",
        "published_at": "2026-09-30T09:00",
    }
    data.update(overrides)
    return data


def posted(form: Any) -> dict[str, str]:
    """What the page posts for ``form`` as rendered: each field's value as its input shows it."""
    data = {}
    for name in form.fields:
        field = form[name]
        shown = field.field.widget.format_value(field.value())
        data[name] = (shown[0] if shown else "") if isinstance(shown, list) else (shown or "")
    return data


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def second_operator(make_user: Callable[[str, str], User]) -> User:
    return make_user("otto", Role.OPERATOR)


@pytest.fixture
def draft(operator: User) -> Document:
    documents_import(items=[document(approved=False)], actor=operator)
    return Document.objects.get(doc_key="rule-x")


@pytest.fixture
def approved(operator: User) -> Document:
    documents_import(items=[document(requirements={"channel": ["miniapp"]})], actor=operator)
    return Document.objects.get(doc_key="rule-x")


def url(name: str, doc: Document) -> str:
    return reverse(f"knowledge:{name}", args=[doc.doc_key, doc.version])


# --- creating ------------------------------------------------------------------------------------


def test_an_operator_creates_a_draft_from_the_form(operator: User, settings: Any) -> None:
    settings.TIME_ZONE = "Asia/Shanghai"
    response = logged_in(operator).post(reverse("knowledge:document-new"), form_data())

    saved = Document.objects.get(doc_key="rule-new")
    assert response.status_code == 303 and response["Location"] == saved.get_absolute_url()
    assert (saved.version, saved.status, saved.created_by) == (1, "draft", operator)
    assert saved.requirements == {"channel": ["miniapp"], "basket_cents": {"min": 3000}}
    assert sorted(saved.store_rows.values_list("store", flat=True)) == ["store-001", "store-002"]
    # Times typed in Shanghai are the instants 8 hours earlier in UTC.
    assert saved.valid_from == datetime(2026, 9, 30, 16, 0, tzinfo=UTC)
    assert saved.published_at == datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
    assert Event.objects.filter(action=Action.DOCUMENT_CREATE, target="doc:rule-new@1").exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"doc_key": "Not A Slug"}, "doc_key"),
        ({"title": ""}, "title"),
        ({"stores": " , "}, "stores"),
        ({"valid_to": "2026-09-01T00:00"}, "valid_to"),
        ({"valid_from": "yesterday"}, "valid_from"),
        ({"requirements": "channel miniapp"}, "requirements"),
        ({"requirements": "Channel: miniapp"}, "requirements"),
        ({"requirements": "basket_cents: 5000..3000"}, "requirements"),
        ({"published_at": "2026-13-01T00:00"}, "published_at"),
        ({"tenant": "bad tenant!"}, "tenant"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    operator: User, changes: dict[str, str], field: str
) -> None:
    response = logged_in(operator).post(reverse("knowledge:document-new"), form_data(**changes))

    assert response.status_code == 422
    assert field in response.context["form"].errors
    assert not Document.objects.exists()


def test_a_key_in_use_is_refused_on_the_key_field(operator: User, draft: Document) -> None:
    response = logged_in(operator).post(
        reverse("knowledge:document-new"), form_data(doc_key="rule-x")
    )

    assert response.status_code == 422
    assert "already exists" in " ".join(response.context["form"].errors["doc_key"])
    assert Document.objects.filter(doc_key="rule-x").count() == 1


def test_an_operator_limited_to_a_tenant_may_not_write_for_another(db: None) -> None:
    limited = user_set_role(username="tina", role=Role.OPERATOR, tenants=["teahouse"])
    response = logged_in(limited).post(
        reverse("knowledge:document-new"), form_data(tenant="coffeehouse")
    )

    assert response.status_code == 422
    assert "tenant" in response.context["form"].errors
    assert not Document.objects.exists()


def test_the_form_offers_the_users_own_tenant(db: None) -> None:
    limited = user_set_role(username="tina", role=Role.OPERATOR, tenants=["teahouse"])
    page = logged_in(limited).get(reverse("knowledge:document-new"))
    assert page.context["form"].initial["tenant"] == "teahouse"


# --- new versions --------------------------------------------------------------------------------


def test_the_new_version_form_starts_from_the_version_it_is_opened_on(
    operator: User, approved: Document
) -> None:
    form = logged_in(operator).get(url("document-new-version", approved)).context["form"]

    assert "doc_key" not in form.fields
    assert form.initial["requirements"] == "channel: miniapp"
    assert form.initial["stores"] == "store-100"
    assert form.initial["published_at"] is None
    assert form.initial["valid_from"] == approved.valid_from


def test_a_new_version_is_the_next_draft_and_the_old_one_is_unchanged(
    operator: User, approved: Document
) -> None:
    client = logged_in(operator)
    data = {
        **posted(client.get(url("document-new-version", approved)).context["form"]),
        "requirements": "channel: miniapp, pos",
    }
    response = client.post(url("document-new-version", approved), data)

    new = Document.objects.get(doc_key="rule-x", version=2)
    assert response.status_code == 303 and response["Location"] == new.get_absolute_url()
    assert new.status == "draft" and new.requirements == {"channel": ["miniapp", "pos"]}
    approved.refresh_from_db()
    assert approved.status == "approved" and approved.requirements == {"channel": ["miniapp"]}


def test_a_new_version_that_changes_nothing_is_refused(operator: User, approved: Document) -> None:
    client = logged_in(operator)
    data = posted(client.get(url("document-new-version", approved)).context["form"])
    response = client.post(url("document-new-version", approved), data)

    assert response.status_code == 422
    assert "nothing changed" in " ".join(response.context["form"].non_field_errors())
    assert Document.objects.count() == 1


# --- approving and rejecting ---------------------------------------------------------------------


def review(client: Client, doc: Document, decision: str, reason: str) -> Any:
    return client.post(url("document-review", doc), {"decision": decision, "reason": reason})


def unmet(response: Any) -> list[str]:
    return [condition.name for condition in response.context["review_errors"]]


def test_the_author_may_not_approve_their_own_version(operator: User, draft: Document) -> None:
    response = review(logged_in(operator), draft, "approve", "checked against the rulebook")

    assert response.status_code == 422 and unmet(response) == ["own_submission"]
    draft.refresh_from_db()
    assert draft.status == "submitted"


def test_approving_needs_a_reason(second_operator: User, draft: Document) -> None:
    response = review(logged_in(second_operator), draft, "approve", "  ")

    assert response.status_code == 422 and unmet(response) == ["reason_required"]
    draft.refresh_from_db()
    assert draft.status == "submitted"


def test_another_operator_approves_with_a_reason(second_operator: User, draft: Document) -> None:
    response = review(logged_in(second_operator), draft, "approve", "matches the rulebook")

    assert response.status_code == 303
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == ("approved", second_operator)
    event = Event.objects.get(action=Action.DOCUMENT_APPROVE, target=draft.public_id)
    assert event.reason == "matches the rulebook" and event.actor == second_operator


def test_a_rejected_draft_is_withdrawn_with_its_reason(
    second_operator: User, draft: Document
) -> None:
    response = review(logged_in(second_operator), draft, "reject", "wrong campaign")

    assert response.status_code == 303
    draft.refresh_from_db()
    assert draft.status == "revoked" and draft.revoked_reason == "wrong campaign"


def test_an_approved_version_is_not_rejected_but_revoked(
    second_operator: User, approved: Document
) -> None:
    response = review(logged_in(second_operator), approved, "reject", "changed my mind")

    assert response.status_code == 422 and unmet(response) == ["already_approved"]
    approved.refresh_from_db()
    assert approved.status == "approved"


def test_reviewers_may_not_approve_documents(reviewer: User, draft: Document) -> None:
    assert review(logged_in(reviewer), draft, "approve", "fine").status_code == 403


def test_the_live_checklist_follows_the_reason(second_operator: User, draft: Document) -> None:
    client = logged_in(second_operator)
    empty = client.get(url("document-checklist", draft), headers=HTMX).content.decode()
    typed = client.get(
        url("document-checklist", draft) + "?reason=ok", headers=HTMX
    ).content.decode()

    assert 'data-condition="reason_required"' in empty and "1 condition unmet" in empty
    assert "reason_required" not in typed and "Every condition is met" in typed


def test_the_checklist_shows_the_author_the_four_eyes_rule(operator: User, draft: Document) -> None:
    page = logged_in(operator).get(draft.get_absolute_url()).content.decode()
    assert 'data-condition="own_submission"' in page


# --- revoking ------------------------------------------------------------------------------------


@pytest.fixture
def cited(approved: Document) -> Document:
    """The approved version, read by a run."""
    Reference.objects.create(
        run_id="run-read-rule-x",
        item_id=approved.public_id,
        item_type=ItemType.DOCUMENT,
        read_at=datetime(2026, 9, 18, 6, 0, tzinfo=UTC),
    )
    return approved


def test_the_revoke_page_previews_the_runs_that_read_it(
    second_operator: User, cited: Document
) -> None:
    page = logged_in(second_operator).get(url("document-revoke", cited))

    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="preview-runs"' in html and "run-read-rule-x" in html
    cited.refresh_from_db()
    assert cited.status == "approved"


def test_revoking_needs_a_reason(second_operator: User, cited: Document) -> None:
    response = logged_in(second_operator).post(url("document-revoke", cited), {"reason": ""})

    assert response.status_code == 422
    assert [c.name for c in response.context["errors"]] == ["reason_required"]
    cited.refresh_from_db()
    assert cited.status == "approved"


def test_revoking_stores_the_impact_and_the_page_shows_it(
    second_operator: User, cited: Document
) -> None:
    client = logged_in(second_operator)
    response = client.post(
        url("document-revoke", cited),
        {"reason": "campaign cancelled", "previewed_runs": "run-read-rule-x"},
        follow=True,
    )

    cited.refresh_from_db()
    assert cited.status == "revoked" and cited.revoked_reason == "campaign cancelled"
    stored = RevocationImpact.objects.get(item_id=cited.public_id)
    assert stored.runs == ["run-read-rule-x"]
    html = response.content.decode()
    assert "Revocation impact (stored)" in html and "run-read-rule-x" in html
    messages = [str(m) for m in response.context["messages"]]
    assert any("1 run(s) had read it" in m for m in messages)
    assert not any("changed between your preview" in m for m in messages)


def test_revoking_warns_when_the_impact_changed_since_the_preview(
    second_operator: User, cited: Document
) -> None:
    response = logged_in(second_operator).post(
        url("document-revoke", cited), {"reason": "campaign cancelled"}, follow=True
    )
    assert any("changed between your preview" in str(m) for m in response.context["messages"])


def test_a_revoked_version_is_not_revoked_again(second_operator: User, cited: Document) -> None:
    client = logged_in(second_operator)
    client.post(url("document-revoke", cited), {"reason": "first"})
    response = client.post(url("document-revoke", cited), {"reason": "second"})

    assert response.status_code == 422
    assert [c.name for c in response.context["errors"]] == ["already_revoked"]
    assert Event.objects.filter(action=Action.DOCUMENT_REVOKE).count() == 1


def test_a_document_of_another_tenant_is_not_found(db: None, approved: Document) -> None:
    other = user_set_role(username="cora", role=Role.OPERATOR, tenants=["coffeehouse"])
    client = logged_in(other)
    for name in ("document-revoke", "document-new-version"):
        assert client.get(url(name, approved)).status_code == 404
    assert review(client, approved, "approve", "x").status_code == 404


# --- requirements, readable ----------------------------------------------------------------------


def test_requirements_are_a_table_of_conditions_and_allowed_values(
    operator: User, knowledge_base: None
) -> None:
    html = logged_in(operator).get(reverse("knowledge:document-detail", args=["rule-a", 1]))
    page = html.content.decode()

    assert '<th scope="col">Condition</th><th scope="col">Allowed values</th>' in page
    assert "milk-tea or fruit-tea" in page
    assert "at least 3000" in page
    assert "[&#x27;miniapp&#x27;]" not in page and "['miniapp']" not in page


@pytest.mark.parametrize(
    "requirements",
    [
        {},
        {"channel": ["miniapp", "pos"]},
        {"basket_cents": {"min": 3000}},
        {"basket_cents": {"max": 5000}},
        {"basket_cents": {"min": 3000, "max": 5000}},
        {"product": ["001", 7, "a,b"]},
    ],
)
def test_requirements_text_reads_back_as_the_same_requirements(
    requirements: dict[str, Any],
) -> None:
    assert requirements_parse(requirements_text(requirements)) == requirements


def test_a_condition_given_twice_is_refused() -> None:
    with pytest.raises(ValidationFailure, match="line 2: channel is given twice"):
        requirements_parse("channel: miniapp\nchannel: pos")


def test_favicon_is_served() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("console/favicon.svg")


def test_the_admin_asks_to_confirm_a_revocation_with_its_impact(
    second_operator: User, cited: Document
) -> None:
    page = logged_in(second_operator).post(
        "/admin/knowledge/document/",
        {"action": "revoke_selected", "_selected_action": [str(cited.pk)]},
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert "Runs that read it, for follow-up:" in html and "run-read-rule-x" in html
    cited.refresh_from_db()
    assert cited.status == "approved"


def test_the_form_offers_the_scope_values_in_use_of_the_users_tenants(
    operator: User, draft: Document
) -> None:
    documents_import(
        items=[document(doc_key="rule-coffee", tenant="coffeehouse", brand="bean-co")],
        actor=operator,
    )
    limited = user_set_role(username="tina", role=Role.OPERATOR, tenants=[settings.DEMO_TENANT])
    html = logged_in(limited).get(reverse("knowledge:document-new")).content.decode()

    brands = html.split('<datalist id="id_brand-options">', 1)[1].split("</datalist>", 1)[0]
    stores = html.split('<datalist id="id_stores-options">', 1)[1].split("</datalist>", 1)[0]
    assert brands == f'<option value="{settings.DEMO_BRAND}"></option>'
    assert stores == '<option value="store-100"></option>'
    assert "bean-co" not in html and "coffeehouse" not in html


def test_the_document_page_asks_as_many_queries_however_many_versions_and_revocations(
    operator: User, second_operator: User
) -> None:
    def queries(doc_key: str, versions: int) -> int:
        documents_import(
            items=[
                document(doc_key=doc_key, version=n, text=f"第{n}版。", revoked=n > 1)
                for n in range(1, versions + 1)
            ],
            actor=operator,
        )
        client = logged_in(second_operator)
        page = reverse("knowledge:document-detail", args=[doc_key, versions])
        client.get(page)  # the session and the permission cache are warm
        with CaptureQueriesContext(connection) as captured:
            assert client.get(page).status_code == 200
        return len(captured)

    assert queries("rule-few", 2) == queries("rule-many", 6)


def test_a_new_version_keeps_its_bases_validity_to_the_second(operator: User) -> None:
    documents_import(
        items=[document(valid_from="2026-09-01T00:00:30+08:00", valid_to=None)], actor=operator
    )
    base = Document.objects.get(doc_key="rule-x")
    client = logged_in(operator)
    data = {**posted(client.get(url("document-new-version", base)).context["form"]), "text": "新"}
    assert client.post(url("document-new-version", base), data).status_code == 303

    assert Document.objects.get(doc_key="rule-x", version=2).valid_from == base.valid_from
