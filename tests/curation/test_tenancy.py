"""Tenant isolation in intake and curation: a user limited to one tenant never sees another
tenant's threads, links, merges, re-review entries or proposals, and never moves a thread's
evidence into another tenant's memory."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory
from django.urls import reverse

from curation import incidents, scan, threads
from curation.admin import TenantScopedAdmin
from curation.domain.threads import parse_thread
from curation.models import (
    IncidentMerge,
    NearDuplicate,
    ReReview,
    ReReviewReason,
    SkillProposal,
    Thread,
)
from experience.cases import services as experience_services
from experience.cases.models import Case, SkillCase
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from knowledge.domain import sha256_hex
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.tenancy import NOT_IN_TENANT, NOT_IN_TENANT_MESSAGE
from tests.curation.conftest import THREAD_ID, other_wording, thread_json
from tests.curation.test_services import PICKS, store_scope_draft
from tests.curation.test_views import build_post
from tests.experience.conftest import NOW, SCOPE, case_data, skill_data
from tests.helpers import run_json

OWN = SCOPE["tenant"]
OTHER = "other-co"
OTHER_SCOPE = {**SCOPE, "tenant": OTHER}
FOREIGN_THREAD_ID = "T-other-co-coupon"


def foreign_thread_json() -> dict[str, Any]:
    data = thread_json()
    data["id"] = FOREIGN_THREAD_ID
    data["tenant"] = OTHER
    data["title"] = "别家租户的优惠券线程"
    return data


def digest(item_id: str) -> str:
    return item_id.split(":", 1)[1]


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def limited_operator(db: None) -> User:
    return user_set_role(username="otto", role=Role.OPERATOR, tenants=[OWN])


@pytest.fixture
def limited_reviewer(db: None) -> User:
    return user_set_role(username="lena", role=Role.REVIEWER, tenants=[OWN])


@pytest.fixture
def foreign_thread(operator: User, at_now: datetime) -> Thread:
    """Another tenant's thread, imported by a deployment-wide operator."""
    imported, _ = threads.thread_import(data=foreign_thread_json(), actor=operator)
    return imported


# --- import ------------------------------------------------------------------------------------


def test_a_limited_operator_imports_threads_of_their_own_tenant(
    limited_operator: User, at_now: datetime
) -> None:
    thread, created = threads.thread_import(data=thread_json(), actor=limited_operator)
    assert created and thread.tenant == OWN
    event = Event.objects.get(action=Action.THREAD_IMPORT)
    assert event.details["tenant"] == OWN


def test_importing_another_tenants_thread_is_refused_naming_the_tenant(
    limited_operator: User, at_now: datetime
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        threads.thread_import(data=foreign_thread_json(), actor=limited_operator)
    assert refused.value.field == "tenant"
    assert refused.value.message == f"{OTHER!r} {NOT_IN_TENANT_MESSAGE}"
    assert not Thread.objects.exists()
    assert not Event.objects.filter(action=Action.THREAD_IMPORT).exists()


def test_a_deployment_wide_operator_imports_any_tenants_thread(
    thread: Thread, foreign_thread: Thread
) -> None:
    assert (thread.tenant, foreign_thread.tenant) == (OWN, OTHER)


def test_an_imported_id_under_another_tenant_is_that_tenants_own_thread(
    thread: Thread, operator: User
) -> None:
    """Thread ids are per tenant (issue 23): the same id in another tenant is another thread,
    and the first one is untouched."""
    moved = thread_json()
    moved["tenant"] = OTHER
    other, created = threads.thread_import(data=moved, actor=operator)
    assert created and other.pk != thread.pk
    assert sorted(Thread.objects.values_list("tenant", flat=True)) == sorted([OWN, OTHER])


def test_the_command_refuses_another_tenants_thread(limited_operator: User, tmp_path: Path) -> None:
    path = tmp_path / "thread.json"
    path.write_text(json.dumps(foreign_thread_json(), ensure_ascii=False), encoding="utf-8")
    status, result = run_json("import_thread", str(path), "--as", "otto")
    assert status == 1
    assert result["ok"] is False and result["field"] == "tenant"
    assert not Thread.objects.exists()


def test_the_import_page_refuses_another_tenants_thread(
    limited_operator: User, at_now: datetime
) -> None:
    upload = SimpleUploadedFile(
        "t.json", json.dumps(foreign_thread_json()).encode(), "application/json"
    )
    response = client_for(limited_operator).post(reverse("curation:thread-list"), {"file": upload})
    assert response.status_code == 422
    assert response.context["import_error"].startswith("tenant:")
    assert not Thread.objects.exists()


# --- threads: list, pages, build ---------------------------------------------------------------


def test_the_thread_list_shows_only_the_users_tenants(
    thread: Thread, foreign_thread: Thread, limited_operator: User, operator: User
) -> None:
    url = reverse("curation:thread-list")
    limited = client_for(limited_operator).get(url)
    assert [t.thread_id for t in limited.context["threads"]] == [THREAD_ID]
    assert "别家租户" not in limited.content.decode()
    assert (
        client_for(limited_operator).get(reverse("curation:home")).context["counts"]["threads"] == 1
    )

    wide = client_for(operator).get(url)
    assert {t.thread_id for t in wide.context["threads"]} == {THREAD_ID, FOREIGN_THREAD_ID}
    assert client_for(operator).get(reverse("curation:home")).context["counts"]["threads"] == 2


def test_another_tenants_thread_does_not_exist_for_a_limited_operator(
    foreign_thread: Thread, limited_operator: User
) -> None:
    client = client_for(limited_operator)
    foreign = [FOREIGN_THREAD_ID]
    assert client.get(reverse("curation:thread-detail", args=foreign)).status_code == 404
    post = build_post(tenant=OTHER)
    assert client.post(reverse("curation:thread-preview", args=foreign), post).status_code == 404
    assert client.post(reverse("curation:thread-build", args=foreign), post).status_code == 404
    assert not Case.objects.exists()
    assert not Event.objects.filter(action=Action.THREAD_BUILD).exists()


def test_a_limited_operator_builds_from_their_own_tenants_thread(
    thread: Thread, limited_operator: User
) -> None:
    client = client_for(limited_operator)
    page = client.get(reverse("curation:thread-detail", args=[THREAD_ID]))
    assert page.status_code == 200
    assert page.context["form"]["tenant"].value() == OWN  # the thread's tenant, filled in
    response = client.post(reverse("curation:thread-build", args=[THREAD_ID]), build_post())
    assert response.status_code == 303
    assert Case.objects.get().tenant == OWN


def test_a_deployment_wide_operator_sees_every_tenants_thread(
    thread: Thread, foreign_thread: Thread, operator: User
) -> None:
    client = client_for(operator)
    for thread_id in (THREAD_ID, FOREIGN_THREAD_ID):
        assert client.get(reverse("curation:thread-detail", args=[thread_id])).status_code == 200


def test_evidence_never_moves_to_another_tenant_even_for_deployment_wide_users(
    thread: Thread, operator: User
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        threads.candidate_build(
            thread=thread,
            picks=PICKS,
            draft=store_scope_draft(scope=dict(OTHER_SCOPE)),
            actor=operator,
        )
    assert refused.value.field == "scope.tenant"
    assert not Case.objects.exists()
    assert not Event.objects.filter(action=Action.THREAD_BUILD).exists()


def test_the_build_and_preview_pages_refuse_another_tenant_at_its_field(
    thread: Thread, operator: User
) -> None:
    client = client_for(operator)
    for name in ("thread-preview", "thread-build"):
        response = client.post(
            reverse(f"curation:{name}", args=[THREAD_ID]), build_post(tenant=OTHER)
        )
        assert response.status_code == 422
        assert "teahouse" in str(response.context["form"].errors["tenant"])
    assert not Case.objects.exists()


def test_the_service_refuses_a_limited_user_another_tenants_thread(
    foreign_thread: Thread, limited_operator: User
) -> None:
    with pytest.raises(PermissionRefused) as refused:
        threads.candidate_build(
            thread=foreign_thread,
            picks=PICKS,
            draft=store_scope_draft(scope=dict(OTHER_SCOPE)),
            actor=limited_operator,
        )
    assert refused.value.unmet == NOT_IN_TENANT
    # The one sentence of reviewconsole.permissions.require (this service once said it without
    # the word "tenant").
    assert refused.value.message == f"tenant {OTHER!r} {NOT_IN_TENANT_MESSAGE}"
    assert not Case.objects.exists()


def test_cases_of_another_tenant_citing_the_thread_are_not_listed_on_it(
    thread: Thread,
    submit: Callable[..., Case],
    limited_operator: User,
    operator: User,
) -> None:
    cited = {"source_id": f"thread:{THREAD_ID}#m1", "excerpt": "优惠券显示不可用"}
    own = submit(case_data(incident="INC-OWN", observations=[cited]))
    foreign = submit(
        case_data(incident="INC-FOREIGN", scope=dict(OTHER_SCOPE), observations=[cited])
    )
    url = reverse("curation:thread-detail", args=[THREAD_ID])

    limited = client_for(limited_operator).get(url)
    assert [row["case"].id for row in limited.context["built"]] == [own.id]
    # ``thread:ID`` names a thread within a tenant: the foreign case cites its own tenant's.
    wide = client_for(operator).get(url)
    assert {row["case"].id for row in wide.context["built"]} == {own.id}
    assert foreign.tenant != thread.tenant


# --- near-duplicates, incidents, re-review, proposals -------------------------------------------


@pytest.fixture
def two_worlds(approve: Callable[..., Case]) -> dict[str, Any]:
    """In each tenant: two approved cases of distinct incidents sharing a pattern (a link and a
    proposal), and, after a scan far enough ahead, their re-review entries."""
    own = [approve(case_data(incident="INC-1")), approve(other_wording("INC-2"))]
    foreign = [
        approve(case_data(incident="INC-X1", scope=dict(OTHER_SCOPE))),
        approve(other_wording("INC-X2", scope=dict(OTHER_SCOPE))),
    ]
    scan.curation_scan(now=NOW + timedelta(days=100), days=90)
    return {"own": own, "foreign": foreign}


def test_the_scan_filled_both_tenants_queues(two_worlds: dict[str, Any]) -> None:
    for tenant in (OWN, OTHER):
        assert NearDuplicate.objects.filter(case_a__tenant=tenant).exists()
        assert ReReview.objects.filter(tenant=tenant).exists()
        assert SkillProposal.objects.filter(tenant=tenant).exists()


QUEUES = [
    ("curation:link-list", "rows", lambda row: row["link"].case_a.tenant),
    ("curation:rereview-list", "rows", lambda row: row["entry"].tenant),
    ("curation:proposal-list", "rows", lambda row: row["proposal"].tenant),
]


@pytest.mark.parametrize(("url_name", "key", "tenant_of"), QUEUES)
def test_queues_show_a_limited_reviewer_only_their_tenant(
    url_name: str,
    key: str,
    tenant_of: Callable[[Any], str],
    two_worlds: dict[str, Any],
    limited_reviewer: User,
    reviewer: User,
) -> None:
    limited = client_for(limited_reviewer).get(reverse(url_name))
    assert {tenant_of(row) for row in limited.context[key]} == {OWN}
    wide = client_for(reviewer).get(reverse(url_name))
    assert {tenant_of(row) for row in wide.context[key]} == {OWN, OTHER}


def test_the_home_counts_only_the_users_tenant(
    two_worlds: dict[str, Any], limited_reviewer: User, reviewer: User
) -> None:
    limited = client_for(limited_reviewer).get(reverse("curation:home")).context["counts"]
    wide = client_for(reviewer).get(reverse("curation:home")).context["counts"]
    for name in ("near_duplicates", "rereview", "proposals"):
        assert 0 < limited[name] < wide[name]


def test_another_tenants_items_do_not_exist_for_a_limited_reviewer(
    two_worlds: dict[str, Any], limited_reviewer: User
) -> None:
    client = client_for(limited_reviewer)
    first = two_worlds["foreign"][0]
    link = NearDuplicate.objects.get(case_a__tenant=OTHER)
    entry = ReReview.objects.filter(tenant=OTHER, item_type="case").first()
    proposal = SkillProposal.objects.get(tenant=OTHER)
    assert entry is not None
    for url in (
        reverse("curation:case-similar", args=[digest(first.id)]),
        reverse("curation:rereview-recertify", args=[entry.pk]),
        reverse("curation:proposal-detail", args=[proposal.pk]),
    ):
        assert client.get(url).status_code == 404, url
    for url, data in (
        (
            reverse("curation:link-resolve", args=[link.pk]),
            {"decision": "different", "reason": "x"},
        ),
        (reverse("curation:rereview-confirm", args=[entry.pk]), {"reason": "x"}),
        (reverse("curation:proposal-dismiss", args=[proposal.pk]), {"reason": "x"}),
    ):
        assert client.post(url, data).status_code == 404, url
    link.refresh_from_db()
    proposal.refresh_from_db()
    assert (link.status, proposal.status) == ("open", "open")


def test_a_limited_reviewer_decides_in_their_own_tenant(
    two_worlds: dict[str, Any], limited_reviewer: User
) -> None:
    link = NearDuplicate.objects.get(case_a__tenant=OWN)
    response = client_for(limited_reviewer).post(
        reverse("curation:link-resolve", args=[link.pk]),
        {"decision": "different", "reason": "不同门店配置"},
    )
    assert response.status_code == 303
    link.refresh_from_db()
    assert link.status == "different"


def test_incident_merges_of_another_tenant_are_neither_listed_nor_made(
    two_worlds: dict[str, Any], limited_reviewer: User, second_reviewer: User
) -> None:
    incidents.incident_merge(
        tenant=OTHER,
        brand=SCOPE["brand"],
        alias="INC-X2",
        into="INC-X1",
        actor=second_reviewer,
        reason="同一事故",
    )
    client = client_for(limited_reviewer)
    url = reverse("curation:incident-list")
    assert list(client.get(url).context["merges"]) == []

    data = {"brand": SCOPE["brand"], "alias": "INC-2", "into": "INC-1", "reason": "x"}
    response = client.post(url, {**data, "tenant": OTHER})
    assert response.status_code == 422
    assert response.context["form"].errors["tenant"]
    assert IncidentMerge.objects.count() == 1

    response = client.post(url, {**data, "tenant": OWN})
    assert response.status_code == 303
    assert [m.tenant for m in client.get(url).context["merges"]] == [OWN]


def test_a_skills_support_lists_only_cases_the_user_may_see(
    submit: Callable[..., Case], reviewer: User, limited_reviewer: User
) -> None:
    own = submit(case_data(incident="INC-OWN"))
    foreign = submit(case_data(incident="INC-FOREIGN", scope=dict(OTHER_SCOPE)))
    skill, _ = experience_services.skill_submit(
        content=parse_skill(skill_data([own.id]), tool_specs()), actor=reviewer
    )
    # Submission refuses a citation across tenants; a row written before that rule still must
    # not leak through the panel.
    SkillCase.objects.create(skill=skill, case=foreign, position=1)
    url = reverse("curation:skill-support", args=[digest(skill.id)])
    limited = client_for(limited_reviewer).get(url)
    assert [row["case"].id for row in limited.context["cases"]] == [own.id]
    assert "INC-FOREIGN" not in limited.content.decode()
    wide = client_for(reviewer).get(url)
    assert [row["case"].id for row in wide.context["cases"]] == [own.id, foreign.id]


# --- admin -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [Thread, NearDuplicate, IncidentMerge, ReReview, SkillProposal],
    ids=lambda model: model.__name__,
)
def test_the_admin_lists_only_the_users_tenants(
    model: type[Any],
    two_worlds: dict[str, Any],
    thread: Thread,
    foreign_thread: Thread,
    second_reviewer: User,
    limited_reviewer: User,
    reviewer: User,
) -> None:
    for tenant, alias, into in ((OWN, "INC-2", "INC-1"), (OTHER, "INC-X2", "INC-X1")):
        incidents.incident_merge(
            tenant=tenant,
            brand=SCOPE["brand"],
            alias=alias,
            into=into,
            actor=second_reviewer,
            reason="同一事故",
        )
    model_admin = admin.site._registry[model]
    assert isinstance(model_admin, TenantScopedAdmin)
    request = RequestFactory().get("/admin/")
    tenant_field = model_admin.tenant_field

    request.user = limited_reviewer
    limited = model_admin.get_queryset(request)
    assert set(limited.values_list(tenant_field, flat=True)) == {OWN}
    request.user = reviewer
    wide = model_admin.get_queryset(request)
    assert set(wide.values_list(tenant_field, flat=True)) == {OWN, OTHER}


# --- migration ---------------------------------------------------------------------------------

migration = importlib.import_module("curation.migrations.0003_thread_tenant")


def test_the_migration_rehashes_threads_so_reimporting_with_the_tenant_is_a_no_op(
    operator: User, at_now: datetime
) -> None:
    data = thread_json()
    assert data["tenant"] == settings.DEMO_TENANT
    thread, _ = threads.thread_import(data=data, actor=operator)
    without_tenant = copy.deepcopy(parse_thread(data).canonical())
    del without_tenant["tenant"]

    migration.thread_content_hashes_without_tenant(apps, None)
    thread.refresh_from_db()
    assert thread.content_hash == sha256_hex(without_tenant)  # as stored before the tenant

    migration.thread_content_hashes(apps, None)
    thread.refresh_from_db()
    assert thread.content_hash == parse_thread(data).content_hash
    again, created = threads.thread_import(data=data, actor=operator)
    assert (again.pk, created) == (thread.pk, False)


def test_the_migration_gives_old_rereview_entries_their_items_tenant(
    approve: Callable[..., Case],
) -> None:
    case = approve(case_data(incident="INC-OLD", scope=dict(OTHER_SCOPE)))
    entry = ReReview.objects.create(
        item_id=case.id,
        item_type="case",
        title=case.title,
        reason=ReReviewReason.UNUSED,
        detected_at=NOW,
    )
    orphan = ReReview.objects.create(
        item_id="case:gone", item_type="case", title="x", reason="unused", detected_at=NOW
    )
    migration.rereview_tenants(apps, None)
    entry.refresh_from_db()
    orphan.refresh_from_db()
    assert (entry.tenant, orphan.tenant) == (OTHER, "")
