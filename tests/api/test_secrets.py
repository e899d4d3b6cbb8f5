"""Tokens never reach logs or the audit trail; only their public prefix does."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from agentapi.models import ApiToken
from reviewconsole.models import Event
from tests.api.conftest import BearerClient, search_body

pytestmark = pytest.mark.django_db


def test_no_token_text_in_logs_or_events(
    agent: User,
    token_for: Callable[[User], str],
    demo: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = token_for(agent)
    _scheme, _prefix, secret = token.split("_", 2)  # the prefix is hex; the secret may hold "_"
    caplog.set_level(logging.DEBUG)

    BearerClient(token).post_json("/api/v1/knowledge/search", search_body())
    BearerClient(token + "x").get("/api/v1/ping")  # a refused token is logged as refused
    BearerClient(token).post_json("/api/v1/knowledge/search", {"query": 1})  # a 422
    BearerClient("rca_nothing_here").get("/api/v1/ping")

    assert caplog.records, "the requests above log nothing at all; the check would be empty"
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert secret not in logged and token not in logged
    for event in Event.objects.all():
        assert secret not in f"{event.target} {event.reason} {event.details}"
    stored = ApiToken.objects.get(user=agent)
    assert secret not in {stored.prefix, stored.name}
