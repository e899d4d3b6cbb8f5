"""Held-out sets and replay reports belong to a tenant (issue 23, item 5).

A user limited to one tenant gets 404 for another tenant's report (page, JSON, chart) exactly
as for an unknown id, and the list, the held-out count and the admin leave it out; a set whose
tickets span tenants is for deployment-wide users only.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin import site
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from django.urls import reverse

from evaluation.domain import WITH, WITHOUT, parse_ticket_set, set_tenant, ticket_as_json
from evaluation.models import HeldoutTicket, ReplayReport
from evaluation.selectors import heldout_count
from evaluation.services import report_store
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.conftest import PASSWORD
from tests.evaluation.conftest import SCOPE, ticket, ticket_set

pytestmark = pytest.mark.django_db

PAGES = ["report-detail", "report-json", "report-chart"]


def _store(*tickets: dict[str, Any], name: str, actor: User) -> ReplayReport:
    parsed = parse_ticket_set(ticket_set(*tickets, name=name))
    zero = dict.fromkeys(("missed_checks", "wrong_causes"), 0)
    result = {
        "totals": {WITH: zero, WITHOUT: zero},
        "situations": [],
        "tickets": [ticket_as_json(t) for t in parsed.tickets],
    }
    return report_store(
        ticket_set=parsed, memory="current", result=result, chart=b"png", actor=actor
    )


def _user(name: str, role: str, *tenants: str) -> User:
    return user_set_role(username=name, role=role, password=PASSWORD, tenants=list(tenants))


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def reports(admin_user: User) -> dict[str, ReplayReport]:
    milkbar = {**SCOPE, "tenant": "milkbar"}
    return {
        "teahouse": _store(ticket(1), ticket(2), name="teahouse-set", actor=admin_user),
        "milkbar": _store(ticket(3, scope=milkbar), name="milkbar-set", actor=admin_user),
        "mixed": _store(ticket(4), ticket(5, scope=milkbar), name="mixed-set", actor=admin_user),
    }


def test_a_report_and_its_tickets_carry_the_tenant_of_their_tickets(
    reports: dict[str, ReplayReport],
) -> None:
    assert reports["teahouse"].tenant == "teahouse"
    assert reports["milkbar"].tenant == "milkbar"
    assert reports["mixed"].tenant == ""
    assert HeldoutTicket.objects.get(ticket_id="thread://held-out/t-5").tenant == "milkbar"


@pytest.mark.parametrize(
    ("tenants", "expected"),
    [([], ""), (["a"], "a"), (["a", "a"], "a"), (["a", "b"], "")],
)
def test_a_set_has_a_tenant_only_when_all_its_tickets_share_one(
    tenants: list[str], expected: str
) -> None:
    assert set_tenant(tenants) == expected


@pytest.mark.parametrize("page", PAGES)
def test_another_tenants_report_is_not_found_like_an_unknown_id(
    reports: dict[str, ReplayReport], page: str
) -> None:
    bea = _client(_user("bea", Role.REVIEWER, "milkbar"))
    other = bea.get(reverse(f"evaluation:{page}", args=[reports["teahouse"].pk]))
    unknown = bea.get(reverse(f"evaluation:{page}", args=[999_999]))
    assert other.status_code == unknown.status_code == 404
    assert b"teahouse-set" not in other.content
    own = bea.get(reverse(f"evaluation:{page}", args=[reports["milkbar"].pk]))
    assert own.status_code == 200


@pytest.mark.parametrize("page", PAGES)
def test_a_report_spanning_tenants_is_for_deployment_wide_users_only(
    reports: dict[str, ReplayReport], reviewer: User, page: str
) -> None:
    url = reverse(f"evaluation:{page}", args=[reports["mixed"].pk])
    for tenants in (["milkbar"], ["teahouse"], ["milkbar", "teahouse"]):
        limited = _user(f"u-{'-'.join(tenants)}", Role.REVIEWER, *tenants)
        assert _client(limited).get(url).status_code == 404
    assert _client(reviewer).get(url).status_code == 200


def test_the_list_and_the_held_out_count_show_only_the_users_tenants(
    reports: dict[str, ReplayReport], reviewer: User
) -> None:
    bea = _user("bea", Role.REVIEWER, "milkbar")
    page = _client(bea).get(reverse("evaluation:report-list")).content.decode()
    assert "milkbar-set" in page
    assert "teahouse-set" not in page and "mixed-set" not in page
    assert heldout_count(bea) == 2  # t-3, and t-5 of the mixed set
    everything = _client(reviewer).get(reverse("evaluation:report-list")).content.decode()
    assert all(name in everything for name in ("milkbar-set", "teahouse-set", "mixed-set"))
    assert heldout_count(reviewer) == 5


def test_the_admin_lists_a_tenant_limited_users_own_reports_and_tickets_only(
    reports: dict[str, ReplayReport], rf: RequestFactory
) -> None:
    request = rf.get("/admin/")
    request.user = _user("ada-milk", Role.ADMIN, "milkbar")
    report_rows = site._registry[ReplayReport].get_queryset(request)
    assert set(report_rows) == {reports["milkbar"]}
    ticket_rows = site._registry[HeldoutTicket].get_queryset(request)
    assert {row.ticket_id for row in ticket_rows} == {
        "thread://held-out/t-3",
        "thread://held-out/t-5",
    }
