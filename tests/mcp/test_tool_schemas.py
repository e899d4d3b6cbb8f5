"""The tools' input schemas as LLM tool adapters read them (issue 41.5 and 41.6): every argument
described with an example beside its type (what is left when an adapter strips ``anyOf``), the
scope fields a real answer needs said so in words, strict mode of the OpenAI Agents SDK
(``openai-agents``, pinned) taking every tool it can, and ``tools/list`` lean: each long pattern
written once per tool, the whole list within a bound. The lean schema accepts and refuses what
the request models do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents.mcp import MCPServerStdio, MCPUtil
from asgiref.sync import async_to_sync
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.types import Tool

from agentapi.mcp_server import TOOLS, build_server
from tests.api.conftest import FACTS, KNOWN_AT, OCCURRED_AT, SCOPE, case_body, search_body

# Tools whose arguments include a map of free names (a ticket's facts, a skill's inputs), which
# OpenAI's strict mode cannot express: the adapter serves them non-strict.
OPEN_MAPS = {"search_knowledge", "run_skill", "investigate"}
# tools/list was 46 KB with every long pattern repeated per field (issue 41.5); with a
# description and an example for every argument it stays under this.
LIST_BOUND = 45_000
INPUT_BOUND = 6_500
LONG_PATTERN = 100


@pytest.fixture(scope="module")
def tools() -> dict[str, Tool]:
    async def listed() -> list[Tool]:
        async with Client(build_server("listing needs no token", manage_connections=False)) as c:
            return (await c.list_tools()).tools

    return {tool.name: tool for tool in async_to_sync(listed)()}


def _stripped(prop: dict[str, Any]) -> dict[str, Any]:
    """A property as adapters that cannot read unions keep it: ``anyOf`` and ``$ref`` dropped."""
    return {k: v for k, v in prop.items() if k not in ("anyOf", "oneOf", "$ref")}


def _resolved(schema: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in prop:
        return prop
    target = schema["$defs"][prop["$ref"].rsplit("/", 1)[-1]]
    return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}


def test_every_argument_keeps_its_description_and_example_when_unions_are_stripped(
    tools: dict[str, Tool],
) -> None:
    for name, tool in tools.items():
        schema = tool.input_schema
        for argument, prop in schema["properties"].items():
            kept = _stripped(prop)
            assert kept.get("description"), (name, argument)
            assert kept.get("examples"), (name, argument)
            # The example is a value the argument accepts.
            value = {**_resolved(schema, prop), "$defs": schema.get("$defs", {})}
            for example in kept["examples"]:
                assert Draft202012Validator(value).is_valid(example), (name, argument, example)
            # Nested fields (a scope's) are described where they stand too.
            for field, sub in kept.get("properties", {}).items():
                assert _stripped(sub).get("description"), (name, argument, field)


def test_the_scope_fields_an_answer_needs_say_so(tools: dict[str, Tool]) -> None:
    search = tools["search_knowledge"].input_schema["properties"]
    for field in ("tenant", "brand", "store", "campaign"):
        assert "needed for an answer" in search[field]["description"]
        assert "needs_context" in search[field]["description"]
    for name in ("retrieve_experience", "run_skill", "investigate", "experience_context"):
        scope = tools[name].input_schema["properties"]["scope"]
        assert "all five are needed" in scope["description"], name
        for field, sub in scope["properties"].items():
            assert "needed for an answer" in sub["description"], (name, field)


def test_the_tool_descriptions_explain_every_status_and_where_ids_come_from(
    tools: dict[str, Tool],
) -> None:
    search = tools["search_knowledge"].description or ""
    for status in ("retrieved", "needs_context", "conflicting_sources", "no_match"):
        assert f"{status} (" in search or f"{status}:" in search, status
    retrieve = tools["retrieve_experience"].description or ""
    assert "ok (" in retrieve and "fallback (" in retrieve
    context = tools["experience_context"].description or ""
    assert "threshold" in context and "0.3" in context
    skill_id = tools["run_skill"].input_schema["properties"]["skill_id"]["description"]
    assert "retrieve_experience" in skill_id
    investigate = tools["investigate"].description or ""
    assert "instead of" in investigate


def test_openai_agents_strict_mode_takes_every_tool_without_a_free_map(
    tools: dict[str, Tool],
) -> None:
    # Constructing the adapter's server starts nothing; the conversion reads only the tool.
    server = MCPServerStdio(params={"command": "true"})
    strict = {
        name
        for name, tool in tools.items()
        if MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True).strict_json_schema
    }
    assert strict == set(tools) - OPEN_MAPS


def test_tools_list_is_lean(tools: dict[str, Tool]) -> None:
    listed = json.dumps(
        [tool.model_dump(by_alias=True, exclude_none=True) for tool in tools.values()]
    )
    assert len(listed.encode("utf-8")) <= LIST_BOUND
    for name, tool in tools.items():
        text = json.dumps(tool.input_schema)
        assert len(text.encode("utf-8")) <= INPUT_BOUND, name
        long_patterns = [
            pattern for pattern in _patterns(tool.input_schema) if len(pattern) > LONG_PATTERN
        ]
        assert len(long_patterns) == len(set(long_patterns)), name


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return own + [p for value in node.values() for p in _patterns(value)]
    if isinstance(node, list):
        return [p for value in node for p in _patterns(value)]
    return []


@pytest.mark.parametrize(
    ("tool", "arguments", "accepted"),
    [
        ("search_knowledge", search_body(), True),
        ("search_knowledge", search_body(limit=5, tenant=None), True),
        ("search_knowledge", search_body(tenant="all"), False),
        ("search_knowledge", search_body(occurred_at="2026-09-18T14:00:00"), False),
        ("search_knowledge", search_body(limit=None), False),
        ("search_knowledge", search_body(extra=1), False),
        ("propose_case", case_body(), True),
        ("propose_case", case_body(scope={**SCOPE, "store": None}), False),
        ("propose_case", case_body(diagnosis=None), True),
        (
            "investigate",
            {
                "text": "x",
                "scope": dict(SCOPE),
                "occurred_at": OCCURRED_AT,
                "known_at": KNOWN_AT,
                "facts": dict(FACTS),
                "provider": None,
            },
            False,
        ),
        ("run_outcome", {"run_id": "r", "outcome": "unresolved"}, True),
        ("run_outcome", {"run_id": "r", "outcome": "fixed"}, False),
    ],
)
def test_the_lean_schema_accepts_what_the_server_accepts(
    tools: dict[str, Tool], tool: str, arguments: dict[str, Any], accepted: bool
) -> None:
    (spec,) = [spec for spec in TOOLS if spec.name == tool]
    lean_says = Draft202012Validator(tools[tool].input_schema).is_valid(arguments)
    try:
        spec.arguments.model_validate(arguments)
        model_says = True
    except ValueError:
        model_says = False
    assert lean_says == model_says == accepted
