"""The console pages: full page and htmx fragment with fixed query counts, and who may see them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from evaluation.chart import render_chart
from evaluation.domain import WITH, WITHOUT, parse_ticket_set
from evaluation.models import ReplayReport
from evaluation.replay import replay_current
from evaluation.services import report_store
from tests.evaluation.conftest import SCOPE, ticket, ticket_set

pytestmark = pytest.mark.django_db

HTMX: dict[str, Any] = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def report(demo_memory: dict[str, Any], reviewer: User) -> ReplayReport:
    other_release = ticket(
        2, scope={**SCOPE, "deployment": "release-2"}, situation="release-changed"
    )
    parsed = parse_ticket_set(ticket_set(ticket(1), other_release))
    result = replay_current(parsed)
    chart = render_chart(
        title="hand-made",
        with_memory=result["totals"][WITH],
        without_memory=result["totals"][WITHOUT],
    )
    return report_store(
        ticket_set=parsed, memory="current", result=result, chart=chart, actor=reviewer
    )


@pytest.fixture
def users(agent: User, operator: User, reviewer: User, admin_user: User) -> dict[str, User]:
    return {"agent": agent, "operator": operator, "reviewer": reviewer, "admin": admin_user}


PAGES = [
    # (page, query string, full-page queries, fragment queries, text the fragment holds); one
    # query of each is the user's access (permissions and tenants, which filter the reports).
    ("list", "", 7, 5, "hand-made"),
    ("list", "?page=1", 7, 5, "1 stored report"),
    ("detail", "", 5, 4, "thread://held-out/t-2"),
    ("detail", "?situation=release-changed", 5, 4, "release-changed"),
]


def _url(page: str, report: ReplayReport) -> str:
    if page == "list":
        return reverse("evaluation:report-list")
    return reverse("evaluation:report-detail", args=[report.pk])


@pytest.mark.parametrize("role", ["reviewer", "operator", "admin"])
@pytest.mark.parametrize(("page", "query", "full", "fragment", "text"), PAGES)
def test_page_and_fragment(
    client: Client,
    report: ReplayReport,
    users: dict[str, User],
    django_assert_num_queries: Any,
    role: str,
    page: str,
    query: str,
    full: int,
    fragment: int,
    text: str,
) -> None:
    client.force_login(users[role])
    url = _url(page, report) + query
    with django_assert_num_queries(full):
        response = client.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" in body and text in body
    with django_assert_num_queries(fragment):
        response = client.get(url, **HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body and text in body
    assert "HX-Request" in response["Vary"]


def test_the_list_says_how_many_tickets_are_held_out(
    client: Client, report: ReplayReport, operator: User
) -> None:
    client.force_login(operator)
    body = client.get(_url("list", report)).content.decode()
    assert "2 tickets are held out" in body


def test_the_detail_filter_shows_one_situation(
    client: Client, report: ReplayReport, reviewer: User
) -> None:
    client.force_login(reviewer)
    url = _url("detail", report)
    body = client.get(url + "?situation=release-changed", **HTMX).content.decode()
    assert "thread://held-out/t-2" in body and "thread://held-out/t-1" not in body
    body = client.get(url + "?situation=not-a-situation", **HTMX).content.decode()
    assert "thread://held-out/t-1" in body and "thread://held-out/t-2" in body


def test_the_detail_page_shows_the_totals_and_the_chart(
    client: Client, report: ReplayReport, reviewer: User
) -> None:
    client.force_login(reviewer)
    body = client.get(_url("detail", report)).content.decode()
    assert reverse("evaluation:report-chart", args=[report.pk]) in body
    assert "Missed required checks" in body and "With memory" in body
    assert " style=" not in body and "<script>" not in body


def test_the_detail_page_shows_calls_to_the_true_cause(
    client: Client, report: ReplayReport, reviewer: User
) -> None:
    client.force_login(reviewer)
    body = client.get(_url("detail", report)).content.decode()
    # Ticket 1: memory's lead finds the store list at the fourth call (after the live campaign
    # and the context block); without, never (counted
    # at the budget in the totals, "never found" in the ticket's row). Ticket 2: neither arm
    # finds it.
    assert "Calls to the true cause" in body
    calls = re.findall(r"<td>(\d+|never found)</td>\s*</tr>", body.split('id="ticket-results"')[1])
    assert calls == ["4", "never found", "never found", "never found"]
    budget = report.result["calls_to_cause"]["unfound_counts_as"]
    assert f"<td>{4 + budget}</td><td>{2 * budget}</td>" in body
    assert "On the 0 tickets whose cause both arms established" in body
    assert "0 wrong-cause claims made with memory" in body


def test_the_chart_and_the_json_download(
    client: Client, report: ReplayReport, reviewer: User
) -> None:
    client.force_login(reviewer)
    chart = client.get(reverse("evaluation:report-chart", args=[report.pk]))
    assert chart["Content-Type"] == "image/png" and chart.content == bytes(report.chart)
    download = client.get(reverse("evaluation:report-json", args=[report.pk]))
    assert download["Content-Disposition"] == f'attachment; filename="replay-{report.pk}.json"'
    assert download.json()["totals"] == report.result["totals"]


@pytest.mark.parametrize("name", ["report-detail", "report-chart", "report-json"])
def test_an_unknown_report_is_not_found(
    client: Client, reviewer: User, db: None, name: str
) -> None:
    client.force_login(reviewer)
    assert client.get(reverse(f"evaluation:{name}", args=[999])).status_code == 404


@pytest.mark.parametrize("name", ["report-list", "report-detail", "report-chart", "report-json"])
def test_agents_are_refused_and_strangers_sent_to_log_in(
    client: Client, report: ReplayReport, agent: User, name: str
) -> None:
    url = reverse(f"evaluation:{name}", args=[] if name == "report-list" else [report.pk])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    response = client.get(url, **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"].startswith(reverse("login"))
    client.force_login(agent)
    assert client.get(url).status_code == 403


def test_pages_only_answer_get(client: Client, report: ReplayReport, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.post(_url("list", report)).status_code == 405


def test_the_ticket_rows_say_checks_endings_and_directions_in_words(
    client: Client, report: ReplayReport, reviewer: User
) -> None:
    client.force_login(reviewer)
    body = client.get(_url("detail", report)).content.decode()
    tickets = body.split('id="ticket-results"')[1]
    text = re.sub(r"<[^>]+>", " ", tickets)
    # No machine codes and no "with / without" pairs: a row for each arm, labelled.
    assert not re.search(r"\b(?:config|knowledge|confirm):[a-z]", text), text
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text), text
    assert " / " not in text and "—" not in text
    assert "check the live configuration: store scope" in text
    assert "no cause claimed" in text and "escalated to a person" in text
    # The totals say which way is better, and the chart says it too.
    assert "<td>higher</td>" in body and "<td>lower</td>" in body
    assert "Lower bars are better" in body
    assert report.set_hash not in re.sub(r'title="[^"]*"', "", body)


def test_the_situation_table_compares_calls_to_cause_where_both_arms_found_it(
    client: Client, report: ReplayReport, demo_memory: dict[str, Any], reviewer: User
) -> None:
    # The live threshold was raised: both arms find it by reading the live campaign, at the
    # second call each; the store-list ticket is found by memory only, so it is left out.
    threshold = ticket(
        3,
        answers={
            "client_retry": "still_failing",
            "checks": {
                "config:campaign-rules": {
                    "fault": "the live threshold is 35 yuan",
                    "cause": "live-threshold-raised",
                }
            },
        },
        truth={
            "required_checks": ["knowledge:campaign-rules", "config:campaign-rules"],
            "cause": "live-threshold-raised",
            "followups": [],
        },
    )
    parsed = parse_ticket_set(ticket_set(ticket(1), threshold))
    result = replay_current(parsed)
    [group] = result["situations"]
    assert group["calls_to_cause_paired"] == {"tickets": 1, WITH: 2, WITHOUT: 2}
    stored = report_store(
        ticket_set=parsed,
        memory="current",
        result=result,
        chart=render_chart(
            title="both",
            with_memory=result["totals"][WITH],
            without_memory=result["totals"][WITHOUT],
        ),
        actor=reviewer,
    )
    client.force_login(reviewer)
    body = client.get(_url("detail", stored)).content.decode()
    table = body.split('id="situations-heading"')[1].split("</table>")[0]
    assert "Calls to the true cause where both arms found it" in table
    # Each arm's row ends with its calls to the cause over the tickets both arms solved.
    assert re.findall(r"<td>([^<]*)</td>\s*</tr>", table) == ["2", "2"]
    # A report stored before the comparison existed, or with no such ticket, shows a dash.
    old = client.get(_url("detail", report)).content.decode()
    old_table = old.split('id="situations-heading"')[1].split("</table>")[0]
    assert set(re.findall(r"<td>([^<]*)</td>\s*</tr>", old_table)) == {"—"}
