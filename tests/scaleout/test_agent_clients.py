"""Agents reach the production recipe the way they do in production (issue 29, "Done when"): a
remote MCP client (the official SDK's Streamable HTTP client) and an API client generated with
``openapi-python-client`` from the deployment's live schema each run the README's agent session
through HAProxy, against several web instances and an MCP server on one PostgreSQL database;
and a reviewer's page gets its stylesheet and scripts from the instances through the balancer.

The deployment is conftest.py's, shared with the scale-out test (which kills part of it, so it
runs after these). Each answer is compared with the same call made directly on the HTTP API
through the balancer: the MCP tools declare the API's responses as their output, and a
generated client must lose nothing the API says.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from scripts.cluster import ROOT, Cluster
from tests.api.conftest import FACTS, KNOWN_AT, OCCURRED_AT, QUERY, SCOPE, case_body
from tests.generated_client import Generated, answer, generated_package
from tests.scaleout.conftest import GROUP, Deployment

pytestmark = GROUP

T = TypeVar("T")
TICKET = "两杯水果茶，优惠券用不了"
SEARCH = {
    "query": QUERY,
    **{key: SCOPE[key] for key in ("tenant", "brand", "store", "campaign")},
    "occurred_at": OCCURRED_AT,
    "known_at": KNOWN_AT,
    "facts": FACTS,
}
INVESTIGATION = {
    "text": TICKET,
    "scope": SCOPE,
    "occurred_at": OCCURRED_AT,
    "known_at": KNOWN_AT,
    "facts": FACTS,
}
# What one run of a ticket answers, whichever run: everything but its run id and times.
INVESTIGATION_KEYS = ("status", "answer", "verification", "missing", "scope", "context")


def retrieve(run_id: str) -> dict[str, Any]:
    return {"query": QUERY, "scope": SCOPE, "run_id": run_id}


def skill_run(run_id: str) -> dict[str, Any]:
    return {
        "scope": SCOPE,
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": FACTS,
        "run_id": run_id,
    }


def context(run_id: str) -> dict[str, Any]:
    return {**retrieve(run_id), "budget": 200}


def agent_token(cluster: Cluster, name: str) -> str:
    """A new agent account of the demo's tenant and its token, made as an operator does."""
    cluster.manage("add_user", name, "--role", "agent", "--tenant", "teahouse")
    issued: dict[str, str] = json.loads(cluster.manage("create_token", name, "--json").stdout)
    return issued["token"]


class Direct:
    """The HTTP API through the balancer, over real HTTP, with one agent's token."""

    def __init__(self, cluster: Cluster, token: str) -> None:
        self.http = httpx.Client(
            base_url=cluster.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        )

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        response = self.http.post(path, json=body)
        return response.status_code, response.json()

    def get(self, path: str) -> tuple[int, Any]:
        response = self.http.get(path)
        return response.status_code, response.json()


@pytest.fixture
def direct_for(deployment: Deployment) -> Iterator[Callable[[str], Direct]]:
    """Direct API clients with a token each, closed after the test."""
    made: list[Direct] = []

    def make(token: str) -> Direct:
        made.append(Direct(deployment.cluster, token))
        return made[-1]

    yield make
    for direct in made:
        direct.http.close()


def served_by(cluster: Cluster, backend: str) -> dict[str, int]:
    """Requests each server of ``backend`` answered so far (HAProxy's counters)."""
    return {
        row["svname"]: int(row["stot"])
        for row in cluster.haproxy_stats()
        if row["pxname"] == backend and row["svname"] not in ("FRONTEND", "BACKEND")
    }


def grew(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {name for name, count in after.items() if count > before.get(name, 0)}


def mcp_session(cluster: Cluster, token: str, scenario: Callable[[Client], Awaitable[T]]) -> T:
    async def run() -> T:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(cluster.mcp_url, http_client=http)) as client,
        ):
            return await scenario(client)

    return asyncio.run(asyncio.wait_for(run(), timeout=300))


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_the_readme_agent_session_over_mcp_through_the_balancer(
    deployment: Deployment, direct_for: Callable[[str], Direct]
) -> None:
    """Search, retrieve, run a skill, build the context block, investigate, report the outcome
    and propose a case through HAProxy's /mcp; each tool's answer is what the HTTP API answers
    for the same call."""
    cluster = deployment.cluster
    token = agent_token(cluster, "remote-mcp-agent")
    direct = direct_for(token)
    mcp_before, web_before = served_by(cluster, "mcp"), served_by(cluster, "web")
    mine, theirs = "cluster-mcp-1", "cluster-mcp-direct-1"

    async def session(client: Client) -> tuple[set[str], dict[str, dict[str, Any]]]:
        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return structured(await client.call_tool(name, arguments))

        listed = {tool.name for tool in (await client.list_tools()).tools}
        return listed, {
            "search": await call("search_knowledge", SEARCH),
            "retrieve": await call("retrieve_experience", retrieve(mine)),
        }

    tools, first = mcp_session(cluster, token, session)
    assert tools >= {
        "search_knowledge",
        "retrieve_experience",
        "run_skill",
        "experience_context",
        "investigate",
        "run_outcome",
        "propose_case",
    }
    # The README's search: every rule condition matches these facts.
    search = first["search"]
    assert search["status"] == "retrieved" and search["evidence"]
    assert all(
        item["conditions"]["status"] == "match"
        for item in search["evidence"]
        if item["kind"] == "rule"
    )
    assert direct.post("/api/v1/knowledge/search", SEARCH) == (200, search)
    retrieved = first["retrieve"]
    assert retrieved["status"] == "ok" and retrieved["items"]
    status, expected = direct.post("/api/v1/experience/retrieve", retrieve(theirs))
    assert status == 200
    assert {**retrieved, "run_id": None} == {**expected, "run_id": None}
    skill = next(item["id"] for item in retrieved["items"] if item["type"] == "skill")

    async def rest(client: Client) -> dict[str, dict[str, Any]]:
        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return structured(await client.call_tool(name, arguments))

        return {
            "skill": await call("run_skill", {"skill_id": skill, **skill_run(mine)}),
            "context": await call("experience_context", context(mine)),
            "investigation": await call("investigate", INVESTIGATION),
            "outcome": await call("run_outcome", {"run_id": mine, "outcome": "resolved_by_lead"}),
            "proposed": await call("propose_case", case_body(incident="INC-MCP-CLUSTER")),
        }

    # A second session: the server keeps nothing between requests, any process answers.
    got = mcp_session(cluster, token, rest)

    assert got["skill"]["status"] == "needs_review" and got["skill"]["run_id"] == mine
    status, expected = direct.post(f"/api/v1/skills/{skill}/run", skill_run(theirs))
    assert status == 200
    assert {**got["skill"], "run_id": None} == {**expected, "run_id": None}

    assert got["context"]["items"] and got["context"]["tokens"] <= 200
    assert direct.post("/api/v1/experience/context", context(theirs)) == (200, got["context"])

    investigation = got["investigation"]
    assert investigation["answer"]["conclusion_code"] == "rules_do_not_explain"
    assert investigation["context"]["facts"] == FACTS
    status, expected = direct.post("/api/v1/investigations", INVESTIGATION)
    assert status == 200
    for key in INVESTIGATION_KEYS:
        assert investigation[key] == expected[key], key

    outcome = got["outcome"]
    assert outcome["reported_by"] == "remote-mcp-agent" and outcome["items"]
    status, expected = direct.post(
        f"/api/v1/runs/{theirs}/outcome", {"outcome": "resolved_by_lead"}
    )
    assert status == 200
    for key in ("outcome", "reported_by", "counts", "items"):
        assert outcome[key] == expected[key], key

    proposed = got["proposed"]
    assert proposed["status"] == "candidate" and proposed["created"] is True
    # The same content proposed on the HTTP API is the case the MCP call stored.
    assert direct.post("/api/v1/cases", case_body(incident="INC-MCP-CLUSTER")) == (
        200,
        {**proposed, "created": False},
    )

    # The MCP requests went to the MCP server, the API's to the web instances, and more than
    # one instance answered.
    assert grew(mcp_before, served_by(cluster, "mcp")) == {"mcp1"}
    assert len(grew(web_before, served_by(cluster, "web"))) >= 2


def test_the_mcp_endpoint_behind_the_balancer_refuses_a_request_without_a_token(
    deployment: Deployment,
) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    for token in (None, "rca_0123456789ab_" + "x" * 43):
        sent = {**headers, **({"Authorization": f"Bearer {token}"} if token else {})}
        refused = httpx.post(deployment.cluster.mcp_url, json=listing, headers=sent, timeout=60)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")


@pytest.fixture(scope="module")
def generated(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The client package, generated from the schema the deployment serves through HAProxy."""
    served = httpx.get(f"{deployment.cluster.url}/api/v1/openapi.json", timeout=60)
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/json")
    folder = tmp_path_factory.mktemp("cluster-client")
    with generated_package(served.text, folder, "cluster_api_client") as package:
        yield package


@pytest.fixture
def generated_for(deployment: Deployment, generated: Any) -> Iterator[Callable[[str], Generated]]:
    """Generated clients on the balancer's address over real HTTP, closed after the test."""
    made: list[Generated] = []

    def make(token: str) -> Generated:
        made.append(Generated(generated, deployment.cluster.url, token))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_a_generated_client_runs_the_readme_calls_through_the_balancer(
    deployment: Deployment,
    generated_for: Callable[[str], Generated],
    direct_for: Callable[[str], Direct],
) -> None:
    cluster = deployment.cluster
    token = agent_token(cluster, "generated-client-agent")
    client = generated_for(token)
    direct = direct_for(token)
    model = client.model
    web_before = served_by(cluster, "web")
    mine, theirs = "cluster-gen-1", "cluster-gen-direct-1"

    assert answer(client.call("health", "ping")) == direct.get("/api/v1/ping")

    search = model("KnowledgeSearchRequest", SEARCH)
    assert search.to_dict()["facts"] == FACTS  # the generated model keeps every fact
    expected = direct.post("/api/v1/knowledge/search", SEARCH)
    assert expected[0] == 200 and expected[1]["status"] == "retrieved"
    assert answer(client.call("knowledge", "knowledge_search", body=search)) == expected

    # Facts reach the investigation: with them the rules do not explain the ticket.
    status, investigation = answer(
        client.call(
            "investigations",
            "investigation_create",
            body=model("InvestigationRequest", INVESTIGATION),
        )
    )
    assert status == 200
    assert investigation["answer"]["conclusion_code"] == "rules_do_not_explain"
    status, expected_run = direct.post("/api/v1/investigations", INVESTIGATION)
    assert status == 200
    for key in INVESTIGATION_KEYS:
        assert investigation[key] == expected_run[key], key
    run_id = investigation["run_id"]
    assert answer(client.call("investigations", "investigation_read", run_id)) == direct.get(
        f"/api/v1/investigations/{run_id}"
    )

    status, retrieved = answer(
        client.call(
            "experience",
            "experience_retrieve",
            body=model("ExperienceRetrieveRequest", retrieve(mine)),
        )
    )
    e_status, e_retrieved = direct.post("/api/v1/experience/retrieve", retrieve(theirs))
    assert status == e_status == 200 and retrieved["items"]
    assert {**retrieved, "run_id": None} == {**e_retrieved, "run_id": None}
    skill = next(item["id"] for item in retrieved["items"] if item["type"] == "skill")
    # An approved case of the demo (its first; the revoked one is not served).
    demo = deployment.demo
    case = next(
        item["id"]
        for item in demo["experience"]["items"]
        if item["id"].startswith("case:") and item["id"] != demo["revoked"]
    )

    status, ran = answer(
        client.call(
            "experience", "skill_run", skill, body=model("SkillRunRequest", skill_run(mine))
        )
    )
    e_status, e_ran = direct.post(f"/api/v1/skills/{skill}/run", skill_run(theirs))
    assert status == e_status == 200 and ran["status"] == "needs_review"
    assert {**ran, "run_id": None} == {**e_ran, "run_id": None}

    status, block = answer(
        client.call(
            "experience",
            "experience_context",
            body=model("ExperienceContextRequest", context(mine)),
        )
    )
    assert (status, block) == direct.post("/api/v1/experience/context", context(theirs))
    assert block["items"]

    reported = {"outcome": "resolved_by_lead", "note": "补充商品后恢复"}
    status, outcome = answer(
        client.call("experience", "run_outcome", mine, body=model("RunOutcomeRequest", reported))
    )
    e_status, e_outcome = direct.post(f"/api/v1/runs/{theirs}/outcome", reported)
    assert status == e_status == 200
    for key in ("outcome", "note", "reported_by", "counts", "items"):
        assert outcome[key] == e_outcome[key], key

    status, record = answer(client.call("experience", "run_read", mine))
    e_status, e_record = direct.get(f"/api/v1/runs/{theirs}")
    assert status == e_status == 200
    assert [r["item_id"] for r in record["references"]] == [
        r["item_id"] for r in e_record["references"]
    ]
    assert record["runs"][0]["context"]["facts"] == FACTS

    expected = direct.get(f"/api/v1/cases/{case}")
    assert expected[0] == 200 and expected[1]["id"] == case
    assert answer(client.call("experience", "case_read", case)) == expected
    assert answer(client.call("experience", "skill_read", skill)) == direct.get(
        f"/api/v1/skills/{skill}"
    )

    body = case_body(incident="INC-GEN-CLUSTER")
    status, proposed = answer(
        client.call("experience", "case_propose", body=model("CaseProposal", body))
    )
    assert status == 201 and proposed["created"] is True
    assert direct.post("/api/v1/cases", body) == (200, {**proposed, "created": False})

    # A refusal reaches the generated client as the API wrote it, naming the fact.
    bad = {**SEARCH, "facts": {"Channel": "miniapp"}}
    expected = direct.post("/api/v1/knowledge/search", bad)
    assert expected[0] == 422
    assert expected[1]["detail"][0]["loc"] == ["body", "facts", "Channel", "[key]"]
    request = model("KnowledgeSearchRequest", SEARCH)
    request.facts["Channel"] = "miniapp"
    del request.facts["channel"], request.facts["product"], request.facts["basket_cents"]
    assert answer(client.call("knowledge", "knowledge_search", body=request)) == expected

    assert len(grew(web_before, served_by(cluster, "web"))) >= 2


STYLESHEET = re.compile(r'<link rel="stylesheet" href="([^"]+)"')
SCRIPT = re.compile(r'<script src="([^"]+)"')


def test_a_page_gets_its_stylesheet_and_scripts_through_the_balancer(
    deployment: Deployment,
) -> None:
    """The instances serve the collected static files themselves (WhiteNoise): under names that
    carry their content's hash, cached for good, compressed when asked; the page's
    Content-Security-Policy still allows only the console's own origin."""
    with httpx.Client(base_url=deployment.cluster.url, timeout=60) as browser:
        page = browser.get("/accounts/login/")
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        directives = {
            name: value
            for name, _, value in (part.strip().partition(" ") for part in policy.split(";"))
        }
        assert directives["style-src"] == "'self'"
        assert directives["script-src"] == "'self'"
        assert "unsafe-inline" not in policy

        stylesheets = STYLESHEET.findall(page.text)
        assert len(stylesheets) == 1
        href = stylesheets[0]
        # Same origin ('self'), and a name that changes with the file's content.
        assert re.fullmatch(r"/static/console/console\.[0-9a-f]{12}\.css", href), href
        css = browser.get(href)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        assert css.content == (ROOT / "static" / "console" / "console.css").read_bytes()
        assert "immutable" in css.headers["cache-control"]
        compressed = browser.get(href, headers={"Accept-Encoding": "gzip"})
        assert compressed.headers["content-encoding"] == "gzip"
        assert compressed.content == css.content  # httpx decodes it

        scripts = SCRIPT.findall(page.text)
        assert scripts
        for src in scripts:
            assert src.startswith("/static/"), src
            served = browser.get(src)
            assert served.status_code == 200, src
            assert "javascript" in served.headers["content-type"], src
        # A file that was never collected is not found (nothing outside STATIC_ROOT is served).
        assert browser.get("/static/console/absent.css").status_code == 404
