from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from knowledge.services import documents_import
from reviewconsole.permissions import SEARCH_KNOWLEDGE, require
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist

FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "knowledge.json"


@pytest.fixture
def fixture_documents() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return documents


@pytest.fixture
def searcher(db: None) -> User:
    """An agent of the demo tenant whose permissions and tenants were read once already, as
    past the first check of a request: a test counting a search's statements counts the
    search's own."""
    tenants_exist(settings.DEMO_TENANT)
    user = user_set_role(username="sam-agent", role=Role.AGENT, tenants=[settings.DEMO_TENANT])
    require(user, SEARCH_KNOWLEDGE, settings.DEMO_TENANT)
    return user


@pytest.fixture
def knowledge_base(operator: User, fixture_documents: list[dict[str, Any]]) -> None:
    documents_import(items=fixture_documents, actor=operator)


def document(**overrides: Any) -> dict[str, Any]:
    """A valid, approved rule in the demo scope; override any field."""
    base: dict[str, Any] = {
        "doc_key": "rule-x",
        "version": 1,
        "tenant": settings.DEMO_TENANT,
        "brand": settings.DEMO_BRAND,
        "stores": ["store-100"],
        "campaign": "campaign-x",
        "kind": "rule",
        "title": "活动X优惠券使用条件",
        "text": "活动X的优惠券仅限小程序下单使用。",
        "source": "fixture://knowledge/rule-x",
        "valid_from": "2026-09-01T00:00:00+08:00",
        "valid_to": None,
        "published_at": "2026-08-31T09:00:00+08:00",
        "approved": True,
        "revoked": False,
        "requirements": {},
    }
    base.update(overrides)
    return base
