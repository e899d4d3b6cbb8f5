"""What makes a search's cost grow slower than its scope leaves every answer as it was: both
branches' intersections counted at once (a list the branches share counted once, a mask per
list instead of ``bincount``) are each branch's intersections counted alone; the ``k``-th best
ratio found from the distinct (common, union) pairs is the one a partition of every ratio
finds; and the head found from each branch's best is the head of the full ranking on scopes
large enough for the partial head, where most entries share a token with the query."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge import postings
from knowledge import search as ks
from tests.textsearch import oracle
from textsearch import ranking

AT = datetime(2026, 9, 18, 6, 0, tzinfo=UTC)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(0, 300),
    spread=st.sampled_from([1, 2, 7, 63, 64, 65, 500]),
    lists=st.integers(0, 6),
    shared=st.floats(0, 1),
)
def test_both_intersections_are_each_branchs_own(
    seed: int, count: int, spread: int, lists: int, shared: float
) -> None:
    """Ids dense or spread thinly (past the span where offsets are used), some lists the same
    in both branches (equal arrays or the very same object), some only in one."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(max(count * spread, 1), size=count, replace=False)).astype(np.int64)
    ids += int(rng.integers(1, 1_000))

    def some() -> np.ndarray:
        return np.sort(rng.choice(ids, size=int(rng.integers(0, count + 1)), replace=False))

    raw = [some() for _ in range(lists)]
    expanded = []
    for listed in raw:
        if rng.random() < shared:
            expanded.append(listed if rng.random() < 0.5 else listed.copy())
        elif rng.random() < 0.5:
            expanded.append(some())
    expanded += [some() for _ in range(int(rng.integers(0, 3)))]
    order = rng.permutation(len(expanded))
    expanded = [expanded[i] for i in order]
    raw_counts, expanded_counts = ranking.both_intersections(ids, raw, expanded)
    expected_raw = ranking.intersections(ids, raw)
    expected_expanded = ranking.intersections(ids, expanded)
    assert expected_raw is not None and expected_expanded is not None
    by_set = [sum(int(i) in set(listed.tolist()) for listed in raw) for i in ids]
    assert raw_counts.tolist() == expected_raw.tolist() == by_set
    assert expanded_counts.tolist() == expected_expanded.tolist()
    assert raw_counts.dtype == expanded_counts.dtype == np.int64


def test_more_lists_than_a_byte_counts() -> None:
    """A query of many tokens: the counters widen past 255 lists."""
    ids = np.arange(10, 20, dtype=np.int64)
    raw = [ids.copy() for _ in range(300)]
    raw_counts, expanded_counts = ranking.both_intersections(ids, raw, raw[:1])
    assert raw_counts.tolist() == [300] * 10
    assert expanded_counts.tolist() == [1] * 10
    assert ranking.intersections(ids, raw).tolist() == [300] * 10  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 2_000),
    top=st.integers(1, 40),
    wide=st.booleans(),
)
def test_the_kth_best_ratio_is_the_partitions(seed: int, count: int, top: int, wide: bool) -> None:
    """Few distinct pairs (the counted path) and many (the partition it falls back to), equal
    ratios from different pairs (1/2 and 2/4) included."""
    rng = np.random.default_rng(seed)
    common = rng.integers(1, top + 1, count).astype(np.int64)
    union = common + rng.integers(0, 10**6 if wide else top, count)
    values = common / union
    k = int(rng.integers(1, count + 1))
    expected = float(-np.partition(-values, k - 1)[k - 1])
    assert ks._kth_best(common, union, values, k) == expected


def _read(rng: np.random.Generator, count: int, vocabulary: int) -> tuple[ks._Read, int, int]:
    """A scope where nearly every entry shares a token with the query (the shape that made the
    cost grow with the scope): a few very common tokens, the raw and expanded lists mostly the
    same."""
    entries = np.zeros(count, dtype=postings.ENTRY_DTYPE)
    entries["id"] = np.sort(rng.choice(count * 3, size=count, replace=False)) + 1
    entries["document_id"] = np.arange(1, count + 1)
    entries["valid_from"] = 0
    entries["valid_to"] = postings.NEVER
    entries["order"] = rng.permutation(count)
    entries["rule"] = -1
    weights = 1.0 / np.arange(1, vocabulary + 1)
    weights /= weights.sum()
    raw_sets = [
        rng.choice(vocabulary, size=rng.integers(2, 14), replace=False, p=weights)
        for _ in range(count)
    ]
    expanded_sets = [
        np.union1d(tokens, [0]) if rng.random() < 0.1 else tokens for tokens in raw_sets
    ]
    entries["raw_size"] = [len(t) for t in raw_sets]
    entries["expanded_size"] = [len(t) for t in expanded_sets]
    query_raw = rng.choice(vocabulary, size=rng.integers(2, 8), replace=False, p=weights)
    query_expanded = np.union1d(query_raw, [0])
    lists: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for query, sets, found in (
        (query_raw, raw_sets, lists[0]),
        (query_expanded, expanded_sets, lists[1]),
    ):
        for token in query:
            listed = entries["id"][[token in tokens for tokens in sets]]
            if len(listed):
                found.append(listed.astype(np.int64))
    read = ks._Read(True, "stamp", entries, False, lists[0], lists[1])
    return read, len(query_raw), len(query_expanded)


@pytest.mark.parametrize("seed", range(10))
def test_the_head_of_a_scope_that_all_matches_is_the_full_rankings(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(500 + seed)
    read, raw_size, expanded_size = _read(rng, int(rng.integers(3_000, 9_000)), 40)
    context = ks.KnowledgeContext(
        tenant="t",
        brand="b",
        store="s",
        campaign="c",
        occurred_at=AT,
        known_at=AT,
        limit=int(rng.choice([1, 4, 10, 50])),
    )
    monkeypatch.setattr(ks, "PARTIAL_FROM", 10**9)
    full = ks._ranked(read, raw_size, expanded_size, context, "q")
    monkeypatch.setattr(ks, "PARTIAL_FROM", 1)
    partial = ks._ranked(read, raw_size, expanded_size, context, "q")
    assert partial == full
    # And as the ranking answered before any of this (its code frozen in the oracle).
    assert asdict(partial) == asdict(oracle._ranked(read, raw_size, expanded_size, context, "q"))
    assert full.matched > len(read.entries) // 2
