"""Bad bodies get a 422 naming the field (as a JSON path); nothing is partially written."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentapi import operations
from experience.cases.models import Case
from experience.runs.models import Reference, Run
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


def _loc(response: Any) -> list[Any]:
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert detail and all(isinstance(item["msg"], str) and item["msg"] for item in detail)
    return list(detail[0]["loc"])


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"occurred_at": "2026-09-18T14:00:00"}, ["body", "occurred_at"]),
        ({"known_at": "yesterday"}, ["body", "known_at"]),
        ({"known_at": 1789000000}, ["body", "known_at"]),
        ({"occurred_at": "0001-01-01T00:00:00+08:00"}, ["body", "occurred_at"]),
        ({"campaign": "*"}, ["body", "campaign"]),
        ({"store": "any"}, ["body", "store"]),
        ({"brand": "N/A"}, ["body", "brand"]),
        ({"tenant": ""}, ["body", "tenant"]),
        ({"query": "券" * 2001}, ["body", "query"]),
        ({"query": ""}, ["body", "query"]),
        ({"query": "a\x00b"}, ["body", "query"]),
        ({"limit": 0}, ["body", "limit"]),
        ({"limit": "4"}, ["body", "limit"]),
        ({"facts": {"Channel": "miniapp"}}, ["body", "facts", "Channel", "[key]"]),
        ({"facts": {"basket_cents": 3.5}}, ["body", "facts", "basket_cents"]),
        ({"brand_override": "x"}, ["body", "brand_override"]),
    ],
)
def test_search_body_errors_name_the_field(
    agent_client: BearerClient, changes: dict[str, Any], loc: list[Any]
) -> None:
    response = agent_client.post_json("/api/v1/knowledge/search", search_body(**changes))
    assert _loc(response)[: len(loc)] == loc


def test_a_naive_datetime_is_explained(agent_client: BearerClient) -> None:
    response = agent_client.post_json(
        "/api/v1/knowledge/search", search_body(occurred_at="2026-09-18T14:00:00")
    )
    assert "timezone" in response.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"scope": {**SCOPE, "campaign": "all"}}, ["body", "scope", "campaign"]),
        ({"scope": {**SCOPE, "region": "east"}}, ["body", "scope", "region"]),
        ({"run_id": "has space"}, ["body", "run_id"]),
        ({"run_id": "x" * 101}, ["body", "run_id"]),
        ({"now": "2026-10-01T12:00:00"}, ["body", "now"]),
        ({"query": "   "}, ["body", "query"]),
    ],
)
def test_retrieve_body_errors_name_the_field(
    agent_client: BearerClient, demo: Demo, changes: dict[str, Any], loc: list[Any]
) -> None:
    response = agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(**changes))
    assert _loc(response) == loc
    assert not Reference.objects.exists()


def test_run_skill_body_errors_store_no_run(agent_client: BearerClient, demo: Demo) -> None:
    response = agent_client.post_json(
        f"/api/v1/skills/{demo.skill}/run", run_body(scope={**SCOPE, "store": "unknown"})
    )
    assert _loc(response) == ["body", "scope", "store"]
    assert not Run.objects.filter(run_id="run-api-1").exists()


def _evidence(excerpt: str) -> dict[str, Any]:
    return {"source_id": "thread:1#m1", "excerpt": excerpt}


@pytest.mark.parametrize(
    ("changes", "loc"),
    [
        ({"scope": {**SCOPE, "deployment": "*"}}, ["body", "scope", "deployment"]),
        ({"scope": {k: v for k, v in SCOPE.items() if k != "store"}}, ["body", "scope", "store"]),
        ({"valid_to": "2027-12-31T00:00:00"}, ["body", "valid_to"]),
        ({"valid_to": "2026-01-01T00:00:00+08:00"}, ["body", "valid_to"]),
        ({"title": "t" * 301}, ["body", "title"]),
        ({"observations": [_evidence("x" * 2001)]}, ["body", "observations", 0, "excerpt"]),
        ({"observations": [_evidence("   ")]}, ["body", "observations", 0, "excerpt"]),
        (
            {"counterevidence": [{"hypothesis": "h", "statement": "s", "refutes": "r", "x": 1}]},
            ["body", "counterevidence", 0, "x"],
        ),
        ({"supersedes": "case:" + "0" * 64}, ["body", "supersedes"]),
        ({"type": "skill"}, ["body", "type"]),
    ],
)
def test_case_body_errors_name_the_field_and_store_nothing(
    agent_client: BearerClient, at_now: object, changes: dict[str, Any], loc: list[Any]
) -> None:
    response = agent_client.post_json("/api/v1/cases", case_body(**changes))
    assert _loc(response) == loc
    assert not Case.objects.exists()


@pytest.mark.parametrize("body", ["{not json", "[1, 2]", "null", '"text"'])
def test_a_body_that_is_not_a_json_object_is_a_client_error(
    agent_client: BearerClient, body: str
) -> None:
    response = agent_client.post(
        "/api/v1/knowledge/search", data=body, content_type="application/json"
    )
    assert response.status_code in (400, 422)
    assert "detail" in response.json()


def test_an_unexpected_error_is_logged_and_answered_without_internals(
    agent_client: BearerClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(**_: Any) -> dict[str, Any]:
        raise RuntimeError("secret internal state")

    monkeypatch.setattr(operations, "knowledge_search", broken)
    with caplog.at_level(logging.ERROR, logger="agentapi.api"):
        response = agent_client.post_json("/api/v1/knowledge/search", search_body())
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error"}
    assert "secret internal state" in caplog.text
