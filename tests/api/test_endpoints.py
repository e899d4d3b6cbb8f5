"""What an agent can do over HTTP, endpoint by endpoint, on the shipped demo memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case, EvidenceCheck
from experience.core.models import Status
from experience.review import decisions
from experience.runs.models import Reference, Run
from reviewconsole.models import Action, Event
from tests.api.conftest import (
    SCOPE,
    BearerClient,
    Demo,
    case_body,
    retrieve_body,
    run_body,
    search_body,
)

pytestmark = pytest.mark.django_db


def test_ping_names_the_token_user(agent_client: BearerClient, agent: User) -> None:
    response = agent_client.get("/api/v1/ping")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "user": agent.get_username()}


# --- knowledge search ------------------------------------------------------------------------


def test_search_returns_the_knowledge_result(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json("/api/v1/knowledge/search", search_body())
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "retrieved"
    assert "doc:rule-b@1" in [item["id"] for item in result["evidence"]]
    first = result["evidence"][0]
    assert first["conditions"] == {"status": "match", "mismatches": [], "unknown": []}
    assert set(first) >= {"quote", "source", "valid_from", "published_at", "content_hash"}


def test_search_without_campaign_needs_context_and_searches_nothing(
    agent_client: BearerClient, demo: Demo
) -> None:
    body = search_body()
    del body["campaign"]
    response = agent_client.post_json("/api/v1/knowledge/search", body)
    assert response.status_code == 200
    assert response.json() == {
        "status": "needs_context",
        "missing": ["campaign"],
        "truncated": False,
        "evidence": [],
    }


def test_search_scope_is_the_requests_own(agent_client: BearerClient, demo: Demo) -> None:
    """Another store's documents never answer for this one (no widening to the brand)."""
    response = agent_client.post_json("/api/v1/knowledge/search", search_body(store="store-003"))
    assert response.json()["status"] == "no_match"


def test_search_with_unknown_facts_says_what_is_missing(
    agent_client: BearerClient, demo: Demo
) -> None:
    response = agent_client.post_json(
        "/api/v1/knowledge/search", search_body(facts={"basket_cents": 3200})
    )
    result = response.json()
    assert result["status"] == "needs_context"
    assert result["missing"] == ["channel", "product"]


# --- experience retrieval --------------------------------------------------------------------


def test_retrieve_returns_approved_items_and_records_each_read(
    agent_client: BearerClient, demo: Demo
) -> None:
    response = agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(limit=5))
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "ok"
    returned = {item["id"] for item in result["items"]}
    assert returned == {*demo.cases, demo.skill}
    assert not returned & set(demo.candidates)
    assert (
        set(Reference.objects.filter(run_id="run-api-1").values_list("item_id", flat=True))
        == returned
    )


@pytest.mark.parametrize("field", ["tenant", "brand", "store", "campaign", "deployment"])
def test_retrieve_without_a_scope_field_falls_back_naming_it(
    agent_client: BearerClient, demo: Demo, field: str
) -> None:
    scope = {k: v for k, v in SCOPE.items() if k != field}
    response = agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(scope=scope))
    assert response.status_code == 200
    assert response.json() == {"status": "fallback", "missing": [field], "items": []}
    assert not Reference.objects.exists()


def test_retrieve_in_another_release_finds_nothing(agent_client: BearerClient, demo: Demo) -> None:
    scope = {**SCOPE, "deployment": "release-2"}
    response = agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(scope=scope))
    assert response.json() == {"status": "ok", "missing": [], "items": []}


# --- skills -----------------------------------------------------------------------------------


def test_run_skill_needs_review_at_best(
    agent_client: BearerClient, demo: Demo, agent: User
) -> None:
    response = agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body())
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "needs_review"
    assert result["tool_calls"] == 1
    assert sorted(result["cases"]) == sorted(demo.cases)
    run = Run.objects.get(run_id="run-api-1")
    assert run.actor == agent


def test_run_skill_in_another_release_falls_back_before_any_tool(
    agent_client: BearerClient, demo: Demo
) -> None:
    scope = {**SCOPE, "deployment": "release-2"}
    response = agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body(scope=scope))
    result = response.json()
    assert result["status"] == "fallback"
    assert result["reason"].startswith("scope_mismatch")
    assert result["tool_calls"] == 0


def test_run_skill_without_campaign_falls_back_naming_it(
    agent_client: BearerClient, demo: Demo
) -> None:
    scope = {k: v for k, v in SCOPE.items() if k != "campaign"}
    response = agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body(scope=scope))
    result = response.json()
    assert result["status"] == "fallback"
    assert result["missing"] == ["campaign"]
    assert result["tool_calls"] == 0


def test_run_skill_with_malformed_id_is_refused(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json("/api/v1/skills/not-a-skill/run", run_body())
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "skill_id"]


def test_skill_read_shows_an_approved_skill(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.get(f"/api/v1/skills/{demo.skill}")
    assert response.status_code == 200
    skill = response.json()
    assert skill["status"] == "approved"
    assert skill["available"] is True
    assert sorted(skill["cases"]) == sorted(demo.cases)
    assert skill["recipe"][0]["tool"] == "search_knowledge"


# --- cases ------------------------------------------------------------------------------------


def test_propose_makes_the_agent_the_submitter_with_unchecked_evidence(
    agent_client: BearerClient, agent: User, at_now: Any
) -> None:
    body = case_body()
    assert body["diagnosis"]["evidence"][0]["verified"] is True
    response = agent_client.post_json("/api/v1/cases", body)
    assert response.status_code == 201
    proposed = response.json()
    assert proposed["status"] == "candidate"
    assert proposed["created"] is True
    case = Case.objects.get(pk=proposed["id"])
    assert case.submitted_by == agent
    assert case.submitted_via == "api"
    assert case.status == Status.CANDIDATE
    assert not EvidenceCheck.objects.filter(evidence__case=case).exists()
    event = Event.objects.get(action=Action.CASE_SUBMIT, target=case.id)
    assert event.actor == agent


def test_proposing_identical_content_again_creates_nothing(
    agent_client: BearerClient, at_now: Any
) -> None:
    first = agent_client.post_json("/api/v1/cases", case_body()).json()
    again = agent_client.post_json("/api/v1/cases", case_body())
    assert again.status_code == 200
    assert again.json() == {**first, "created": False}
    assert Case.objects.count() == 1


def test_a_submitter_named_in_the_body_is_refused(agent_client: BearerClient, at_now: Any) -> None:
    response = agent_client.post_json("/api/v1/cases", case_body(submitted_by="rita"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "submitted_by"]
    assert not Case.objects.exists()


def test_case_read_shows_an_approved_case(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.get(f"/api/v1/cases/{demo.cases[0]}")
    assert response.status_code == 200
    case = response.json()
    assert case["id"] == demo.cases[0]
    assert case["status"] == "approved"
    assert case["scope"] == SCOPE
    assert case["diagnosis"]["evidence"]


def test_case_read_with_run_id_records_the_read(agent_client: BearerClient, demo: Demo) -> None:
    agent_client.get(f"/api/v1/cases/{demo.cases[0]}", {"run_id": "run-read-1"})
    assert list(Reference.objects.values_list("run_id", "item_id")) == [
        ("run-read-1", demo.cases[0])
    ]


def test_candidates_are_invisible_to_agents(agent_client: BearerClient, demo: Demo) -> None:
    for candidate in demo.candidates:
        response = agent_client.get(f"/api/v1/cases/{candidate}")
        assert response.status_code == 404, candidate


def test_a_rejected_or_revoked_case_is_not_found(
    agent_client: BearerClient, demo: Demo, second_reviewer: User
) -> None:
    from experience.cases import selectors
    from experience.review import revocation

    revocation.case_revoke(
        case=selectors.case_get(demo.cases[0]), actor=second_reviewer, reason="wrong diagnosis"
    )
    decisions.case_reject(
        case=selectors.case_get(demo.candidates[0]), actor=second_reviewer, reason="duplicate"
    )
    assert agent_client.get(f"/api/v1/cases/{demo.cases[0]}").status_code == 404
    assert agent_client.get(f"/api/v1/cases/{demo.candidates[0]}").status_code == 404
    # The skill citing the revoked case is still approved, but no longer usable.
    skill = agent_client.get(f"/api/v1/skills/{demo.skill}").json()
    assert skill["available"] is False
    assert skill["unavailable_reason"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/cases/case:" + "0" * 64,
        "/api/v1/cases/nonsense",
        "/api/v1/skills/skill:" + "0" * 64,
        "/api/v1/skills/%00",
        "/api/v1/runs/no-such-run",
        "/api/v1/runs/a%00b",
    ],
)
def test_unknown_ids_are_404(agent_client: BearerClient, demo: Demo, path: str) -> None:
    response = agent_client.get(path)
    assert response.status_code == 404
    assert response.json()["detail"]


# --- runs -------------------------------------------------------------------------------------


def test_run_read_shows_skill_runs_and_memory_reads(agent_client: BearerClient, demo: Demo) -> None:
    agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="t-1/2"))
    agent_client.post_json(f"/api/v1/skills/{demo.skill}/run", run_body(run_id="t-1/2"))
    response = agent_client.get("/api/v1/runs/t-1/2")
    assert response.status_code == 200
    record = response.json()
    assert record["run_id"] == "t-1/2"
    assert [run["status"] for run in record["runs"]] == ["needs_review"]
    assert record["runs"][0]["scope"] == SCOPE
    read = {ref["item_id"] for ref in record["references"]}
    assert read >= {demo.skill, *demo.cases}


def test_every_endpoint_answers_within_a_bounded_number_of_queries(
    agent_client: BearerClient,
    demo: Demo,
    django_assert_max_num_queries: Callable[[int], Any],
) -> None:
    agent_client.get("/api/v1/ping")  # marks the token as used, once a minute at most
    with django_assert_max_num_queries(1):
        agent_client.get("/api/v1/ping")
    with django_assert_max_num_queries(8):
        agent_client.post_json("/api/v1/knowledge/search", search_body())


@pytest.mark.parametrize("path", ["/api/v1/nothing", "/api/v1/cases/x/approve", "/api/v1/a\nb"])
def test_unknown_paths_under_the_api_are_json(agent_client: BearerClient, path: str) -> None:
    response = agent_client.get(path)
    assert response.status_code in (404, 405)
    assert response["Content-Type"] == "application/json; charset=utf-8"


def test_any_valid_utc_offset_is_accepted(agent_client: BearerClient, demo: Demo) -> None:
    """PostgreSQL refuses offsets beyond ±15:59 that ISO 8601 allows; times are sent in UTC."""
    # The same instants as the demo ticket (14:00 and 14:10 at +08:00).
    body = search_body(
        occurred_at="2026-09-17T07:00:00-23:00", known_at="2026-09-19T05:10:00+23:00"
    )
    offset = agent_client.post_json("/api/v1/knowledge/search", body)
    assert offset.status_code == 200
    assert offset.json() == agent_client.post_json("/api/v1/knowledge/search", search_body()).json()
