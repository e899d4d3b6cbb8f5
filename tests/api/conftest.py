"""Agent API fixtures: the demo memory loaded at a fixed time, tokens, and bearer clients."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from agentapi.services import token_create
from experience.demo import load_demo_experience
from knowledge.services import documents_import

NOW = datetime.fromisoformat("2026-10-01T12:00:00+08:00")
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
OCCURRED_AT = "2026-09-18T14:00:00+08:00"
KNOWN_AT = "2026-09-18T14:10:00+08:00"
FACTS: dict[str, object] = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}
QUERY = "小程序优惠券无法使用"


@dataclass(frozen=True)
class Demo:
    cases: list[str]
    skill: str
    candidates: list[str]


@pytest.fixture
def at_now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


@pytest.fixture
def demo(operator: User, reviewer: User, at_now: datetime) -> Demo:
    """The shipped knowledge and experience fixtures: two approved cases and one skill."""
    fixtures = Path(settings.BASE_DIR) / "fixtures"
    documents_import(
        items=json.loads((fixtures / "knowledge.json").read_text(encoding="utf-8")),
        actor=operator,
    )
    loaded = load_demo_experience(operator=operator, reviewer=reviewer)
    return Demo(cases=loaded["cases"], skill=loaded["skill"], candidates=loaded["candidates"])


class BearerClient(Client):
    """A test client that sends one bearer token and JSON bodies."""

    def __init__(self, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        super().__init__(headers=headers)

    def post_json(self, path: str, body: object) -> Any:
        return self.post(path, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def token_for(db: None) -> Callable[[User], str]:
    def issue(user: User) -> str:
        return token_create(user=user, name="tests").text

    return issue


@pytest.fixture
def client_for(token_for: Callable[[User], str]) -> Callable[[User], BearerClient]:
    def make(user: User) -> BearerClient:
        return BearerClient(token_for(user))

    return make


@pytest.fixture
def agent_client(agent: User, client_for: Callable[[User], BearerClient]) -> BearerClient:
    return client_for(agent)


def search_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "query": QUERY,
        "tenant": SCOPE["tenant"],
        "brand": SCOPE["brand"],
        "store": SCOPE["store"],
        "campaign": SCOPE["campaign"],
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
    }
    body.update(changes)
    return body


def retrieve_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"query": QUERY, "scope": dict(SCOPE), "run_id": "run-api-1"}
    body.update(changes)
    return body


def run_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
        "run_id": "run-api-1",
    }
    body.update(changes)
    return body


def case_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "case",
        "scope": dict(SCOPE),
        "incident": "INC-API-1",
        "title": "二号店优惠券无法使用：代理提交的候选案例",
        "summary": "代理在排查中整理的候选案例。",
        "observations": [{"source_id": "thread:9#m1", "excerpt": "顾客：优惠券用不了。"}],
        "diagnosis": {
            "statement": "活动B商品列表缺少新品。",
            "evidence": [
                {
                    "source_id": "thread:9#m4",
                    "excerpt": "运营：新品不在活动商品里。",
                    "verified": True,
                }
            ],
        },
        "counterevidence": [
            {
                "hypothesis": "缓存未刷新",
                "statement": "刷新后仍失败。",
                "refutes": "仅客户端刷新",
                "evidence": [
                    {"source_id": "thread:9#m3", "excerpt": "顾客：刷新过了。", "verified": True}
                ],
            }
        ],
        "outcome": {"statement": "补充商品后恢复。", "evidence": []},
        "valid_from": "2026-09-01T00:00:00+08:00",
        "valid_to": "2027-12-31T00:00:00+08:00",
    }
    body.update(changes)
    return body
