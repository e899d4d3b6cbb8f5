"""Runs that read revoked memory are flagged until a reviewer marks them followed up (audited)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from experience.review.revocation import case_revoke
from experience.runs.followups import FOLLOW_UP_REFUSED, run_follow_up
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.reasons import MAX_REASON
from tests.ui.conftest import csrf_client, csrf_token
from tests.ui.factories import record_run

pytestmark = pytest.mark.django_db

FLAG = "to follow up"
UNRELATED_SKILL = "skill:" + "0" * 64
LIST = reverse("experience:run-list")


def _run_page(run_id: str) -> str:
    return reverse("experience:run-detail", args=[run_id])


@pytest.fixture
def revoked(memory: dict[str, Any], reviewer: User) -> dict[str, Any]:
    """run-ui-1 read the first case, which is then revoked; run-ui-2 read nothing revoked."""
    record_run("run-ui-2", SimpleNamespace(id=UNRELATED_SKILL), [])  # type: ignore[arg-type]
    case_revoke(case=memory["cases"][0], actor=reviewer, reason="wrong diagnosis")
    return memory


def test_a_run_that_read_a_revoked_case_is_flagged_on_the_list_and_its_page(
    revoked: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    rows = {
        row.split("</tr>")[0]
        for row in client.get(LIST).content.decode().split("<tr>")
        if "run-ui-" in row
    }
    flagged = [row for row in rows if FLAG in row]
    assert len(flagged) == 1 and "run-ui-1" in flagged[0]
    page = client.get(_run_page("run-ui-1")).content.decode()
    assert FLAG in page and "Mark followed up" in page
    assert revoked["cases"][0].title in page  # names what was revoked
    assert FLAG not in client.get(_run_page("run-ui-2")).content.decode()


def test_the_filter_lists_the_runs_to_follow_up_only(
    revoked: Any, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(LIST + "?follow_up=pending").content.decode()
    assert "run-ui-1" in html and "run-ui-2" not in html
    html = client.get(LIST + "?follow_up=done").content.decode()
    assert "run-ui-1" not in html and "run-ui-2" not in html


def test_marking_followed_up_clears_the_flag_and_is_audited(revoked: Any, reviewer: User) -> None:
    client = csrf_client(reviewer)
    response = client.post(
        reverse("experience:run-follow-up", args=["run-ui-1"]),
        {"reason": "answer re-checked with the agent", "csrfmiddlewaretoken": csrf_token(client)},
    )
    assert response.status_code == 303
    page = client.get(_run_page("run-ui-1")).content.decode()
    assert FLAG not in page and "followed up" in page and "answer re-checked" in page
    assert "run-ui-1" not in client.get(LIST + "?follow_up=pending").content.decode()
    assert "run-ui-1" in client.get(LIST + "?follow_up=done").content.decode()
    event = Event.objects.get(action=Action.RUN_FOLLOW_UP)
    assert event.actor == reviewer and event.target == "run-ui-1"
    assert event.reason == "answer re-checked with the agent"
    assert event.details["revoked_items"] == [revoked["cases"][0].id]


def test_the_post_needs_csrf(revoked: Any, reviewer: User) -> None:
    client = csrf_client(reviewer)
    response = client.post(reverse("experience:run-follow-up", args=["run-ui-1"]), {})
    assert response.status_code == 403
    assert not Event.objects.filter(action=Action.RUN_FOLLOW_UP).exists()


def test_without_the_review_permission_the_run_stays_flagged(revoked: Any, operator: User) -> None:
    client = csrf_client(operator)
    response = client.post(
        reverse("experience:run-follow-up", args=["run-ui-1"]),
        {"csrfmiddlewaretoken": csrf_token(client)},
    )
    assert response.status_code == 403
    with pytest.raises(PermissionRefused) as refused:
        run_follow_up(run_id="run-ui-1", actor=operator)
    assert refused.value.message == FOLLOW_UP_REFUSED
    assert not Event.objects.filter(action=Action.RUN_FOLLOW_UP).exists()


def test_a_run_not_flagged_or_a_long_reason_is_refused_naming_the_field(
    revoked: Any, reviewer: User
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_follow_up(run_id="run-ui-2", actor=reviewer)
    assert refused.value.field == "run_id"
    with pytest.raises(ValidationFailure) as refused:
        run_follow_up(run_id="run-ui-1", actor=reviewer, reason="x" * (MAX_REASON + 1))
    assert refused.value.field == "reason"


def test_a_later_revocation_flags_a_followed_up_run_again(
    revoked: dict[str, Any], reviewer: User, client: Client
) -> None:
    run_follow_up(run_id="run-ui-1", actor=reviewer)
    case_revoke(case=revoked["cases"][1], actor=reviewer, reason="also wrong")
    client.force_login(reviewer)
    assert "run-ui-1" in client.get(LIST + "?follow_up=pending").content.decode()


def test_the_runs_list_costs_the_same_queries_for_one_run_or_many(
    revoked: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    client.get(LIST)
    with CaptureQueriesContext(connection) as few:
        client.get(LIST)
    for n in range(3, 9):
        record_run(f"run-ui-{n}", revoked["skill"], [revoked["cases"][1].id])
    case_revoke(case=revoked["cases"][1], actor=reviewer, reason="also wrong")
    with CaptureQueriesContext(connection) as many:
        html = client.get(LIST).content.decode()
    assert html.count(FLAG) >= 7
    assert len(few) == len(many)


def test_the_stored_impact_names_the_skill_and_links_the_runs(
    revoked: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    case = revoked["cases"][0]
    html = client.get(reverse("experience:case-revoke", args=[case.digest])).content.decode()
    skill = revoked["skill"]
    assert f'title="{skill.id}">{escape(skill.title)}</a>' in html
    assert f'<a class="run-id" href="{_run_page("run-ui-1")}">run-ui-1</a>' in html
    assert f'data-copy="{case.id}"' in html


def test_the_dashboard_counts_the_runs_to_follow_up(
    revoked: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(reverse("home")).content.decode()
    card = html.split('href="' + LIST + '?follow_up=pending"', 1)[1].split("</a>", 1)[0]
    assert '<span class="count">1</span>' in card and "Runs to follow up" in card
    # Among the review cards, not loose between the review and knowledge sections.
    review = html.split('id="knowledge-heading"', 1)[0].rsplit("</section>", 1)[0]
    assert "?follow_up=pending" in review
    run_follow_up(run_id="run-ui-1", actor=reviewer)
    html = client.get(reverse("home")).content.decode()
    card = html.split('href="' + LIST + '?follow_up=pending"', 1)[1].split("</a>", 1)[0]
    assert '<span class="count">0</span>' in card


def test_the_run_page_costs_the_same_queries_for_few_items_or_many(
    memory: dict[str, Any], reviewer: User, operator: User, client: Client
) -> None:
    from tests.ui.factories import approved_case

    client.force_login(reviewer)
    record_run("run-few", memory["skill"], [memory["cases"][0].id])
    many = [
        approved_case(submitter=operator, reviewer=reviewer, incident=f"INC-MANY-{n}").id
        for n in range(5)
    ]
    record_run("run-many", memory["skill"], many)
    for run_id in ("run-few", "run-many"):
        client.get(_run_page(run_id))
    with CaptureQueriesContext(connection) as few:
        client.get(_run_page("run-few"))
    with CaptureQueriesContext(connection) as lots:
        html = client.get(_run_page("run-many")).content.decode()
    assert html.count('class="item-kind">case</span>') >= 10  # read and cited, each named
    assert len(few) == len(lots)


def test_runs_reached_by_revocations_stored_before_follow_ups_existed_start_flagged(
    revoked: dict[str, Any], reviewer: User
) -> None:
    from importlib import import_module

    from django.apps import apps

    from experience.runs.models import RevocationImpact, RunFollowUp

    migration = import_module("experience.migrations.0004_run_follow_up")
    RunFollowUp.objects.all().delete()
    impact = RevocationImpact.objects.get(item_id=revoked["cases"][0].id)
    migration.flag_runs_of_stored_impacts(apps, None)
    flagged = {row.run_id: row for row in RunFollowUp.objects.all()}
    assert set(flagged) == set(impact.runs) and "run-ui-1" in flagged
    assert flagged["run-ui-1"].pending
    assert flagged["run-ui-1"].revoked_items == [revoked["cases"][0].id]
