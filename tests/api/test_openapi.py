"""The published OpenAPI schema states what the API enforces (the generated-request run is in
``test_schemathesis``), and the schema and the docs page are served."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentapi.api import api
from agentapi.schemas import DATE_TIME_PATTERN, MAX_FACTS
from experience.cases.schema import VALID_TO_ORDER
from reviewconsole.timeparse import parse_aware_datetime
from tests.api.conftest import BearerClient, search_body

SCHEMAS = api.get_openapi_schema()["components"]["schemas"]


def _string_schema(prop: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in prop.get("anyOf", [prop]) if s.get("type") == "string")


@pytest.mark.parametrize(
    ("model", "name"),
    [("KnowledgeSearchRequest", "query"), ("ExperienceRetrieveRequest", "query")],
)
def test_text_schemas_refuse_nul(model: str, name: str) -> None:
    pattern = SCHEMAS[model]["properties"][name]["pattern"]
    assert re.search(pattern, "coupon") and not re.search(pattern, "cou\x00pon")


def test_run_id_schema_refuses_every_space_the_api_refuses() -> None:
    pattern = SCHEMAS["ExperienceRetrieveRequest"]["properties"]["run_id"]["pattern"]
    assert re.search(pattern, "run-1")
    for space in (chr(c) for c in range(0x110000) if chr(c).isspace()):
        assert not re.search(pattern, f"run{space}1"), hex(ord(space))
    assert not re.search(pattern, "run\x001")


@pytest.mark.parametrize(
    "model", ["KnowledgeSearchRequest", "SkillRunRequest", "InvestigationRequest"]
)
def test_facts_are_a_typed_map_whose_names_follow_the_pattern(model: str) -> None:
    # Written as generators read a map (typed additionalProperties, no patternProperties), and
    # still exactly what the API accepts: a bad name or value is not schema-valid.
    facts = SCHEMAS[model]["properties"]["facts"]
    assert "patternProperties" not in facts
    assert isinstance(facts["additionalProperties"], dict)
    validator = Draft202012Validator(facts)
    assert validator.is_valid({"channel": "miniapp", "basket_cents": 3200, "coupon": None})
    for bad in ({"Channel": "miniapp"}, {"1st": "x"}, {"basket_cents": 3.5}, {"a": ["x"]}):
        assert not validator.is_valid(bad), bad
    assert not validator.is_valid({f"fact_{n}": n for n in range(MAX_FACTS + 1)})


def test_no_map_in_the_schema_uses_pattern_properties() -> None:
    assert "patternProperties" not in json.dumps(api.get_openapi_schema())


def test_every_model_in_the_schema_lists_its_properties() -> None:
    # A model published as {} (e.g. through a serializer of the whole model) becomes an untyped
    # value in a generated client.
    empty = [name for name, component in SCHEMAS.items() if not component.get("properties")]
    assert empty == []


def test_the_cross_field_rule_is_described() -> None:
    assert VALID_TO_ORDER in SCHEMAS["CaseProposal"]["properties"]["valid_to"]["description"]


@pytest.mark.django_db
def test_an_integral_limit_written_as_a_number_is_accepted(
    agent_client: BearerClient, demo: Any
) -> None:
    # JSON Schema's integer includes 12.0; booleans and strings are still refused.
    accepted = agent_client.post_json("/api/v1/knowledge/search", search_body(limit=12.0))
    assert accepted.status_code == 200
    for bad in (True, "12", 12.5):
        response = agent_client.post_json("/api/v1/knowledge/search", search_body(limit=bad))
        assert response.status_code == 422


@hypothesis_settings(max_examples=200, derandomize=True, deadline=None)
@given(st.from_regex(DATE_TIME_PATTERN, fullmatch=True))
def test_every_schema_valid_datetime_is_accepted(text: str) -> None:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return  # not a date-time at all (e.g. 31 February): the format refuses it too
    parse_aware_datetime(text, field="at")
    assert datetime.fromisoformat(text).tzinfo is not None


@pytest.mark.django_db
def test_schema_and_docs_are_served(client: Any) -> None:
    schema_response = client.get("/api/v1/openapi.json")
    assert schema_response.status_code == 200
    document = schema_response.json()
    assert document["openapi"].startswith("3.")
    assert document["components"]["securitySchemes"]["AgentToken"]["scheme"] == "bearer"
    docs = client.get("/api/v1/docs")
    assert docs.status_code == 200
    assert b"openapi.json" in docs.content
