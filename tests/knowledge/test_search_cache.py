"""The evidence rows of returned versions are cached per process; what is returned is still
decided by the index, so a revocation acts at the next search."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.review.documents import document_revoke
from knowledge import search
from knowledge.models import Document
from knowledge.search import KnowledgeContext, search_knowledge
from knowledge.services import documents_import
from tests.knowledge.test_postings import BRAND, STORES, TENANT, at, corpus

pytestmark = pytest.mark.django_db


@pytest.fixture
def context(operator: User) -> KnowledgeContext:
    items = corpus(random.Random(5), 12)
    for item in items:
        item.update(approved=True, revoked=False, stores=list(STORES), campaign="campaign-p")
        item.update(
            valid_from=at(-100).isoformat(), valid_to=None, published_at=at(-100).isoformat()
        )
    documents_import(items=items, actor=operator)
    return KnowledgeContext(
        tenant=TENANT,
        brand=BRAND,
        store=STORES[0],
        campaign="campaign-p",
        occurred_at=at(0),
        known_at=at(0),
        facts={},
        limit=4,
    )


QUERY = "优惠券 水果茶 coupon tea"


def test_a_repeated_search_reads_only_the_index(
    context: KnowledgeContext, searcher: User, django_assert_num_queries: Any
) -> None:
    first = search_knowledge(QUERY, context, actor=searcher)
    assert first["evidence"]
    with django_assert_num_queries(1):
        again = search_knowledge(QUERY, context, actor=searcher)
    assert again == first


def test_a_cached_row_of_another_version_is_not_used(
    context: KnowledgeContext, searcher: User
) -> None:
    first = search_knowledge(QUERY, context, actor=searcher)
    for document_id, row in list(search._evidence_cache.items()):
        search._evidence_cache[document_id] = {**row, "version": row["version"] + 7, "title": "x"}
    assert search_knowledge(QUERY, context, actor=searcher) == first


def test_a_revocation_acts_at_the_next_search(
    context: KnowledgeContext, searcher: User, operator: User, make_user: Any
) -> None:
    from reviewconsole.roles import Role

    first = [item["id"] for item in search_knowledge(QUERY, context, actor=searcher)["evidence"]]
    doc_key, version = first[0].removeprefix("doc:").split("@")
    revoked = Document.objects.get(doc_key=doc_key, version=int(version))
    document_revoke(document=revoked, actor=make_user("oscar", Role.OPERATOR), reason="test")

    after = [item["id"] for item in search_knowledge(QUERY, context, actor=searcher)["evidence"]]
    assert first[0] not in after


def test_the_scope_array_is_sent_again_only_after_it_changed(
    context: KnowledgeContext, searcher: User, operator: User, make_user: Any
) -> None:
    """On PostgreSQL the scope's array is kept per process and checked by its row version, even
    for changes made in the same transaction; SQLite reads it each time."""
    from django.db import connection

    from reviewconsole.roles import Role

    first = [item["id"] for item in search_knowledge(QUERY, context, actor=searcher)["evidence"]]
    kept = dict(search._arrays_cache)
    search_knowledge(QUERY, context, actor=searcher)
    if connection.vendor == "postgresql":
        assert len(kept) == 1
        assert all(search._arrays_cache[key][1] is entries for key, (_, entries) in kept.items())
    else:
        assert not kept
    doc_key, version = first[0].removeprefix("doc:").split("@")
    revoked = Document.objects.get(doc_key=doc_key, version=int(version))
    document_revoke(document=revoked, actor=make_user("oscar", Role.OPERATOR), reason="test")
    assert first[0] not in [
        item["id"] for item in search_knowledge(QUERY, context, actor=searcher)["evidence"]
    ]


def _kept_lists() -> dict[Any, tuple[str, Any]]:
    return {key: search._postings_cache[key] for key in search._postings_cache}


def test_a_posting_list_travels_once_per_row_version(
    context: KnowledgeContext, searcher: User
) -> None:
    """On PostgreSQL the query's lists are kept per process with their row's version: the next
    search uses the very arrays kept (none was sent again). SQLite keeps none."""
    from django.db import connection

    first = search_knowledge(QUERY, context, actor=searcher)
    kept = _kept_lists()
    if connection.vendor != "postgresql":
        assert not kept
        return
    scope = (search.INDEX_NAME, TENANT, BRAND, "campaign-p", STORES[0])
    assert kept and all(key[:5] == scope for key in kept)
    assert {key[-1] for key in kept} == {"raw", "expanded"}
    assert search_knowledge(QUERY, context, actor=searcher) == first
    assert all(search._postings_cache[key][1] is ids for key, (_, ids) in kept.items())


def test_a_kept_list_of_another_row_version_is_not_used(
    context: KnowledgeContext, searcher: User
) -> None:
    """A kept list whose version is not the row's is replaced by the row's list, never used."""
    import numpy as np

    first = search_knowledge(QUERY, context, actor=searcher)
    for key, (version, _) in _kept_lists().items():
        search._postings_cache.keep(key, version + "-old", np.empty(0, dtype=np.int64))
    assert search_knowledge(QUERY, context, actor=searcher) == first


def test_another_scope_never_reads_this_scopes_lists(
    context: KnowledgeContext, searcher: User
) -> None:
    """The same tokens in another scope (another store) are read for that scope: what it
    answers with a warm cache is what it answers with a cold one."""
    from dataclasses import replace

    other = replace(context, store=STORES[1])
    search_knowledge(QUERY, context, actor=searcher)
    warm = search_knowledge(QUERY, other, actor=searcher)
    search._postings_cache.clear()
    search._arrays_cache.clear()
    assert search_knowledge(QUERY, other, actor=searcher) == warm
    search_knowledge(QUERY, other, actor=searcher)
    assert search_knowledge(QUERY, context, actor=searcher)["evidence"]


@pytest.mark.django_db(transaction=True)
def test_a_write_from_another_connection_reaches_the_next_search(
    context: KnowledgeContext, searcher: User, operator: User
) -> None:
    """A document approved through another connection (another thread: its own connection,
    committed) changes the lists this process keeps: the next search finds it."""
    import threading

    from django.db import connection, connections

    query = "优惠券 coupon"
    before = search_knowledge(query, context, actor=searcher)
    if connection.vendor == "postgresql":
        assert len(search._postings_cache)
    failures: list[BaseException] = []

    def elsewhere() -> None:
        try:
            item = corpus(random.Random(6), 1)[0]
            item.update(
                doc_key="doc-elsewhere",
                version=1,
                approved=True,
                revoked=False,
                stores=list(STORES),
                campaign="campaign-p",
                title="优惠券 coupon",
                text="优惠券 coupon 优惠券 coupon",
                valid_from=at(-100).isoformat(),
                valid_to=None,
                published_at=at(-100).isoformat(),
                requirements={},
            )
            documents_import(items=[item], actor=operator)
        except BaseException as error:  # reported by the test's thread
            failures.append(error)
        finally:
            connections.close_all()

    writer = threading.Thread(target=elsewhere)
    writer.start()
    writer.join()
    assert not failures
    after = search_knowledge(query, context, actor=searcher)
    assert "doc:doc-elsewhere@1" not in [item["id"] for item in before["evidence"]]
    assert after["evidence"][0]["id"] == "doc:doc-elsewhere@1"
