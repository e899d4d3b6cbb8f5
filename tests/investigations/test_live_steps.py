"""A ticket entered on the console runs in the background; the page follows its steps.

The run stores each step as the runner records it, the run's page polls itself (htmx) while the
run goes on and stops once it ends, a full page load works without JavaScript, and the run's
page answers only who may see its tenant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from investigations import services
from investigations.domain import Transcript, Turn
from investigations.models import Investigation, InvestigationRequest, RequestState
from investigations.providers import provider_for
from investigations.services import investigation_request_run
from knowledge.conclusions import RULES_EXCLUDE_PURCHASE
from reviewconsole.models import TenantMembership
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.investigations.test_views import HTMX, NEW, form, signed_in

pytestmark = pytest.mark.django_db

POLLING = 'hx-trigger="every 1s"'
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def queued_tasks(settings: Any) -> None:
    """Tasks wait in the database for a worker, as in production (the test runs them)."""
    settings.TASKS = DATABASE_TASKS


class Watching:
    """The scripted provider, noting before each turn how many steps the request has stored."""

    name = "scripted"

    def __init__(self) -> None:
        self.inner = provider_for("scripted")
        self.seen: list[tuple[int, int]] = []  # (steps the model has seen, steps stored)

    def next_turn(self, transcript: Transcript) -> Turn:
        done = sum(len(round_.exchanges) for round_ in transcript.rounds)
        self.seen.append((done, len(InvestigationRequest.objects.get().steps)))
        return self.inner.next_turn(transcript)


def test_each_step_is_stored_as_it_happens(
    knowledge_base: None, reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    watching = Watching()
    monkeypatch.setattr(services, "provider_for", lambda name: watching)

    signed_in(reviewer).post(NEW, form())

    assert len(watching.seen) >= 2, "the scripted run calls a tool, then answers"
    # At every turn after the first, the steps done so far are already stored.
    assert all(stored == done for done, stored in watching.seen)
    assert watching.seen[-1][0] >= 1
    queued = InvestigationRequest.objects.get()
    assert queued.state == RequestState.FINISHED
    assert queued.steps == Investigation.objects.get().steps


def test_the_page_polls_while_the_run_goes_on_and_stops_when_it_ends(
    knowledge_base: None, reviewer: User, queued_tasks: None
) -> None:
    client = signed_in(reviewer)
    response = client.post(NEW, form(), headers=HTMX)
    queued = InvestigationRequest.objects.get()
    assert queued.state == RequestState.QUEUED
    assert not Investigation.objects.exists()

    # The form's result area becomes the run, which asks for itself every second.
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section id="investigation-result"')
    assert POLLING in fragment
    assert f'hx-get="{queued.get_absolute_url()}"' in fragment

    # Without JavaScript: a full page with a link that loads it again (no meta refresh).
    page = client.get(queued.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html
    assert f'href="{queued.get_absolute_url()}"' in html
    assert 'http-equiv="refresh"' not in html

    investigation_request_run(queued.pk)  # the worker

    polled = client.get(queued.get_absolute_url(), headers=HTMX)
    done = polled.content.decode()
    assert polled.status_code == 200 and "<html" not in done
    assert POLLING not in done  # the last answer stops the polling
    assert RULES_EXCLUDE_PURCHASE in done
    assert reverse("knowledge:document-detail", args=["rule-a", 2]) in done  # citation links
    full = client.get(queued.get_absolute_url())
    assert full.status_code == 302
    assert full["Location"] == Investigation.objects.get().get_absolute_url()


def test_steps_stored_so_far_are_shown_while_running(
    knowledge_base: None, reviewer: User, queued_tasks: None
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    queued = InvestigationRequest.objects.get()
    step = {
        "index": 0,
        "call_id": "c1",
        "tool": "search_knowledge",
        "arguments": {"query": "券用不了"},
        "result": {"evidence": [{"id": "doc:rule-a@2", "quote": "满 30 元可用"}]},
        "outcome": "ok",
        "error": None,
        "refused_arguments": [],
    }
    InvestigationRequest.objects.filter(pk=queued.pk).update(
        state=RequestState.RUNNING, steps=[step]
    )
    fragment = client.get(queued.get_absolute_url(), headers=HTMX).content.decode()
    assert POLLING in fragment
    assert "search_knowledge" in fragment and "满 30 元可用" in fragment
    assert reverse("knowledge:document-detail", args=["rule-a", 2]) in fragment


def test_another_tenants_run_is_404_and_agents_get_403(
    knowledge_base: None,
    reviewer: User,
    agent: User,
    make_user: Callable[[str, str], User],
    queued_tasks: None,
) -> None:
    signed_in(reviewer).post(NEW, form())
    url = InvestigationRequest.objects.get().get_absolute_url()
    limited = make_user("limited-reviewer", "reviewer")
    TenantMembership.objects.create(user=limited, tenant="other-tenant")
    assert signed_in(limited).get(url).status_code == 404
    assert signed_in(limited).get(url, headers=HTMX).status_code == 404
    assert signed_in(agent).get(url).status_code == 403
    assert Client().get(url).status_code == 302  # to the login page
    same_tenant = make_user("member", "reviewer")
    TenantMembership.objects.create(user=same_tenant, tenant="teahouse")
    assert signed_in(same_tenant).get(url).status_code == 200


def test_a_run_whose_actor_lost_the_permission_fails_without_polling(
    knowledge_base: None, reviewer: User, admin_user: User, queued_tasks: None
) -> None:
    signed_in(reviewer).post(NEW, form())
    queued = InvestigationRequest.objects.get()
    user_set_role(username=reviewer.username, role=Role.ADMIN)

    assert investigation_request_run(queued.pk).startswith("failed")
    queued.refresh_from_db()
    assert queued.state == RequestState.FAILED
    assert "search_knowledge" in queued.error
    assert not Investigation.objects.exists()
    fragment = signed_in(admin_user).get(queued.get_absolute_url(), headers=HTMX)
    assert POLLING not in fragment.content.decode()
    assert "search_knowledge" in fragment.content.decode()


def test_a_second_attempt_links_the_stored_run_instead_of_running_again(
    knowledge_base: None, reviewer: User, queued_tasks: None
) -> None:
    signed_in(reviewer).post(NEW, form())
    queued = InvestigationRequest.objects.get()
    investigation_request_run(queued.pk)
    # A worker that died after storing the run but before marking the request finished:
    InvestigationRequest.objects.filter(pk=queued.pk).update(
        state=RequestState.RUNNING, investigation=None
    )
    assert investigation_request_run(queued.pk).startswith("finished")
    queued.refresh_from_db()
    assert Investigation.objects.count() == 1
    assert queued.investigation == Investigation.objects.get()


def test_a_run_that_fails_every_attempt_says_so_and_stops_polling(
    knowledge_base: None, reviewer: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.TASK_MAX_ATTEMPTS = 2

    def broken(**_: Any) -> Investigation:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(services, "investigation_run", broken)
    client = signed_in(reviewer)
    client.post(NEW, form())  # tasks run at once here: both attempts fail

    queued = InvestigationRequest.objects.get()
    assert queued.state == RequestState.FAILED
    assert queued.error == "RuntimeError: the database went away"
    fragment = client.get(queued.get_absolute_url(), headers=HTMX).content.decode()
    assert POLLING not in fragment and "the database went away" in fragment


def test_the_form_page_lists_runs_not_finished_yet(
    knowledge_base: None, reviewer: User, queued_tasks: None
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    queued = InvestigationRequest.objects.get()
    assert f'href="{queued.get_absolute_url()}"' in client.get(NEW).content.decode()

    investigation_request_run(queued.pk)
    page = client.get(NEW).content.decode()
    assert f'href="{queued.get_absolute_url()}"' not in page  # finished: listed as recent
    assert Investigation.objects.get().get_absolute_url() in page


def test_a_poll_costs_six_queries_at_most_and_one_per_kind_of_item_shown(
    knowledge_base: None,
    reviewer: User,
    queued_tasks: None,
    django_assert_max_num_queries: Any,
) -> None:
    """Every open page asks once a second: session, user, permissions, the run (and its
    investigation once stored), nothing per step; once steps have returned items, the titles
    of those items, one query per kind (here: documents)."""
    client = signed_in(reviewer)
    client.post(NEW, form())
    queued = InvestigationRequest.objects.get()
    url = queued.get_absolute_url()
    client.get(url, headers=HTMX)
    with django_assert_max_num_queries(6):
        client.get(url, headers=HTMX)
    investigation_request_run(queued.pk)
    with django_assert_max_num_queries(7):
        assert POLLING not in client.get(url, headers=HTMX).content.decode()
