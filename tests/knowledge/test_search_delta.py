"""The delta of knowledge search's lexical index: what an approval or a revocation appends, what
a search reads on top of the merged array, and what a merge folds.

An approval or revocation into a scope that exists appends to the scope's delta and a background
merge folds it in; every search in between must answer exactly as a full rebuild of the index
does (and as the definition: tests/knowledge/test_postings.py holds both to it), after
approvals, new versions (which supersede older ones), revocations and merges in any order; a
revoked or superseded version must leave the answer at the next read, before any merge. A reader
that keeps the merged array (PostgreSQL) fetches only the delta's new rows after an approval.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django_tasks import task_backends
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.review.documents import document_revoke
from knowledge import postings, search
from knowledge.models import Document, SearchDelta, SearchScope
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import document_approve, documents_import
from reviewconsole.roles import Role
from tests.knowledge.test_postings import (
    CAMPAIGNS,
    STORES,
    WORDS,
    Stored,
    at,
    check_queries,
    corpus,
    random_context,
)

pytestmark = pytest.mark.django_db

QUEUED_ONLY = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}


@pytest.fixture
def queued_only(settings: Any) -> Any:
    """Tasks are queued and never run (merges wait, as for a busy worker)."""
    settings.TASKS = QUEUED_ONLY
    backend = task_backends["default"]
    backend.clear()  # type: ignore[attr-defined]
    return backend


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge is queued after three changes, so a few steps cross the threshold."""
    monkeypatch.setattr(postings, "DELTA_MIN", 3)


class Rollback(Exception):
    pass


def answers(contexts: list[tuple[str, KnowledgeContext]], actor: User) -> list[Any]:
    found = []
    for query, context in contexts:
        result = search_knowledge(query, context, actor=actor)
        found.append(
            (
                [item["id"] for item in result["evidence"]],
                [item["conflict"] for item in result["evidence"]],
                result["truncated"],
                result["status"],
            )
        )
    return found


def rebuilt_answers(contexts: list[tuple[str, KnowledgeContext]], actor: User) -> list[Any]:
    """The answers of a full rebuild of the index (in a savepoint rolled back after)."""
    got: list[Any] = []
    try:
        with transaction.atomic():
            postings.rebuild()
            assert not SearchDelta.objects.exists()
            got.extend(answers(contexts, actor))
            raise Rollback
    except Rollback:
        pass
    return got


def draft(rng: random.Random, doc_key: str, version: int) -> dict[str, Any]:
    item = corpus(rng, 1)[0]
    return {**item, "doc_key": doc_key, "version": version, "approved": False, "revoked": False}


def live_versions() -> list[Document]:
    return list(Document.objects.filter(approved=True, revoked=False).order_by("pk"))


step = st.one_of(
    st.tuples(st.just("approve"), st.integers(0, 7), st.integers(0, 10_000)),
    st.tuples(st.just("revoke"), st.integers(0, 50), st.just(0)),
    st.tuples(st.just("merge"), st.just(0), st.just(0)),
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=6), seed=st.integers(0, 10_000))
def test_searches_through_the_delta_answer_as_a_full_rebuild(
    operator: User, make_user: Any, queued_only: Any, steps: list[tuple[str, int, int]], seed: int
) -> None:
    Document.objects.all().delete()
    SearchScope.objects.all().delete()
    rng = random.Random(seed)
    items = corpus(rng, 6)
    documents_import(items=items, actor=operator)
    stored = {Stored(item).public_id: Stored(item) for item in items}
    revoked: set[str] = {pid for pid, s in stored.items() if s.item["revoked"]}
    reviewer = make_user(f"rita{seed}", Role.OPERATOR)
    contexts = [random_context(rng) for _ in range(6)]
    for kind, number, salt in steps:
        if kind == "approve":
            doc_key = f"doc-{number:02d}"
            version = 1 + max(
                (s.item["version"] for s in stored.values() if s.item["doc_key"] == doc_key),
                default=0,
            )
            item = draft(random.Random(salt), doc_key, version)
            documents_import(items=[item], actor=operator)
            document = Document.objects.get(doc_key=doc_key, version=version)
            document_approve(document=document, actor=reviewer, reason="checked")
            stored[document.public_id] = Stored({**item, "approved": True})
        elif kind == "revoke":
            live = live_versions()
            if not live:
                continue
            document = live[number % len(live)]
            document_revoke(document=document, actor=reviewer, reason="withdrawn")
            revoked.add(document.public_id)
        else:
            for scope_id in SearchScope.objects.values_list("pk", flat=True):
                with transaction.atomic():
                    postings.delta_merged(scope_id)
        # The next read answers as the definition and as a full rebuild, merged or not.
        check_queries(rng, list(stored.values()), revoked, 4, operator)
        assert answers(contexts, operator) == rebuilt_answers(contexts, operator)


def _context(store: str, campaign: str) -> KnowledgeContext:
    return KnowledgeContext(
        tenant=Document.objects.values_list("tenant", flat=True).first(),
        brand=Document.objects.values_list("brand", flat=True).first(),
        store=store,
        campaign=campaign,
        occurred_at=at(500),
        known_at=at(500),
        facts={},
        limit=50,
    )


def _one_scope_corpus(operator: User) -> tuple[str, str]:
    rng = random.Random(3)
    items = []
    for i in range(12):
        item = draft(rng, f"doc-{i:02d}", 1)
        items.append(
            {
                **item,
                "stores": [STORES[0]],
                "campaign": CAMPAIGNS[0],
                "approved": True,
                "valid_from": at(0).isoformat(),
                "valid_to": None,
                "published_at": at(0).isoformat(),
                "text": f"{WORDS[0]} {item['text']}",
            }
        )
    documents_import(items=items, actor=operator)
    return STORES[0], CAMPAIGNS[0]


def test_revoked_and_superseded_versions_leave_the_answer_before_any_merge(
    operator: User, make_user: Any, queued_only: Any
) -> None:
    store, campaign = _one_scope_corpus(operator)
    reviewer = make_user("rita", Role.OPERATOR)
    context = _context(store, campaign)

    def found() -> list[str]:
        return [
            item["id"] for item in search_knowledge(WORDS[0], context, actor=operator)["evidence"]
        ]

    assert "doc:doc-03@1" in found()
    revoked = Document.objects.get(doc_key="doc-03", version=1)
    document_revoke(document=revoked, actor=reviewer, reason="withdrawn")
    assert SearchDelta.objects.filter(removed=True).count() == 1  # not merged yet
    assert "doc:doc-03@1" not in found()

    newer = draft(random.Random(5), "doc-04", 2)
    newer.update(
        stores=[store],
        campaign=campaign,
        valid_from=at(0).isoformat(),
        valid_to=None,
        published_at=at(1).isoformat(),
        text=f"{WORDS[0]} {WORDS[1]}",
    )
    documents_import(items=[newer], actor=operator)
    document_approve(
        document=Document.objects.get(doc_key="doc-04", version=2), actor=reviewer, reason="ok"
    )
    assert SearchDelta.objects.filter(removed=False).count() == 1
    answer = found()
    assert "doc:doc-04@2" in answer and "doc:doc-04@1" not in answer

    # Revoking the newer version brings the older back, still before any merge.
    document_revoke(
        document=Document.objects.get(doc_key="doc-04", version=2), actor=reviewer, reason="no"
    )
    answer = found()
    assert "doc:doc-04@1" in answer and "doc:doc-04@2" not in answer


def test_an_approval_appends_to_the_delta_and_many_queue_one_merge(
    operator: User, make_user: Any, queued_only: Any
) -> None:
    store, campaign = _one_scope_corpus(operator)
    reviewer = make_user("rita", Role.OPERATOR)
    scope = SearchScope.objects.get(store=store, campaign=campaign)
    arrays = bytes(scope.arrays)
    for i in range(5):
        item = draft(random.Random(i), f"new-{i}", 1)
        item.update(stores=[store], campaign=campaign)
        documents_import(items=[item], actor=operator)
        document_approve(
            document=Document.objects.get(doc_key=f"new-{i}"), actor=reviewer, reason="ok"
        )
    scope.refresh_from_db()
    assert bytes(scope.arrays) == arrays  # the merged array is not rewritten
    assert SearchDelta.objects.filter(scope=scope).count() == 5
    merges = [r for r in queued_only.results if r.task.name == postings.search_merge_task.name]
    assert len(merges) == 1  # queued once, as the delta reached the threshold
    with transaction.atomic():
        assert postings.delta_merged(scope.pk) == 5
    assert not SearchDelta.objects.filter(scope=scope).exists()
    assert postings.delta_merged(scope.pk) == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL keeps the merged array")
def test_a_reader_fetches_only_the_delta_after_one_approval(
    operator: User, make_user: Any, queued_only: Any
) -> None:
    store, campaign = _one_scope_corpus(operator)
    reviewer = make_user("rita", Role.OPERATOR)
    context = _context(store, campaign)
    search_knowledge(WORDS[0], context, actor=operator)
    search_knowledge(WORDS[0], context, actor=operator)
    assert search.FETCHED.bytes == 0  # the array is kept

    item = draft(random.Random(9), "new-1", 1)
    item.update(
        stores=[store],
        campaign=campaign,
        text=f"{WORDS[0]} fresh",
        valid_from=at(0).isoformat(),
        valid_to=None,
        published_at=at(0).isoformat(),
    )
    documents_import(items=[item], actor=operator)
    document_approve(document=Document.objects.get(doc_key="new-1"), actor=reviewer, reason="ok")
    answer = search_knowledge(WORDS[0], context, actor=operator)
    assert search.FETCHED.delta_rows == 1
    assert 0 < search.FETCHED.bytes < 2 * postings.ENTRY_DTYPE.itemsize
    assert "doc:new-1@1" in [item["id"] for item in answer["evidence"]]
    search_knowledge(WORDS[0], context, actor=operator)
    assert (search.FETCHED.delta_rows, search.FETCHED.bytes) == (0, 0)
