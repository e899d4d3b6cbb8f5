"""Browsers and the agent API (issue 41.4): the origins in ``CONSOLE_CORS_ALLOWED_ORIGINS`` get
preflights answered and the headers they must read exposed; any other origin's preflight is
refused saying which setting decides, instead of the 405 it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.api.conftest import BearerClient

pytestmark = pytest.mark.django_db

ALLOWED = "https://agents.example.com"
PING = "/api/v1/ping"


@pytest.fixture(autouse=True)
def one_browser_origin(settings: Any) -> None:
    settings.CONSOLE_CORS_ALLOWED_ORIGINS = [ALLOWED]


def _preflight(origin: str, path: str = "/api/v1/knowledge/search") -> Any:
    return Client().options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


def test_an_allowed_origins_preflight_is_answered() -> None:
    answer = _preflight(ALLOWED)
    assert answer.status_code == 204
    assert answer["Access-Control-Allow-Origin"] == ALLOWED
    assert "POST" in answer["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in answer["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed
    assert not answer.has_header("Access-Control-Allow-Credentials")


def test_another_origins_preflight_is_refused_saying_why() -> None:
    answer = _preflight("https://elsewhere.example")
    assert answer.status_code == 403
    assert not answer.has_header("Access-Control-Allow-Origin")
    assert "CONSOLE_CORS_ALLOWED_ORIGINS" in answer.json()["detail"]


def test_an_allowed_origin_reads_answers_and_refusals(
    agent: User, token_for: Callable[[User], str]
) -> None:
    ok = BearerClient(token_for(agent)).get(PING, headers={"Origin": ALLOWED})
    assert ok.status_code == 200
    assert ok["Access-Control-Allow-Origin"] == ALLOWED
    exposed = {h.strip().lower() for h in ok["Access-Control-Expose-Headers"].split(",")}
    assert {"www-authenticate", "retry-after"} <= exposed
    assert "Origin" in ok["Vary"]
    refused = BearerClient("not-a-token").get(PING, headers={"Origin": ALLOWED})
    assert refused.status_code == 401
    assert refused["Access-Control-Allow-Origin"] == ALLOWED


def test_another_origin_gets_no_cors_headers(agent: User, token_for: Callable[[User], str]) -> None:
    answer = BearerClient(token_for(agent)).get(
        PING, headers={"Origin": "https://elsewhere.example"}
    )
    assert answer.status_code == 200
    assert not answer.has_header("Access-Control-Allow-Origin")


def test_the_console_pages_are_not_opened_to_browsers_elsewhere() -> None:
    answer = _preflight(ALLOWED, path="/")
    assert not answer.has_header("Access-Control-Allow-Origin")
