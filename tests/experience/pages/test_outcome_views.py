"""The run page's Outcome form: login, permission, CSRF, and the one service behind it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.retrieval.block import experience_context
from experience.runs.models import RunOutcome
from reviewconsole.models import Action, Event
from tests.experience.conftest import NOW, QUERY, SCOPE

pytestmark = pytest.mark.django_db

URL = reverse("experience:run-outcome", args=["run-v"])


@pytest.fixture
def read_run(approved_case: Callable[..., Case], agent: User) -> str:
    approved_case()
    experience_context(QUERY, SCOPE, NOW, "run-v", 200, actor=agent)
    return "run-v"


def test_reviewer_reports_from_the_run_page(read_run: str, reviewer: User) -> None:
    client = Client()
    client.force_login(reviewer)
    page = client.get(reverse("experience:run-detail", args=[read_run]))
    assert b'action="' + URL.encode() + b'"' in page.content
    response = client.post(URL, {"outcome": "lead_was_wrong", "note": "it was the cache"})
    assert response.status_code == 303
    assert RunOutcome.objects.get(run_id=read_run).outcome == "lead_was_wrong"
    assert Event.objects.filter(action=Action.RUN_OUTCOME, actor=reviewer).exists()
    page = client.get(reverse("experience:run-detail", args=[read_run]))
    assert "it was the cache" in page.content.decode()


def test_csrf_is_required(read_run: str, reviewer: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(URL, {"outcome": "unresolved"}).status_code == 403
    assert not RunOutcome.objects.exists()


def test_login_and_method(read_run: str) -> None:
    assert Client().post(URL, {"outcome": "unresolved"}).status_code == 302  # to the login
    assert not RunOutcome.objects.exists()


def test_get_is_not_allowed(read_run: str, reviewer: User) -> None:
    client = Client()
    client.force_login(reviewer)
    assert client.get(URL).status_code == 405


def test_operator_without_the_run_permission_is_refused(read_run: str, operator: User) -> None:
    client = Client()
    client.force_login(operator)
    assert client.post(URL, {"outcome": "unresolved"}).status_code == 403
    assert not RunOutcome.objects.exists()


def test_bad_outcome_is_shown_not_stored(read_run: str, reviewer: User) -> None:
    client = Client()
    client.force_login(reviewer)
    response = client.post(URL, {"outcome": "fixed"}, follow=True)
    assert "outcome: must be one of" in response.content.decode()
    assert not RunOutcome.objects.exists()
