"""The database gate admits exactly the documents the pure predicate admits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge.domain import DocumentGateFields, Scope, admits
from knowledge.models import Document
from knowledge.schema import DocumentContent
from knowledge.search import KnowledgeContext, gated_rows
from knowledge.services import document_create

BASE = datetime(2026, 9, 18, 6, tzinfo=UTC)
VALUES = st.sampled_from(["a", "b"])
INSTANTS = st.integers(min_value=-3, max_value=3).map(lambda h: BASE + timedelta(hours=h))


@st.composite
def corpus(draw: st.DrawFn) -> list[DocumentGateFields]:
    docs = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        valid_from = draw(INSTANTS)
        later = [t for t in range(-3, 4) if BASE + timedelta(hours=t) > valid_from]
        valid_to = draw(
            st.one_of(st.none(), st.sampled_from(later).map(lambda h: BASE + timedelta(hours=h)))
            if later
            else st.none()
        )
        docs.append(
            DocumentGateFields(
                tenant=draw(VALUES),
                brand=draw(VALUES),
                stores=frozenset(draw(st.lists(VALUES, min_size=1, unique=True))),
                campaign=draw(VALUES),
                approved=draw(st.booleans()),
                revoked=draw(st.booleans()),
                valid_from=valid_from,
                valid_to=valid_to,
                published_at=draw(INSTANTS),
            )
        )
    return docs


SCOPES = st.builds(
    Scope,
    tenant=VALUES,
    brand=VALUES,
    store=VALUES,
    campaign=VALUES,
    occurred_at=INSTANTS,
    known_at=INSTANTS,
)


class Rollback(Exception):
    pass


@pytest.mark.django_db
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=corpus(), scope=SCOPES)
def test_database_gate_equals_the_pure_gate(
    operator: User, docs: list[DocumentGateFields], scope: Scope
) -> None:
    try:
        with transaction.atomic():
            expected = set()
            for n, fields in enumerate(docs):
                content = DocumentContent(
                    doc_key=f"d{n}",
                    version=1,
                    tenant=fields.tenant,
                    brand=fields.brand,
                    stores=tuple(sorted(fields.stores)),
                    campaign=fields.campaign,
                    kind="rule",
                    rule_key="",
                    title="t",
                    text="t",
                    source="fixture://t",
                    requirements={},
                    valid_from=fields.valid_from,
                    valid_to=fields.valid_to,
                    published_at=fields.published_at,
                )
                doc = document_create(content=content, actor=operator, lexicon={})
                Document.objects.filter(pk=doc.pk).update(
                    approved=fields.approved, revoked=fields.revoked
                )
                if admits(fields, scope):
                    expected.add(doc.pk)
            context = KnowledgeContext(
                tenant=scope.tenant,
                brand=scope.brand,
                store=scope.store,
                campaign=scope.campaign,
                occurred_at=scope.occurred_at,
                known_at=scope.known_at,
            )
            assert set(gated_rows(context).values_list("document_id", flat=True)) == expected
            raise Rollback
    except Rollback:
        pass
