"""``POST /api/v1/experience/context`` and ``POST /api/v1/runs/{run_id}/outcome``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from experience.retrieval.context import TOKENIZER
from experience.review.outcomes import NO_READS
from experience.runs.models import Reference
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from tests.api.conftest import BearerClient, Demo, retrieve_body

pytestmark = pytest.mark.django_db


def context_body(**changes: object) -> dict[str, object]:
    body = {**retrieve_body(run_id="ctx-1"), "budget": 300}
    body.update(changes)
    return body


def test_context_block_within_budget_and_read(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json("/api/v1/experience/context", context_body())
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["budget"], body["tokenizer"]) == ("ok", 300, TOKENIZER)
    assert body["items"] and body["tokens"] <= 300
    for item in body["items"]:
        assert item["id"] in body["block"]
    assert {i["id"] for i in body["items"]} == set(
        Reference.objects.filter(run_id="ctx-1").values_list("item_id", flat=True)
    )


@pytest.mark.parametrize("budget", [0, 32_001, "100", 1.5])
def test_bad_budget_is_a_422_on_budget(
    agent_client: BearerClient, demo: Demo, budget: object
) -> None:
    response = agent_client.post_json("/api/v1/experience/context", context_body(budget=budget))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "budget"]


def test_outcome_by_the_reader(agent_client: BearerClient, demo: Demo) -> None:
    agent_client.post_json("/api/v1/experience/context", context_body(run_id="ctx-2"))
    response = agent_client.post_json(
        "/api/v1/runs/ctx-2/outcome", {"outcome": "resolved_by_lead", "note": "store list"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["outcome"] == "resolved_by_lead"
    # An agent's confirmation waits for a reviewer before it moves confidence.
    assert response.json()["counts"] is False
    assert Event.objects.filter(action=Action.RUN_OUTCOME, target="ctx-2").count() == 1


def test_outcome_of_a_run_with_no_reads_is_an_unknown_run(
    agent_client: BearerClient, demo: Demo
) -> None:
    # Issue 41.5: a run id that names no run of the caller's is unknown (404), like any id.
    response = agent_client.post_json("/api/v1/runs/nothing/outcome", {"outcome": "unresolved"})
    assert response.status_code == 404
    assert response.json() == {"detail": NO_READS}


def test_outcome_must_be_one_of_three(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json("/api/v1/runs/x/outcome", {"outcome": "fixed"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "outcome"]


def test_another_agents_run_is_answered_as_an_unknown_one(
    agent_client: BearerClient,
    demo: Demo,
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
) -> None:
    agent_client.post_json("/api/v1/experience/context", context_body(run_id="ctx-3"))
    other = client_for(make_user("agent-b", Role.AGENT))
    response = other.post_json("/api/v1/runs/ctx-3/outcome", {"outcome": "unresolved"})
    unknown = other.post_json("/api/v1/runs/ctx-0/outcome", {"outcome": "unresolved"})
    assert response.status_code == unknown.status_code == 404
    assert response.content == unknown.content
