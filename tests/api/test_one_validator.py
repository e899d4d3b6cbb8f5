"""One validator for every path (issue 24.10): the same bad input is refused by the API, the MCP
tools and the commands, naming the same field; a refusal writes nothing.

The API locates a field under ``body``, ``path`` or ``query``; MCP under the tool's arguments; a
command names the field as the service does. Each row's field is the same on all three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django_tasks_db.models import DBTaskResult

from agentapi.services import token_create
from experience.cases.models import Case
from experience.runs.models import Reference, Run
from reviewconsole.models import Event
from reviewconsole.roles import Role
from tests.api.conftest import (
    FACTS,
    KNOWN_AT,
    OCCURRED_AT,
    QUERY,
    SCOPE,
    BearerClient,
    Demo,
    case_body,
    retrieve_body,
    run_body,
)
from tests.api.test_access import limited_agent
from tests.helpers import run_json
from tests.mcp.test_server import call, refusal

pytestmark = pytest.mark.django_db

__all__ = ["limited_agent"]

UNKNOWN_SKILL = "skill:" + "0" * 64
MALFORMED_SKILL = "skill:nope"


def _scope_flags(scope: dict[str, str]) -> list[str]:
    return [part for name, value in scope.items() for part in (f"--{name}", value)]


def recall_args(*extra: str, run_id: str = "run-valid-1", **scope: str) -> list[str]:
    return ["recall", QUERY, *_scope_flags({**SCOPE, **scope}), "--run-id", run_id, *extra]


def run_skill_args(skill_id: str, run_id: str = "run-valid-1") -> list[str]:
    facts = [part for name, value in FACTS.items() for part in ("--fact", f"{name}={value}")]
    return [
        "run_skill",
        skill_id,
        *_scope_flags(SCOPE),
        "--at",
        OCCURRED_AT,
        "--known-at",
        KNOWN_AT,
        *facts,
        "--run-id",
        run_id,
    ]


def context_body(**changes: Any) -> dict[str, Any]:
    return {**retrieve_body(), "budget": 200, **changes}


@dataclass(frozen=True)
class Row:
    """One bad input, as each path takes it, and the field every path must name."""

    name: str
    field: str
    api: tuple[str, dict[str, Any]]
    mcp: tuple[str, dict[str, Any]]
    command: list[str]
    api_status: int = 422
    mcp_error: str = "invalid"
    # Where the API locates the field (the request part).
    api_part: str = "body"


ROWS = [
    Row(
        "placeholder store",
        "scope.store",
        ("/api/v1/experience/retrieve", retrieve_body(scope={**SCOPE, "store": "*"})),
        ("retrieve_experience", retrieve_body(scope={**SCOPE, "store": "*"})),
        recall_args(store="*"),
    ),
    Row(
        "limit 0",
        "limit",
        ("/api/v1/experience/retrieve", retrieve_body(limit=0)),
        ("retrieve_experience", retrieve_body(limit=0)),
        recall_args("--limit", "0"),
    ),
    Row(
        "limit 21",
        "limit",
        ("/api/v1/experience/retrieve", retrieve_body(limit=21)),
        ("retrieve_experience", retrieve_body(limit=21)),
        recall_args("--limit", "21"),
    ),
    Row(
        "limit not a number",
        "limit",
        ("/api/v1/experience/retrieve", retrieve_body(limit="abc")),
        ("retrieve_experience", retrieve_body(limit="abc")),
        recall_args("--limit", "abc"),
    ),
    Row(
        "budget 0",
        "budget",
        ("/api/v1/experience/context", context_body(budget=0)),
        ("experience_context", context_body(budget=0)),
        recall_args("--format", "context", "--budget", "0"),
    ),
    Row(
        "budget not a number",
        "budget",
        ("/api/v1/experience/context", context_body(budget="abc")),
        ("experience_context", context_body(budget="abc")),
        recall_args("--format", "context", "--budget", "abc"),
    ),
    Row(
        "run id with a space",
        "run_id",
        ("/api/v1/experience/retrieve", retrieve_body(run_id="a b")),
        ("retrieve_experience", retrieve_body(run_id="a b")),
        recall_args(run_id="a b"),
    ),
    Row(
        "malformed skill id",
        "skill_id",
        (f"/api/v1/skills/{MALFORMED_SKILL}/run", run_body()),
        ("run_skill", {"skill_id": MALFORMED_SKILL, **run_body()}),
        run_skill_args(MALFORMED_SKILL),
        api_part="path",
    ),
    Row(
        "unknown skill id",
        "skill_id",
        (f"/api/v1/skills/{UNKNOWN_SKILL}/run", run_body()),
        ("run_skill", {"skill_id": UNKNOWN_SKILL, **run_body()}),
        run_skill_args(UNKNOWN_SKILL),
        api_status=404,
        mcp_error="not_found",
    ),
]


def _written() -> tuple[int, ...]:
    return (
        Run.objects.count(),
        Reference.objects.count(),
        Event.objects.count(),
        DBTaskResult.objects.count(),
    )


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_every_path_refuses_alike_naming_the_same_field(
    row: Row, agent: User, agent_client: BearerClient, demo: Demo
) -> None:
    """Fails before issue 24.10 on: MCP (plain text, no structured error), ``--limit abc`` and
    ``--budget abc`` (no field), and the unknown skill id (stored, exit 0, API 200)."""
    token = token_create(user=agent, name="mcp").text
    before = _written()

    path, body = row.api
    response = agent_client.post_json(path, body)
    assert response.status_code == row.api_status, response.content
    if row.api_status == 422:
        (error,) = response.json()["detail"]
        assert error["loc"][0] == row.api_part
        assert ".".join(map(str, error["loc"][1:])) == row.field

    tool, arguments = row.mcp
    result = call(token, tool, arguments)
    detail = refusal(result)
    assert detail["error"] == row.mcp_error
    assert ".".join(map(str, detail["loc"])) == row.field

    status, answer = run_json(*row.command, "--as", agent.username)
    assert status != 0
    assert answer["ok"] is False
    assert answer["field"] == row.field

    assert _written() == before


def test_the_outcome_endpoint_locates_its_run_id_in_the_path(
    agent_client: BearerClient, demo: Demo
) -> None:
    response = agent_client.post_json("/api/v1/runs/two%20words/outcome", {"outcome": "unresolved"})
    assert response.status_code == 422
    assert [error["loc"] for error in response.json()["detail"]] == [["path", "run_id"]]
    # A well-formed id that names no run of the caller's is unknown, not invalid (issue 41.5).
    unknown = agent_client.post_json("/api/v1/runs/nothing/outcome", {"outcome": "unresolved"})
    assert unknown.status_code == 404


def test_a_run_id_of_a_read_by_id_is_located_in_the_query(
    make_user: Callable[[str, str], User],
    client_for: Callable[[User], BearerClient],
    agent_client: BearerClient,
    demo: Demo,
) -> None:
    opened = agent_client.post_json("/api/v1/experience/retrieve", retrieve_body(run_id="taken"))
    assert opened.status_code == 200
    other = client_for(make_user("agent-8", Role.AGENT))
    # Another account's id is no refusal (it opens that account's own run under the same name);
    # an id that is not a run id is refused where it was given.
    own = other.get(f"/api/v1/cases/{demo.cases[0]}?run_id=taken")
    response = other.get(f"/api/v1/cases/{demo.cases[0]}", {"run_id": "not a run id"})
    assert own.status_code == 200
    assert response.status_code == 422
    assert [error["loc"] for error in response.json()["detail"]] == [["query", "run_id"]]


def test_proposing_a_case_for_a_tenant_the_agent_is_not_in_is_403(
    limited_agent: User, client_for: Callable[[User], BearerClient], at_now: object
) -> None:
    forbidden = client_for(limited_agent).post_json("/api/v1/cases", case_body())
    unknown = client_for(limited_agent).post_json(
        "/api/v1/cases", case_body(scope={**SCOPE, "tenant": "no-such-tenant"})
    )
    retrieve = client_for(limited_agent).post_json("/api/v1/experience/retrieve", retrieve_body())
    assert forbidden.status_code == unknown.status_code == retrieve.status_code == 403
    assert not Case.objects.exists()
