"""The audit log page: filters that cannot hold list nothing, one vocabulary for actions, targets
named and linked, a fixed number of queries."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experience.cases.models import Case
from reviewconsole.audit import event_record
from reviewconsole.forms import action_label
from reviewconsole.models import Action, Event
from tests.ui.factories import submit_case

pytestmark = pytest.mark.django_db

LIST = reverse("event-list")


def _cells(html: str, column: int) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = [row for row in body.split("<tr>")[1:] if "<td" in row]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)[column] for row in rows]


@pytest.fixture
def cases(operator: User) -> list[Case]:
    return [
        submit_case(operator, incident=f"INC-AUDIT-{n}", title=f"Audit case {n}") for n in range(3)
    ]


def test_a_reversed_date_range_shows_the_error_and_lists_nothing(
    cases: list[Case], admin_user: User, client: Client
) -> None:
    assert Event.objects.exists()
    client.force_login(admin_user)
    response = client.get(LIST + "?date_from=2026-10-02&date_to=2026-10-01")
    html = response.content.decode()
    assert "must not be before the start date" in html
    assert _cells(html, 0) == [] or "No events listed" in html
    assert not any(case.id in html for case in cases)
    assert "No events listed: correct the filters above." in html


def test_the_table_and_the_action_filter_use_the_same_words(
    cases: list[Case], admin_user: User, client: Client
) -> None:
    client.force_login(admin_user)
    html = client.get(LIST).content.decode()
    options = dict(re.findall(r'<option value="([a-z_.]+)">([^<]+)</option>', html))
    assert options[Action.CASE_SUBMIT.value] == action_label(Action.CASE_SUBMIT.value)
    shown = _cells(html, 2)
    assert shown
    for cell in shown:
        code = re.search(r'title="([^"]+)"', cell)
        assert code is not None
        text = unescape(re.sub(r"<[^>]+>", "", cell)).strip()
        assert text == unescape(options[code.group(1)]), (text, code.group(1))
        assert text != code.group(1)


def test_an_item_target_shows_its_title_and_links_to_its_page(
    cases: list[Case], admin_user: User, client: Client
) -> None:
    client.force_login(admin_user)
    html = client.get(LIST + "?action=" + Action.CASE_SUBMIT.value).content.decode()
    for case in cases:
        assert f'href="{case.get_absolute_url()}" title="{case.id}">{case.title}</a>' in html


def test_a_run_target_links_to_the_run(admin_user: User, client: Client) -> None:
    with transaction.atomic():
        event_record(actor=admin_user, action=Action.RUN_FOLLOW_UP, target="run-audit-1")
    client.force_login(admin_user)
    html = client.get(LIST).content.decode()
    assert f'href="{reverse("experience:run-detail", args=["run-audit-1"])}"' in html


def test_a_pair_target_names_both_items_by_title_never_two_full_hashes(
    cases: list[Case], admin_user: User, client: Client
) -> None:
    first, second = cases[:2]
    with transaction.atomic():
        event_record(
            actor=admin_user,
            action=Action.NEAR_DUPLICATE_RESOLVE,
            target=f"{first.id}~{second.id}",
        )
    client.force_login(admin_user)
    html = client.get(LIST + "?action=" + Action.NEAR_DUPLICATE_RESOLVE.value).content.decode()
    [cell] = _cells(html, 3)
    text = unescape(re.sub(r"<[^>]+>", " ", cell))
    assert not re.search(r"[0-9a-f]{64}", text), text
    for case in (first, second):
        assert f'href="{case.get_absolute_url()}" title="{case.id}">{case.title}</a>' in cell
    assert " and " in text


def test_a_thread_target_is_named_but_not_linked_for_an_admin_who_may_not_open_it(
    admin_user: User, client: Client
) -> None:
    # The thread page is the candidate builder (operators and reviewers): a link there would
    # answer an admin 403.
    with transaction.atomic():
        event_record(actor=admin_user, action=Action.THREAD_IMPORT, target="thread:T-audit")
    client.force_login(admin_user)
    html = client.get(LIST).content.decode()
    assert reverse("curation:thread-detail", args=["T-audit"]) not in html
    assert '<span class="mono source-id">thread:T-audit</span>' in html


def test_the_page_costs_the_same_queries_for_few_events_or_many(
    operator: User, admin_user: User, client: Client, cases: Any
) -> None:
    client.force_login(admin_user)
    client.get(LIST)
    with CaptureQueriesContext(connection) as few:
        client.get(LIST)
    for n in range(3, 12):
        submit_case(operator, incident=f"INC-AUDIT-{n}", title=f"Audit case {n}")
    with CaptureQueriesContext(connection) as many:
        html = client.get(LIST).content.decode()
    assert html.count("Audit case") >= 12
    assert len(few) == len(many)


def test_a_thread_import_names_the_thread_by_its_title(
    operator: User, admin_user: User, client: Client
) -> None:
    from curation.threads import thread_import
    from tests.curation.conftest import thread_json

    data = thread_json()
    thread_import(data=data, actor=operator)
    client.force_login(admin_user)
    html = client.get(LIST).content.decode()
    row = next(part for part in html.split("<tr") if "thread:" in part)
    assert f"“{data['title']}”" in unescape(row)
