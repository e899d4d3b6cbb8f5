"""The head found from each branch's best is the full ranking's head, at sizes where it is used."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from knowledge import postings
from knowledge import search as ks
from semantic.branch import USED, Branch

AT = datetime(2026, 9, 18, 6, 0, tzinfo=UTC)


def _read(
    rng: np.random.Generator, count: int, vocabulary: int, *, independent: bool
) -> tuple[ks._Read, int, int]:
    """A scope of ``count`` admitted entries whose token sets come from a small vocabulary (so
    ratios tie often), the posting lists of a query of a few of those tokens in both branches
    (with ``independent``, the expanded query shares no token with the raw one, so an entry
    near the top of one branch is often deep in the other)."""
    entries = np.zeros(count, dtype=postings.ENTRY_DTYPE)
    entries["id"] = np.arange(1, count + 1) * 3
    entries["document_id"] = np.arange(1, count + 1)
    entries["valid_from"] = 0
    entries["valid_to"] = postings.NEVER
    entries["published_at"] = 0
    entries["order"] = rng.permutation(count)
    entries["rule"] = -1
    raw_lists: list[np.ndarray] = []
    expanded_lists: list[np.ndarray] = []
    raw_sets = [
        rng.choice(vocabulary, size=rng.integers(2, 12), replace=False) for _ in range(count)
    ]
    expanded_sets = [
        np.union1d(tokens, rng.choice(vocabulary, size=rng.integers(0, 4), replace=False))
        for tokens in raw_sets
    ]
    entries["raw_size"] = [len(t) for t in raw_sets]
    entries["expanded_size"] = [len(t) for t in expanded_sets]
    query_raw = rng.choice(vocabulary, size=rng.integers(1, 6), replace=False)
    if independent:
        others = np.setdiff1d(np.arange(vocabulary), query_raw)
        query_expanded = rng.choice(others, size=rng.integers(1, 6), replace=False)
    else:
        query_expanded = np.union1d(query_raw, rng.choice(vocabulary, size=2, replace=False))
    for query, sets, lists in (
        (query_raw, raw_sets, raw_lists),
        (query_expanded, expanded_sets, expanded_lists),
    ):
        for token in query:
            listed = [entries["id"][i] for i, tokens in enumerate(sets) if token in tokens]
            if listed:
                lists.append(np.array(listed, dtype=np.int64))
    read = ks._Read(True, "stamp", entries, False, raw_lists, expanded_lists)
    return read, len(query_raw), len(query_expanded)


@pytest.mark.parametrize("shallow", [False, True])
@pytest.mark.parametrize("independent", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_the_partial_head_is_the_full_rankings_head(
    seed: int, independent: bool, shallow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``shallow``: each branch ranks only a little more than the bound needs, so the head's
    entries often lack a rank in one branch and have it counted."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2_500, 6_000))
    read, raw_size, expanded_size = _read(
        rng, count, vocabulary=int(rng.integers(12, 60)), independent=independent
    )
    limit = int(rng.choice([1, 4, 10, 50]))
    context = ks.KnowledgeContext(
        tenant="t", brand="b", store="s", campaign="c", occurred_at=AT, known_at=AT, limit=limit
    )
    used = []
    real = ks._partial_head

    def watched(*args: object, **kwargs: object) -> object:
        found = real(*args, **kwargs)  # type: ignore[arg-type]
        used.append(found is not None)
        return found

    monkeypatch.setattr(ks, "_partial_head", watched)
    if shallow:
        monkeypatch.setattr(ks, "_depth", lambda limit: ks.RRF_K + 2 * limit + 8)
    monkeypatch.setattr(ks, "PARTIAL_FROM", 10**9)
    full = ks._ranked(read, raw_size, expanded_size, context)
    monkeypatch.setattr(ks, "PARTIAL_FROM", 1)
    partial = ks._ranked(read, raw_size, expanded_size, context)
    assert partial == full
    if not shallow:
        assert used == [True] or not full.chosen, "the bounds should decide a head of this shape"


@pytest.mark.parametrize("seed", range(8))
def test_a_counted_rank_is_the_full_rankings_rank(seed: int) -> None:
    """The rank counted for an entry the partial ranking left unranked is its place in the
    branch ranked whole (ties by order), for every candidate."""
    rng = np.random.default_rng(seed)
    count = 400
    member = rng.random(count) < 0.7
    common = rng.integers(1, 6, count)
    union = common + rng.integers(0, 6, count)
    order = rng.permutation(count).astype(np.int64)
    ratio = np.where(member, common / union, 0.0)
    candidates = np.nonzero(member)[0]
    ranked = candidates[ks._jaccard_order(common[candidates], union[candidates], order[candidates])]
    for place, index in enumerate(ranked, start=1):
        assert ks._rank_of(int(index), ratio, member, order) == place


@pytest.mark.parametrize("votes", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_with_the_vector_branch_the_partial_head_is_the_full_rankings_head(
    seed: int, votes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector branch ranks a few entries (some deep in both lexical branches, some matching
    no word at all), counted ``votes`` times: the head found from each branch's best is still the
    full ranking's, and is found that way."""
    rng = np.random.default_rng(100 + seed)
    count = int(rng.integers(2_500, 5_000))
    read, raw_size, expanded_size = _read(
        rng, count, vocabulary=int(rng.integers(12, 60)), independent=bool(seed % 2)
    )
    ranked = rng.choice(count, size=int(rng.integers(1, 21)), replace=False)
    ranks = np.zeros(count, dtype=np.int64)
    ranks[ranked] = np.arange(1, len(ranked) + 1)
    monkeypatch.setattr(ks, "vector_branch", lambda *args: Branch(USED, ranks))
    monkeypatch.setattr(ks, "vector_votes", lambda: votes)
    limit = int(rng.choice([1, 4, 10]))
    context = ks.KnowledgeContext(
        tenant="t", brand="b", store="s", campaign="c", occurred_at=AT, known_at=AT, limit=limit
    )
    used = []
    real = ks._partial_head

    def watched(*args: object, **kwargs: object) -> object:
        found = real(*args, **kwargs)  # type: ignore[arg-type]
        used.append(found is not None)
        return found

    monkeypatch.setattr(ks, "_partial_head", watched)
    monkeypatch.setattr(ks, "PARTIAL_FROM", 10**9)
    full = ks._ranked(read, raw_size, expanded_size, context)
    monkeypatch.setattr(ks, "PARTIAL_FROM", 1)
    partial = ks._ranked(read, raw_size, expanded_size, context)
    assert partial == full
    assert used == [True], "the bounds should decide a head of this shape"
