"""Builders for evaluation tests: hand-made tickets and the demo memory in the test database."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from evaluation.demo import MEMORY_APPROVED_AT
from experience.demo import load_demo_experience, load_demo_knowledge

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
FULL_FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}
STORE_FAULT = {
    "config:store-scope": {
        "fault": "store-002 is missing from campaign B's store list",
        "cause": "store-scope-missing",
    }
}


def ticket(n: int, **changes: Any) -> dict[str, Any]:
    """A held-out ticket in the demo memory's scope, known just after the memory was approved.

    Its true cause is the store list; reading that configuration shows the fault.
    """
    data: dict[str, Any] = {
        "id": f"thread://held-out/t-{n}",
        "run_ids": [f"run-held-out-{n}"],
        "situation": "ordinary-match",
        "text": "二号店小程序下单两杯水果茶，优惠券显示无法使用",
        "scope": dict(SCOPE),
        "context": {
            "occurred_at": "2026-09-18T14:31:00+08:00",
            "known_at": "2026-09-18T14:33:00+08:00",
            "facts": dict(FULL_FACTS),
        },
        "answers": {"client_retry": "still_failing", "checks": copy.deepcopy(STORE_FAULT)},
        "truth": {
            "required_checks": ["knowledge:campaign-rules", "config:store-scope"],
            "cause": "store-scope-missing",
            "followups": [],
        },
    }
    data.update(changes)
    return data


def ticket_set(*tickets: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": "heldout-tickets/1",
        "name": "hand-made",
        "tickets": list(tickets) or [ticket(1)],
    }
    data.update(changes)
    return data


@pytest.fixture
def write_set(tmp_path: Path) -> Callable[..., Path]:
    def write(data: Any, name: str = "tickets.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        return path

    return write


@pytest.fixture
def demo_memory(operator: User, reviewer: User) -> dict[str, Any]:
    """The demo memory in the test database, approved when the demo timeline says."""
    load_demo_knowledge(operator=operator, now=MEMORY_APPROVED_AT)
    return load_demo_experience(operator=operator, reviewer=reviewer, now=MEMORY_APPROVED_AT)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
