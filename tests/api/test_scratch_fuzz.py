"""The published OpenAPI schema is a contract: generated requests never get a 5xx, and every
response conforms to the schema. Also: the schema and the docs page are served."""

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
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentapi.api import api
from agentapi.services import token_create
from tests.api.conftest import Demo

# Few examples per operation keeps the whole run well under a minute.
MAX_EXAMPLES = 400


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
    derandomize=False,
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_conform(
    case: Any, agent_token: str, keep_test_connection: None
) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {agent_token}"},
        checks=[
            schemathesis.checks.not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


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
