"""A revision is not a conflict: among the gated versions of one doc_key only the newest ranks.

An older version is superseded from its successor's ``published_at`` on; for an earlier
``known_at`` (or when the successor does not pass the gate) the older version still answers.
Conflicts are between different documents sharing a ``rule_key``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from experience.review.documents import document_revoke
from knowledge.models import Document
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import documents_import
from reviewconsole.roles import Role
from reviewconsole.services import system_agent
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

TICKET = "两杯水果茶，优惠券用不了"
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": "3200"}
AT = "2026-09-18T14:00:00+08:00"
# rule-b@2 of the shipped fixture is published at 2026-09-18T15:00:00+08:00.
SUCCESSOR_PUBLISHED = "2026-09-18T15:00:00+08:00"
JUST_BEFORE = "2026-09-18T14:59:59+08:00"


def search(
    query: str = TICKET,
    *,
    campaign: str = "campaign-b",
    store: str = "store-002",
    at: str = AT,
    known: str,
    facts: dict[str, Any] | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    context = KnowledgeContext(
        tenant=settings.DEMO_TENANT,
        brand=settings.DEMO_BRAND,
        store=store,
        campaign=campaign,
        occurred_at=datetime.fromisoformat(at),
        known_at=datetime.fromisoformat(known),
        facts=FACTS if facts is None else facts,
        limit=limit,
    )
    return search_knowledge(query, context, actor=system_agent())


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["evidence"]]


def test_before_the_successor_is_published_the_older_version_answers(
    knowledge_base: None,
) -> None:
    result = search(known=JUST_BEFORE)

    assert "doc:rule-b@1" in ids(result)
    assert "doc:rule-b@2" not in ids(result)
    assert result["status"] == "retrieved"
    assert not any(item["conflict"] for item in result["evidence"])


def test_from_the_successors_publication_on_only_the_successor_answers(
    knowledge_base: None,
) -> None:
    result = search(known=SUCCESSOR_PUBLISHED)

    assert "doc:rule-b@2" in ids(result)
    assert "doc:rule-b@1" not in ids(result)
    # A routine correction is not two sources disagreeing.
    assert result["status"] == "retrieved"
    assert not any(item["conflict"] for item in result["evidence"])
    # rule-b@2 raised the threshold to 35 yuan: the 32-yuan basket no longer qualifies.
    rule = next(item for item in result["evidence"] if item["id"] == "doc:rule-b@2")
    assert rule["conditions"]["mismatches"] == ["basket_cents"]


def test_a_superseded_version_is_not_counted_as_a_match(knowledge_base: None) -> None:
    # Only the newest version ranks, so the cut to one item is not "truncated" by the old one.
    result = search(query="活动B优惠券", known="2026-09-19T00:00:00+08:00", limit=50)

    assert [i for i in ids(result) if i.startswith("doc:rule-b@")] == ["doc:rule-b@2"]


def test_a_revoked_successor_leaves_the_older_version_answering(
    knowledge_base: None, make_user: Any
) -> None:
    successor = Document.objects.get(doc_key="rule-b", version=2)
    revoker = make_user("oscar", Role.OPERATOR)
    document_revoke(document=successor, actor=revoker, reason="published by mistake")

    result = search(known="2026-09-19T00:00:00+08:00")

    assert "doc:rule-b@1" in ids(result)
    assert "doc:rule-b@2" not in ids(result)


SLOT = {"rule_key": "slot", "title": "优惠券门槛", "text": "优惠券满30元可用。"}
SCOPE_X: dict[str, Any] = {"campaign": "campaign-x", "store": "store-100"}


def test_a_successor_valid_only_later_leaves_the_older_version_answering(
    operator: User,
) -> None:
    documents_import(
        items=[
            document(doc_key="rule-v", version=1, **SLOT),
            document(
                doc_key="rule-v",
                version=2,
                valid_from="2026-10-01T00:00:00+08:00",
                requirements={"basket_cents": {"min": 4000}},
                **SLOT,
            ),
        ],
        actor=operator,
    )

    result = search("优惠券", **SCOPE_X, known="2026-09-30T00:00:00+08:00", facts={})

    assert ids(result) == ["doc:rule-v@1"]
    assert result["evidence"][0]["conflict"] is False


@pytest.mark.parametrize(
    ("known", "expected"),
    [
        ("2026-09-04T23:59:59+08:00", {"doc:rule-v@1": True, "doc:rule-w@1": True}),
        ("2026-09-05T00:00:00+08:00", {"doc:rule-v@2": False, "doc:rule-w@1": False}),
    ],
)
def test_conflicts_are_between_documents_compared_at_their_newest_version(
    operator: User, known: str, expected: dict[str, bool]
) -> None:
    # rule-v@1 and rule-w share a rule slot with different thresholds: a real conflict, until
    # rule-v@2 aligns rule-v with rule-w; rule-v@1 and rule-v@2 never conflict with each other.
    aligned = {"basket_cents": {"min": 4000}}
    documents_import(
        items=[
            document(
                doc_key="rule-v", version=1, requirements={"basket_cents": {"min": 3000}}, **SLOT
            ),
            document(
                doc_key="rule-v",
                version=2,
                published_at="2026-09-05T00:00:00+08:00",
                requirements=aligned,
                **SLOT,
            ),
            document(doc_key="rule-w", version=1, requirements=aligned, **SLOT),
        ],
        actor=operator,
    )

    result = search("优惠券", **SCOPE_X, at="2026-09-10T00:00:00+08:00", known=known, facts={})

    assert {item["id"]: item["conflict"] for item in result["evidence"]} == expected
    conflicting = any(expected.values())
    assert (result["status"] == "conflicting_sources") is conflicting
