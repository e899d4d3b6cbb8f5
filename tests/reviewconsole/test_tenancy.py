"""Tenant isolation: a user limited to one tenant never sees or changes another tenant's data."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.review import NO_SUCH_CASE
from experience.review.decisions import case_approve
from experience.review.documents import document_revoke
from knowledge.models import Document
from knowledge.services import documents_import
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.roles import Role
from reviewconsole.selectors import AUDIT_LOG_REFUSED, events_csv_rows, events_filtered
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import (
    NOT_IN_TENANT,
    NOT_IN_TENANT_MESSAGE,
    require_input_tenant,
    tenants_of,
)
from tests.helpers import run_json, tenants_exist
from tests.knowledge.conftest import document
from tests.ui.factories import SCOPE, submit_case

pytestmark = pytest.mark.django_db

OTHER = "other-co"


@pytest.fixture
def limited_reviewer(db: None) -> User:
    return user_set_role(username="lena", role=Role.REVIEWER, tenants=[SCOPE["tenant"]])


@pytest.fixture
def limited_operator(db: None) -> User:
    return user_set_role(username="otto", role=Role.OPERATOR, tenants=[SCOPE["tenant"]])


@pytest.fixture
def two_tenants(operator: User) -> dict[str, Any]:
    """A candidate case and a document in the demo tenant and in another tenant."""
    own = submit_case(operator, incident="INC-OWN")
    foreign = submit_case(operator, incident="INC-FOREIGN", scope={**SCOPE, "tenant": OTHER})
    documents_import(
        items=[document(doc_key="own-rule"), document(doc_key="foreign-rule", tenant=OTHER)],
        actor=operator,
    )
    return {
        "own": own,
        "foreign": foreign,
        "own_doc": Document.objects.get(doc_key="own-rule"),
        "foreign_doc": Document.objects.get(doc_key="foreign-rule"),
    }


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def digest(case: Case) -> str:
    return case.id.removeprefix("case:")


def test_add_user_sets_and_clears_tenant_limits() -> None:
    tenants_exist("a", "b")
    status, _ = run_json("add_user", "tia", "--role", "reviewer", "--tenant", "a", "--tenant", "b")
    assert status == 0
    assert tenants_of(User.objects.get(username="tia")) == frozenset({"a", "b"})

    run_json("add_user", "tia", "--role", "reviewer")  # no tenant flags: limits unchanged
    assert tenants_of(User.objects.get(username="tia")) == frozenset({"a", "b"})

    run_json("add_user", "tia", "--role", "reviewer", "--all-tenants")
    assert tenants_of(User.objects.get(username="tia")) is None


def test_a_placeholder_tenant_is_refused() -> None:
    status, result = run_json("add_user", "tia", "--role", "reviewer", "--tenant", "*")
    assert status != 0 and result["field"] == "tenant"


def test_queue_lists_only_the_users_tenant(
    limited_reviewer: User, two_tenants: dict[str, Any]
) -> None:
    page = client_for(limited_reviewer).get(reverse("experience:queue")).content.decode()

    assert "INC-OWN" in page
    assert "INC-FOREIGN" not in page


def test_another_tenants_case_does_not_exist(
    limited_reviewer: User, two_tenants: dict[str, Any]
) -> None:
    client = client_for(limited_reviewer)
    own = client.get(reverse("experience:case-detail", args=[digest(two_tenants["own"])]))
    foreign = client.get(reverse("experience:case-detail", args=[digest(two_tenants["foreign"])]))

    assert own.status_code == 200
    assert foreign.status_code == 404


def test_deployment_wide_reviewer_sees_both(reviewer: User, two_tenants: dict[str, Any]) -> None:
    client = client_for(reviewer)
    for case in (two_tenants["own"], two_tenants["foreign"]):
        assert client.get(reverse("experience:case-detail", args=[digest(case)])).status_code == 200


def test_services_refuse_another_tenants_items_as_unknown_ids(
    limited_reviewer: User, two_tenants: dict[str, Any]
) -> None:
    foreign = two_tenants["foreign"]
    with pytest.raises(ValidationFailure) as refused:
        evidence_check(case=foreign, key="diagnosis/0", actor=limited_reviewer)
    assert (refused.value.field, refused.value.message) == ("id", f"{NO_SUCH_CASE}: {foreign.id}")
    with pytest.raises(ValidationFailure) as refused:
        case_approve(case=foreign, actor=limited_reviewer, reason="looks fine")
    assert (refused.value.field, refused.value.message) == ("id", f"{NO_SUCH_CASE}: {foreign.id}")
    assert Case.objects.get(pk=foreign.id).status == "candidate"


def test_the_review_command_answers_another_tenants_id_as_an_unknown_one(
    limited_reviewer: User, two_tenants: dict[str, Any]
) -> None:
    foreign = two_tenants["foreign"].id
    unknown = "case:" + "0" * 64
    answers = []
    for item_id in (foreign, unknown):
        for operation in (["approve", item_id], ["revoke", item_id, "--preview"]):
            status, result = run_json("review", *operation, "--as", "lena", "--reason", "ok")
            assert status != 0
            answers.append(json.loads(json.dumps(result).replace(item_id, "ID")))
        status, result = run_json(
            "review", "verify", item_id, "--evidence", "diagnosis/0", "--as", "lena"
        )
        assert status != 0
        answers.append(json.loads(json.dumps(result).replace(item_id, "ID")))
    assert answers[:3] == answers[3:]
    assert answers[0]["ok"] is False and NO_SUCH_CASE in answers[0]["error"]


def test_a_limited_user_cannot_submit_into_another_tenant(limited_reviewer: User) -> None:
    with pytest.raises(ValidationFailure) as failure:
        submit_case(limited_reviewer, incident="INC-X", scope={**SCOPE, "tenant": OTHER})
    assert failure.value.field == "scope.tenant"


def test_documents_of_another_tenant_are_hidden_and_protected(
    limited_operator: User, two_tenants: dict[str, Any]
) -> None:
    client = client_for(limited_operator)
    listing = client.get(reverse("knowledge:document-list")).content.decode()
    assert "own-rule" in listing and "foreign-rule" not in listing
    foreign = two_tenants["foreign_doc"]
    assert (
        client.get(
            reverse("knowledge:document-detail", args=[foreign.doc_key, foreign.version])
        ).status_code
        == 404
    )
    with pytest.raises(PermissionRefused) as refused:
        document_revoke(document=foreign, actor=limited_operator, reason="not mine")
    assert refused.value.unmet == NOT_IN_TENANT
    with pytest.raises(ValidationFailure) as failure:
        documents_import(items=[document(doc_key="sneaky", tenant=OTHER)], actor=limited_operator)
    assert failure.value.field == "[0].tenant"
    assert failure.value.message == f"{OTHER!r} {NOT_IN_TENANT_MESSAGE}"


def test_search_preview_refuses_another_tenant(
    limited_operator: User, two_tenants: dict[str, Any]
) -> None:
    response = client_for(limited_operator).get(
        reverse("knowledge:search-preview"),
        {
            "query": "优惠券",
            "tenant": OTHER,
            "brand": SCOPE["brand"],
            "store": "store-100",
            "campaign": "campaign-x",
            "occurred_at": "2026-09-18T14:00",
            "known_at": "2026-09-18T14:10",
            "timezone": "Asia/Shanghai",
            "limit": "4",
        },
    )

    assert response.status_code == 422
    assert "foreign-rule" not in response.content.decode()


def test_the_audit_log_is_for_deployment_wide_admins(db: None, admin_user: User) -> None:
    limited_admin = user_set_role(username="alma", role=Role.ADMIN, tenants=[SCOPE["tenant"]])

    assert client_for(admin_user).get(reverse("event-list")).status_code == 200
    assert client_for(limited_admin).get(reverse("event-list")).status_code == 403
    assert client_for(limited_admin).get(reverse("event-export")).status_code == 403


def test_the_audit_log_selectors_refuse_a_tenant_limited_admin(admin_user: User) -> None:
    """The rule was the audit pages' own; a selector read from any other path showed every
    tenant's events (issue 25, item 3)."""
    limited_admin = user_set_role(username="alma", role=Role.ADMIN, tenants=[SCOPE["tenant"]])
    assert events_filtered(viewer=admin_user) is not None
    for read in (events_filtered, events_csv_rows):
        with pytest.raises(PermissionRefused) as refused:
            read(viewer=limited_admin)
        assert refused.value.message == AUDIT_LOG_REFUSED


def test_dashboard_counts_only_the_users_tenant(
    limited_reviewer: User, reviewer: User, two_tenants: dict[str, Any]
) -> None:
    limited = client_for(limited_reviewer).get(reverse("home")).context["counts"]
    wide = client_for(reviewer).get(reverse("home")).context["counts"]

    assert limited.candidates == 1
    assert wide.candidates == 2


def test_the_admin_shows_only_the_users_tenant(
    limited_operator: User, operator: User, two_tenants: dict[str, Any]
) -> None:
    limited = client_for(limited_operator)
    documents = limited.get("/admin/knowledge/document/").content.decode()
    assert "own-rule" in documents and "foreign-rule" not in documents
    foreign = two_tenants["foreign_doc"]
    assert limited.get(f"/admin/knowledge/document/{foreign.pk}/change/").status_code in {302, 404}
    assert limited.get("/admin/reviewconsole/event/").status_code == 403
    assert (
        client_for(operator)
        .get("/admin/knowledge/document/")
        .content.decode()
        .count("foreign-rule")
        >= 1
    )


def test_the_shared_lexicon_is_edited_only_by_deployment_wide_operators(
    limited_operator: User, operator: User
) -> None:
    assert client_for(limited_operator).get("/admin/knowledge/synonym/add/").status_code == 403
    assert client_for(operator).get("/admin/knowledge/synonym/add/").status_code == 200


def test_a_skill_cannot_cite_another_tenants_case(operator: User, reviewer: User) -> None:
    from experience.cases.schema import parse_skill
    from experience.cases.services import skill_submit
    from experience.cases.tools import tool_specs
    from tests.ui.factories import skill_data

    foreign = submit_case(operator, incident="INC-F", scope={**SCOPE, "tenant": OTHER})
    own = submit_case(operator, incident="INC-O")

    with pytest.raises(ValidationFailure) as failure:
        skill_submit(
            content=parse_skill(skill_data([own.id, foreign.id]), tool_specs()), actor=reviewer
        )
    assert failure.value.field == "cases[1]"


def test_a_tenant_named_in_an_input_is_a_bad_value_of_its_field(limited_reviewer: User) -> None:
    """One rule for files and forms (documents, threads, cases): not a refusal, a wrong value."""
    require_input_tenant(limited_reviewer, SCOPE["tenant"], field="tenant")
    with pytest.raises(ValidationFailure) as failure:
        require_input_tenant(limited_reviewer, OTHER, field="[2].scope.tenant")
    assert failure.value.field == "[2].scope.tenant"
    assert failure.value.message == f"{OTHER!r} {NOT_IN_TENANT_MESSAGE}"
