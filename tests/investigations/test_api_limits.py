"""The agent API never holds a web process for a model, and one account cannot flood it.

A live investigation is handed to the worker (202, polled); a scripted one still answers within
the request. Per-account request rate and live investigations in flight are limited, answered
429 with Retry-After (agentapi/limits.py; docs/contracts.md, Limits).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from agentapi.investigate import NO_SUCH_INVESTIGATION, RUN_FAILED
from agentapi.limits import TOO_MANY_LIVE
from investigations.models import Investigation, InvestigationRequest, RequestState
from investigations.providers import LIVE_NOT_CONFIGURED
from investigations.services import (
    RUN_ID_TAKEN,
    investigation_request_failed,
    investigation_request_run,
)
from knowledge.conclusions import RULES_DO_NOT_EXPLAIN
from reviewconsole.roles import Role
from tests.api.conftest import BearerClient, client_for, token_for
from tests.investigations.llm_stub import Stub, answer, stub
from tests.investigations.test_api import PATH, body
from tests.investigations.test_live import RULE_B_QUOTE, SEARCH

__all__ = ["client_for", "stub", "token_for"]

pytestmark = pytest.mark.django_db
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def queued_tasks(settings: Any) -> None:
    """Tasks wait in the database for a worker, as in production (the test runs them)."""
    settings.TASKS = DATABASE_TASKS


def test_a_live_investigation_is_queued_and_polled_until_it_answers(
    knowledge_base: None,
    agent: User,
    client_for: Callable[[User], BearerClient],
    stub: Stub,
    queued_tasks: None,
) -> None:
    stub.replies = [SEARCH, answer(RULES_DO_NOT_EXPLAIN, [("doc:rule-b@1", RULE_B_QUOTE)])]
    client = client_for(agent)
    response = client.post_json(PATH, body(provider="live", run_id="live-1"))

    assert response.status_code == 202, response.content
    poll = response["Location"]
    assert response.json() == {"run_id": "live-1", "state": "queued", "steps": 0, "poll": poll}
    # Nothing ran inside the request: the model was never called, nothing is stored yet.
    assert stub.requests == [] and not Investigation.objects.exists()

    waiting = client.get(poll)
    assert waiting.status_code == 202 and waiting["Retry-After"] == "1"
    assert waiting.json()["state"] == "queued"

    # The worker runs it (here: the task's body, as the worker would).
    investigation_request_run(InvestigationRequest.objects.get(run_id="live-1").pk)
    done = client.get(poll)
    assert done.status_code == 200, done.content
    result = done.json()
    assert (result["run_id"], result["status"], result["provider"]) == (
        "live-1",
        "answered",
        "live",
    )
    assert result["answer"]["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    assert result == Investigation.objects.get(run_id="live-1").as_json()


def test_a_scripted_investigation_still_answers_in_the_request(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient]
) -> None:
    response = client_for(agent).post_json(PATH, body(run_id="now-1"))
    assert response.status_code == 200
    assert client_for(agent).get("/api/v1/investigations/now-1").json() == response.json()


def test_a_live_run_the_worker_gave_up_on_reads_as_an_error(
    knowledge_base: None,
    agent: User,
    client_for: Callable[[User], BearerClient],
    stub: Stub,
    queued_tasks: None,
) -> None:
    client = client_for(agent)
    client.post_json(PATH, body(provider="live", run_id="live-x"))
    investigation_request_failed(
        InvestigationRequest.objects.get(run_id="live-x").pk, "APITimeoutError: timed out"
    )
    result = client.get("/api/v1/investigations/live-x").json()
    assert (result["status"], result["answer"]) == ("error", None)
    assert result["verification"]["reasons"] == [RUN_FAILED]
    assert "timed out" in result["reason"]


def test_another_accounts_investigation_is_unknown(
    knowledge_base: None,
    agent: User,
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
    stub: Stub,
    queued_tasks: None,
) -> None:
    client_for(agent).post_json(PATH, body(provider="live", run_id="mine-1"))
    client_for(agent).post_json(PATH, body(run_id="mine-2"))
    other = client_for(make_user("agent-9", Role.AGENT))
    for run_id in ("mine-1", "mine-2", "never-1"):
        response = other.get(f"/api/v1/investigations/{run_id}")
        assert (response.status_code, response.json()) == (404, {"detail": NO_SUCH_INVESTIGATION})


def test_live_without_a_configured_endpoint_is_refused_before_queueing(
    knowledge_base: None, agent: User, client_for: Callable[[User], BearerClient], settings: Any
) -> None:
    settings.CONSOLE_LLM_BASE_URL = ""
    settings.CONSOLE_LLM_MODEL = ""
    response = client_for(agent).post_json(PATH, body(provider="live"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == LIVE_NOT_CONFIGURED
    assert not InvestigationRequest.objects.exists()


def test_a_taken_run_id_is_refused_for_a_queued_run_too(
    knowledge_base: None,
    agent: User,
    client_for: Callable[[User], BearerClient],
    stub: Stub,
    queued_tasks: None,
) -> None:
    client = client_for(agent)
    assert client.post_json(PATH, body(provider="live", run_id="dup")).status_code == 202
    again = client.post_json(PATH, body(provider="live", run_id="dup"))
    assert again.status_code == 409 and again.json() == {"detail": RUN_ID_TAKEN}
    assert InvestigationRequest.objects.filter(run_id="dup").count() == 1


def test_live_investigations_in_flight_are_limited_per_account(
    knowledge_base: None,
    agent: User,
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
    stub: Stub,
    queued_tasks: None,
    settings: Any,
) -> None:
    settings.CONSOLE_API_LIVE_INVESTIGATIONS = 2
    client = client_for(agent)
    for n in range(2):
        assert client.post_json(PATH, body(provider="live", run_id=f"fl-{n}")).status_code == 202
    refused = client.post_json(PATH, body(provider="live", run_id="fl-2"))
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert refused.json() == {"detail": TOO_MANY_LIVE.format(limit=2)}
    assert not InvestigationRequest.objects.filter(run_id="fl-2").exists()
    # Another account is not held back by this one; a finished run frees a place.
    other = client_for(make_user("agent-9", Role.AGENT))
    assert other.post_json(PATH, body(provider="live", run_id="o-1")).status_code == 202
    InvestigationRequest.objects.filter(run_id="fl-0").update(state=RequestState.FINISHED)
    assert client.post_json(PATH, body(provider="live", run_id="fl-3")).status_code == 202
    # Scripted runs answer in the request and are not counted.
    assert client.post_json(PATH, body(run_id="s-1")).status_code == 200


def test_the_request_rate_is_limited_per_account_with_retry_after(
    agent: User,
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
    settings: Any,
) -> None:
    settings.CONSOLE_API_RATE = "3/m"
    client = client_for(agent)
    assert [client.get("/api/v1/ping").status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get("/api/v1/ping")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    other = client_for(make_user("agent-9", Role.AGENT))
    assert other.get("/api/v1/ping").status_code == 200


def test_the_rate_counts_fixed_windows_and_says_when_the_window_ends(
    agent: User,
    client_for: Callable[[User], BearerClient],
    settings: Any,
    frozen_clock: Callable[[datetime], Any],
) -> None:
    settings.CONSOLE_API_RATE = "2/m"
    client = client_for(agent)
    frozen = frozen_clock(datetime(2026, 10, 1, 4, 0, 45, tzinfo=UTC))
    assert [client.get("/api/v1/ping").status_code for _ in range(2)] == [200, 200]
    refused = client.get("/api/v1/ping")
    assert refused.status_code == 429
    assert refused["Retry-After"] == "15"  # the clock minute ends 15 s later
    # The next minute starts a new count.
    frozen.at = datetime(2026, 10, 1, 4, 1, 0, tzinfo=UTC)
    assert [client.get("/api/v1/ping").status_code for _ in range(3)] == [200, 200, 429]
    # A changed rate applies at once, counted afresh in its own windows.
    settings.CONSOLE_API_RATE = "3/h"
    assert client.get("/api/v1/ping").status_code == 200


def test_an_instance_whose_clock_is_behind_counts_in_the_newest_window(
    agent: User, settings: Any
) -> None:
    from agentapi.limits import count_hit

    key = f"agent-account:{agent.pk}"
    assert count_hit(key, seconds=60, now=120.0) == (1, 2)
    # Another instance, a moment behind, still in window 1: counted in window 2, never reset.
    assert count_hit(key, seconds=60, now=119.9) == (2, 2)
    assert count_hit(key, seconds=60, now=180.0) == (1, 3)


@pytest.mark.parametrize("rate", ["ten/m", "0/m", "5/week", "5"])
def test_a_malformed_rate_setting_is_named(rate: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from agentapi.limits import parse_rate

    with pytest.raises(ImproperlyConfigured, match="CONSOLE_API_RATE"):
        parse_rate(rate)
