"""A Python client generated from the served OpenAPI schema with ``openapi-python-client`` runs
the README's agent calls (README, Connecting an agent: HTTP) and gets the answers a direct
request gets: nothing the API says (facts above all) is lost on the way through the generated
models."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client as DjangoClient

from tests.api.conftest import (
    FACTS,
    KNOWN_AT,
    OCCURRED_AT,
    SCOPE,
    BearerClient,
    Demo,
    case_body,
    retrieve_body,
    run_body,
    search_body,
)
from tests.generated_client import Generated, answer, generated_package

PACKAGE = "console_api_client"
TICKET = "两杯水果茶，优惠券用不了"


@pytest.fixture(scope="session")
def generated(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ModuleType]:
    """The client package, generated once per run from ``/api/v1/openapi.json`` as served."""
    with django_db_blocker.unblock():
        served = DjangoClient().get("/api/v1/openapi.json")
    assert served.status_code == 200
    folder = tmp_path_factory.mktemp("generated-client")
    with generated_package(served.content.decode("utf-8"), folder, PACKAGE) as package:
        yield package


class InProcessWsgi:
    """Django's WSGI application, leaving the database connection open after each request (the
    test's transaction holds it), as Django's own test client does."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            result = self.handler(environ, start_response)
            try:
                return list(result)
            finally:
                result.close()
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)


def in_process(package: ModuleType, token: str) -> Generated:
    """The generated package's operations, called through Django's WSGI application in this
    process (so the test's database is the one the API reads)."""
    return Generated(
        package, "http://testserver", token, transport=httpx.WSGITransport(app=InProcessWsgi())
    )


def direct(response: Any) -> tuple[int, Any]:
    return response.status_code, response.json()


@pytest.fixture
def token(agent: Any, token_for: Any) -> str:
    token_text: str = token_for(agent)
    return token_text


@pytest.fixture
def both(generated: ModuleType, token: str) -> tuple[Generated, BearerClient]:
    return in_process(generated, token), BearerClient(token)


pytestmark = pytest.mark.django_db


def investigation_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": TICKET,
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
    }
    body.update(changes)
    return body


def test_the_readme_search_with_facts_answers_alike(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    body = search_body()
    expected = direct(http.post_json("/api/v1/knowledge/search", body))
    # The README's example: every rule condition matches these facts.
    assert expected[0] == 200 and expected[1]["status"] == "retrieved"
    assert expected[1]["evidence"] and all(
        item["conditions"]["status"] == "match"
        for item in expected[1]["evidence"]
        if item["kind"] == "rule"
    )
    request = generated.model("KnowledgeSearchRequest", body)
    assert request.to_dict()["facts"] == FACTS  # the generated model keeps every fact
    assert answer(generated.call("knowledge", "knowledge_search", body=request)) == expected


def test_an_investigation_with_facts_answers_rules_do_not_explain_alike(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    expected = direct(http.post_json("/api/v1/investigations", investigation_body()))
    assert expected[0] == 200
    assert expected[1]["answer"]["conclusion_code"] == "rules_do_not_explain"
    status, got = answer(
        generated.call(
            "investigations",
            "investigation_create",
            body=generated.model("InvestigationRequest", investigation_body()),
        )
    )
    assert status == 200
    assert got["answer"]["conclusion_code"] == "rules_do_not_explain"
    assert got["context"]["facts"] == FACTS
    # Two runs of one ticket: the same answer, under another run id.
    for key in ("status", "answer", "verification", "missing", "scope", "context", "provider"):
        assert got[key] == expected[1][key], key
    assert answer(generated.call("investigations", "investigation_read", got["run_id"])) == direct(
        http.get(f"/api/v1/investigations/{got['run_id']}")
    )


def test_without_facts_the_investigation_asks_for_them_on_both_paths(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    body = investigation_body(facts={})
    expected = direct(http.post_json("/api/v1/investigations", body))
    got = answer(
        generated.call(
            "investigations",
            "investigation_create",
            body=generated.model("InvestigationRequest", body),
        )
    )
    assert expected[1]["answer"]["conclusion_code"] != "rules_do_not_explain"
    assert got[1]["answer"] == expected[1]["answer"]


def _experience_bodies(run_id: str) -> dict[str, dict[str, Any]]:
    return {
        "retrieve": retrieve_body(run_id=run_id),
        "run": run_body(run_id=run_id),
        "context": {**retrieve_body(run_id=run_id), "budget": 200},
        "outcome": {"outcome": "resolved_by_lead", "note": "补充商品后恢复"},
    }


def test_the_readme_experience_calls_answer_alike(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    model = generated.model
    assert answer(generated.call("health", "ping")) == direct(http.get("/api/v1/ping"))

    # Each path reads under its own run id, step by step (an outcome moves what the next read
    # sees); the answers differ in nothing else.
    mine, theirs = _experience_bodies("gen-client-1"), _experience_bodies("gen-direct-1")
    skill = demo.skill

    def both_ways(expected: Any, got: Any) -> tuple[Any, Any]:
        e_status, e_body = direct(expected)
        status, body = answer(got)
        assert status == e_status == 200, (e_body, body)
        return e_body, body

    e_retrieved, retrieved = both_ways(
        http.post_json("/api/v1/experience/retrieve", theirs["retrieve"]),
        generated.call(
            "experience",
            "experience_retrieve",
            body=model("ExperienceRetrieveRequest", mine["retrieve"]),
        ),
    )
    assert retrieved == e_retrieved and retrieved["items"]

    e_skill_run, skill_run = both_ways(
        http.post_json(f"/api/v1/skills/{skill}/run", theirs["run"]),
        generated.call(
            "experience", "skill_run", skill, body=model("SkillRunRequest", mine["run"])
        ),
    )
    assert skill_run["status"] == "needs_review"
    assert {**skill_run, "run_id": None} == {**e_skill_run, "run_id": None}

    e_block, block = both_ways(
        http.post_json("/api/v1/experience/context", theirs["context"]),
        generated.call(
            "experience",
            "experience_context",
            body=model("ExperienceContextRequest", mine["context"]),
        ),
    )
    assert block == e_block and block["items"]

    e_reported, reported = both_ways(
        http.post_json("/api/v1/runs/gen-direct-1/outcome", theirs["outcome"]),
        generated.call(
            "experience",
            "run_outcome",
            "gen-client-1",
            body=model("RunOutcomeRequest", mine["outcome"]),
        ),
    )
    same = ("outcome", "note", "reported_by", "counts", "items")
    assert {key: reported[key] for key in same} == {key: e_reported[key] for key in same}

    e_record, record = both_ways(
        http.get("/api/v1/runs/gen-direct-1"),
        generated.call("experience", "run_read", "gen-client-1"),
    )
    assert [r["item_id"] for r in record["references"]] == [
        r["item_id"] for r in e_record["references"]
    ]
    assert [r["context"] for r in record["runs"]] == [r["context"] for r in e_record["runs"]]
    assert record["runs"][0]["context"]["facts"] == FACTS

    case_id = demo.cases[0]
    assert answer(generated.call("experience", "case_read", case_id)) == direct(
        http.get(f"/api/v1/cases/{case_id}")
    )
    assert answer(generated.call("experience", "skill_read", skill)) == direct(
        http.get(f"/api/v1/skills/{skill}")
    )


def test_a_proposed_case_is_the_same_case_on_both_paths(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    status, proposed = answer(
        generated.call(
            "experience", "case_propose", body=generated.model("CaseProposal", case_body())
        )
    )
    assert status == 201 and proposed["created"] is True
    again = direct(http.post_json("/api/v1/cases", case_body()))
    assert again == (200, {**proposed, "created": False})


def test_refusals_reach_the_generated_client_as_the_api_wrote_them(
    both: tuple[Generated, BearerClient], demo: Demo
) -> None:
    generated, http = both
    # A fact name outside the pattern: refused on the fact, on both paths.
    body = search_body(facts={"Channel": "miniapp"})
    expected = direct(http.post_json("/api/v1/knowledge/search", body))
    assert expected[0] == 422
    assert expected[1]["detail"][0]["loc"] == ["body", "facts", "Channel", "[key]"]
    request = generated.model("KnowledgeSearchRequest", search_body())
    request.facts["Channel"] = "miniapp"
    del request.facts["channel"], request.facts["product"], request.facts["basket_cents"]
    assert answer(generated.call("knowledge", "knowledge_search", body=request)) == expected
