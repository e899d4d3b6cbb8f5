"""The published OpenAPI schema states what the API enforces: requests generated from it (valid
and invalid ones) never get a 5xx, valid ones are accepted, invalid ones refused, and every
response conforms to the schema. Bounded and derandomized so the suite stays fast and stable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from agentapi.api import api
from agentapi.services import token_create
from experience.cases.schema import VALID_TO_ORDER
from investigations.providers import LIVE_NOT_CONFIGURED
from tests.api.conftest import Demo

# Few examples per operation and mode keeps the whole run within a minute or so.
MAX_EXAMPLES = 20
# Rules JSON Schema cannot state: between two fields, or about what is stored. The schema
# describes each in words and the API answers 422 naming the field (None: any message there).
# A run id already taken (409) or naming no run (404) is not one: both are expected answers.
DESCRIBED_RULES: dict[tuple[str, ...], tuple[str, ...] | None] = {
    ("body", "valid_to"): (VALID_TO_ORDER,),
    ("body", "supersedes"): None,
    ("body", "provider"): (LIVE_NOT_CONFIGURED,),
}


def _described_refusal(response: Any) -> bool:
    if response.status_code != 422:
        return False
    errors = response.json()["detail"]
    return bool(errors) and all(
        (loc := tuple(error["loc"])) in DESCRIBED_RULES
        and ((rule := DESCRIBED_RULES[loc]) is None or error["msg"] in rule)
        for error in errors
    )


@schemathesis.check
def schema_valid_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's own check, except for the refusals the schema describes in words."""
    if _described_refusal(response):
        return None
    return positive_data_acceptance(ctx, response, case)


@pytest.fixture
def agent_token(agent: User, demo: Demo) -> str:
    return token_create(user=agent, name="schemathesis").text


@pytest.fixture
def keep_test_connection() -> Iterator[None]:
    """Requests reach the real WSGI handler, whose request signals would close the database
    connection that holds the test's transaction; the test client disconnects them likewise."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
# Calls go straight into Django's WSGI handler: same process, same test database transaction.
schema.app = WSGIHandler()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_meet_the_schema(
    case: Any, agent_token: str, keep_test_connection: None
) -> None:
    # Every built-in check: no server error, documented status codes, content types and
    # bodies, schema-valid data accepted and schema-invalid data refused.
    case.call_and_validate(
        headers={"Authorization": f"Bearer {agent_token}"},
        excluded_checks=[positive_data_acceptance],
        additional_checks=[schema_valid_data_accepted],
    )


def test_only_the_described_rules_are_excused() -> None:
    class Response:
        status_code = 422

        def __init__(self, detail: list[dict[str, Any]]) -> None:
            self.detail = detail

        def json(self) -> dict[str, Any]:
            return {"detail": self.detail}

    rule = {"loc": ["body", "valid_to"], "msg": VALID_TO_ORDER, "type": "value_error"}
    other = {"loc": ["body", "query"], "msg": "must not contain NUL characters", "type": "x"}
    wrong = {"loc": ["body", "valid_to"], "msg": "is not an ISO 8601 datetime", "type": "x"}
    assert _described_refusal(Response([rule]))
    assert not _described_refusal(Response([rule, other]))
    assert not _described_refusal(Response([wrong]))
    assert not _described_refusal(Response([]))
