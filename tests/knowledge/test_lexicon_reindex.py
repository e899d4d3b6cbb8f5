"""A lexicon change commits at once and the index follows in a background task; meanwhile every
search answers exactly as the definition does under the index's lexicon, and after the task under
the new one."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django_tasks import task_backends

from knowledge import lexicon as index_lexicon
from knowledge import postings
from knowledge.domain import expand, tokenize
from knowledge.lexicon import reindexed
from knowledge.models import Document, LexiconState, Synonym
from knowledge.services import documents_import, synonym_delete, synonym_set
from knowledge.tasks import lexicon_reindex_task
from tests.knowledge.test_postings import Stored, corpus, expected, random_context

pytestmark = pytest.mark.django_db

QUEUED_ONLY = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}


def current() -> dict[str, str]:
    return dict(Synonym.objects.values_list("term", "canonical"))


def assert_exact(
    rng: random.Random, stored: list[Stored], lexicon: dict[str, str], actor: User
) -> int:
    from knowledge.search import search_knowledge

    answered = 0
    for _ in range(40):
        query, context = random_context(rng)
        ids, conflicts, truncated = expected(stored, set(), query, context, lexicon)
        result = search_knowledge(query, context, actor=actor)
        assert [item["id"] for item in result["evidence"]] == ids, (query, context)
        assert [item["conflict"] for item in result["evidence"]] == conflicts
        assert result["truncated"] is truncated
        answered += bool(ids)
    return answered


@pytest.fixture
def queued_only(settings: Any) -> Any:
    settings.TASKS = QUEUED_ONLY
    backend = task_backends["default"]
    backend.clear()  # type: ignore[attr-defined]
    return backend


@pytest.mark.parametrize("seed", range(3))
def test_searches_stay_exact_before_and_after_the_background_reindex(
    operator: User, queued_only: Any, seed: int
) -> None:
    rng = random.Random(seed)
    items = corpus(rng, 20)
    documents_import(items=items, actor=operator)
    stored = [Stored(item) for item in items]
    before = current()
    tokens_before = dict(Document.objects.values_list("pk", "expanded_tokens"))

    synonym_set(term="fruit", canonical="水果茶", actor=operator)
    synonym_delete(synonym=Synonym.objects.get(term="代金券"), actor=operator)
    after = current()
    assert after != before

    # The change is committed and its reindex queued, but nothing of the index was rewritten.
    queued = [r.task.name for r in queued_only.results]
    assert queued.count(lexicon_reindex_task.name) == 2
    assert dict(Document.objects.values_list("pk", "expanded_tokens")) == tokens_before
    assert assert_exact(rng, stored, before, operator) > 5

    # A version imported meanwhile is tokenized under the index's lexicon, so it answers too.
    late = {**corpus(random.Random(seed + 100), 1)[0], "doc_key": "late", "approved": True}
    late.update(revoked=False, title="fruit 代金券", text="coupon")
    documents_import(items=[late], actor=operator)
    stored.append(Stored(late))
    assert_exact(rng, stored, before, operator)

    assert lexicon_reindex_task.call() > 0
    state = LexiconState.objects.get(pk=1)
    assert (state.indexed_stamp, state.indexed_lexicon) == (state.stamp, after)
    assert assert_exact(rng, stored, after, operator) > 5
    reindexed_late = Document.objects.get(doc_key="late").expanded_tokens.split()
    assert frozenset(reindexed_late) == tokenize(expand("fruit 代金券\ncoupon", after))

    # The second queued run finds the index current and writes nothing.
    assert reindexed() == 0


def test_a_run_overtaken_by_a_later_change_writes_nothing(
    operator: User, queued_only: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = corpus(random.Random(7), 10)
    documents_import(items=items, actor=operator)
    old_stamp = LexiconState.objects.get(pk=1).stamp
    synonym_set(term="fruit", canonical="水果茶", actor=operator)
    tokens = dict(Document.objects.values_list("pk", "expanded_tokens"))
    older = {**current(), "tea": "奶茶"}  # a lexicon a slower run read before a later change
    monkeypatch.setattr(postings, "consistent_lexicon", lambda: ("0" * 32, older))

    assert reindexed() == 0

    state = LexiconState.objects.get(pk=1)
    assert state.indexed_stamp == old_stamp
    assert dict(Document.objects.values_list("pk", "expanded_tokens")) == tokens


def test_the_search_reads_the_index_lexicon_once_per_process(
    operator: User, searcher: User, django_assert_num_queries: Any
) -> None:
    from knowledge.search import KnowledgeContext, search_knowledge

    items = corpus(random.Random(3), 5)
    documents_import(items=items, actor=operator)
    index_lexicon._cache.clear()
    _query, context = random_context(random.Random(3))
    with django_assert_num_queries(2):  # the index's lexicon, then the postings statement
        search_knowledge(
            "zzz", KnowledgeContext(**{**context.__dict__, "limit": 4}), actor=searcher
        )
    with django_assert_num_queries(1):
        search_knowledge(
            "zzz", KnowledgeContext(**{**context.__dict__, "limit": 4}), actor=searcher
        )
