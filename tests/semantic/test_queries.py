"""Question vectors: coalesced embedding, the table shared by processes, what it stores."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from semantic import queries
from semantic.models import QueryVector
from tests.semantic.fakes import Concepts

HANG_GUARD = 30  # seconds: a deadline against a hang, never a wait for something to happen


class Gated(Concepts):
    """Embeds like ``Concepts``; its first call waits until the test lets it finish, so the
    test knows questions submitted meanwhile arrive while a call runs."""

    name = "fake:gated"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(HANG_GUARD)
        return super().queries(texts)


def test_questions_arriving_while_an_embedding_runs_are_embedded_together_in_the_next_call() -> (
    None
):
    embedder = Gated()
    coalescer = queries.Coalescer(embedder.queries)
    first = coalescer.submit("new store opening 新店")
    assert embedder.started.wait(HANG_GUARD)
    waiting = [coalescer.submit(t) for t in ("delivery fee", "积分 points", "delivery fee")]
    embedder.release.set()
    vectors = [f.result(HANG_GUARD) for f in (first, *waiting)]
    # One call for the first, one for all that came while it ran (each distinct text once).
    assert embedder.calls == [["new store opening 新店"], ["delivery fee", "积分 points"]]
    alone = Concepts()
    for text, vector in zip(
        ("new store opening 新店", "delivery fee", "积分 points", "delivery fee"),
        vectors,
        strict=True,
    ):
        assert np.array_equal(vector, alone.queries([text])[0])


def test_a_failing_embedder_fails_every_question_of_its_batch_and_the_next_call_still_runs() -> (
    None
):
    calls: list[list[str]] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        if len(calls) == 1:
            raise ConnectionError("refused")
        return np.ones((len(texts), 2), dtype=np.float32)

    coalescer = queries.Coalescer(embed)
    with pytest.raises(ConnectionError):
        coalescer.submit("a").result(HANG_GUARD)
    assert coalescer.submit("b").result(HANG_GUARD).tolist() == [1.0, 1.0]


def test_the_local_model_gives_each_question_of_a_batch_the_vector_it_gives_it_alone() -> None:
    from semantic.embedders import LocalEmbedder

    model = LocalEmbedder()
    texts = ["why is my gift card empty", "优惠券用不了", "opening hours of the new store"]
    together = model.queries(texts)
    for text, row in zip(texts, together, strict=True):
        assert np.array_equal(row, model.queries([text])[0])


@pytest.mark.django_db
def test_a_question_is_embedded_once_for_every_process_and_the_table_holds_no_text(
    settings: Any,
) -> None:
    embedder = Concepts()
    question = "  Delivery   fee for 新店 "
    first = queries.query_vector(embedder, question, "knowledge:1")
    queries.memory_cleared()  # as another process would start: nothing in its memory
    again = queries.query_vector(embedder, "Delivery fee for 新店", "knowledge:1")
    assert np.array_equal(first, again)
    assert embedder.queried == ["Delivery fee for 新店"]  # normalised, embedded once
    (row,) = QueryVector.objects.values_list("model", "digest", "vector")
    stored = " ".join(str(v) for v in row[:2]) + bytes(row[2]).hex()
    for word in ("Delivery", "delivery", "新店", "fee"):
        assert word not in stored
    assert row[1] == queries.digest(embedder.name, "knowledge:1", question)


@pytest.mark.django_db
def test_a_question_asked_in_another_scope_is_not_answered_from_the_first_scopes_entry() -> None:
    embedder = Concepts()
    queries.query_vector(embedder, "delivery fee", "knowledge:1")
    queries.query_vector(embedder, "delivery fee", "knowledge:2")
    assert embedder.queried == ["delivery fee", "delivery fee"]
    assert QueryVector.objects.count() == 2


@pytest.mark.django_db
def test_the_shared_table_keeps_the_newest_rows_up_to_its_bound(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SEMANTIC_QUERY_CACHE_ROWS = 3
    monkeypatch.setattr(queries, "PRUNE_EVERY", 1)
    embedder = Concepts()
    for i in range(6):
        queries.query_vector(embedder, f"delivery question {i}")
    kept = set(QueryVector.objects.values_list("digest", flat=True))
    assert kept == {queries.digest(embedder.name, "", f"delivery question {i}") for i in (3, 4, 5)}
