"""The engine answers as the two searches answered before it (``tests/textsearch/oracle.py``,
their code frozen as it was): knowledge search's ranking over a scope's packed entries (gate,
newest-version rule, both Jaccard branches, the vector branch's votes, RRF, the partial head,
conflicts), retrieval's branch order and intersections, the gate, and the query's tokens, on
generated scopes and queries."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge import postings
from knowledge import search as ks
from knowledge.domain import DocumentGateFields, Scope, admits
from semantic.branch import USED, Branch
from tests.textsearch import oracle
from textsearch import ranking
from textsearch.domain import ParsedQuery, parse_query, reparsed

BASE = datetime(2026, 9, 1, tzinfo=UTC)
DAY = 86_400_000_000


def _scope(
    rng: np.random.Generator, count: int, vocabulary: int, *, gated_share: float
) -> tuple[ks._Read, int, int]:
    """A scope of ``count`` entries: token sets from a small vocabulary (ratios tie often),
    random validity and publication times around the query's instant, versions of a few
    documents (``group``), rule groups with differing requirements, and the posting lists of a
    query of a few tokens in both branches."""
    entries = np.zeros(count, dtype=postings.ENTRY_DTYPE)
    entries["id"] = np.sort(rng.choice(count * 5, size=count, replace=False)) + 1
    groups = int(rng.integers(1, count + 1))
    entries["group"] = rng.integers(0, groups, count)
    entries["version"] = rng.integers(1, 4, count)
    entries["document_id"] = np.arange(1, count + 1)
    late = rng.random(count) > gated_share
    entries["valid_from"] = np.where(late, 20 * DAY, rng.integers(0, 10 * DAY, count))
    entries["valid_to"] = np.where(
        rng.random(count) < 0.5, postings.NEVER, rng.integers(5 * DAY, 30 * DAY, count)
    )
    entries["published_at"] = rng.integers(0, 12 * DAY, count)
    entries["order"] = rng.permutation(count)
    rules = int(rng.integers(1, 6))
    entries["rule"] = np.where(rng.random(count) < 0.4, rng.integers(0, rules, count), -1)
    entries["requirements"] = rng.integers(0, 3, count)
    entries["contested"] = entries["rule"] >= 0
    raw_sets = [
        rng.choice(vocabulary, size=rng.integers(1, 10), replace=False) for _ in range(count)
    ]
    expanded_sets = [
        np.union1d(tokens, rng.choice(vocabulary, size=rng.integers(0, 4), replace=False))
        for tokens in raw_sets
    ]
    entries["raw_size"] = [len(t) for t in raw_sets]
    entries["expanded_size"] = [len(t) for t in expanded_sets]
    query_raw = rng.choice(vocabulary, size=rng.integers(1, 6), replace=False)
    query_expanded = np.union1d(query_raw, rng.choice(vocabulary, size=2, replace=False))
    lists: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for query, sets, found in (
        (query_raw, raw_sets, lists[0]),
        (query_expanded, expanded_sets, lists[1]),
    ):
        for token in query:
            listed = [entries["id"][i] for i, tokens in enumerate(sets) if token in tokens]
            if listed:
                found.append(np.array(listed, dtype=np.int64))
    multi_version = bool(len(np.unique(entries["group"])) < count)
    read = ks._Read(True, "stamp", entries, multi_version, lists[0], lists[1], scope_id=None)
    return read, len(query_raw), len(query_expanded)


def _context(rng: np.random.Generator) -> ks.KnowledgeContext:
    at = BASE + timedelta(days=int(rng.integers(0, 15)))
    return ks.KnowledgeContext(
        tenant="t",
        brand="b",
        store="s",
        campaign="c",
        occurred_at=at,
        known_at=at + timedelta(days=int(rng.integers(-3, 4))),
        limit=int(rng.choice([1, 3, 4, 10, 50])),
    )


def _same(new: ks.Ranked, old: Any) -> None:
    assert asdict(new) == asdict(old)


def _epoch_at(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Times in the generated scopes count from BASE: both searches read the context's instants
    as microseconds since the same epoch."""
    monkeypatch.setattr(ks, "micros", lambda moment: oracle.micros(moment) - oracle.micros(BASE))
    monkeypatch.setattr(
        oracle, "micros", lambda moment, real=oracle.micros: real(moment) - real(BASE)
    )


@pytest.mark.parametrize("seed", range(40))
def test_knowledge_ranking_answers_as_before(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    _epoch_at(rng, monkeypatch)
    count = int(rng.integers(1, 400))
    read, raw_size, expanded_size = _scope(
        rng, count, int(rng.integers(10, 40)), gated_share=float(rng.random())
    )
    context = _context(rng)
    new = ks._ranked(read, raw_size, expanded_size, context, "q")
    old = oracle._ranked(read, raw_size, expanded_size, context, "q")
    _same(new, old)


@pytest.mark.parametrize("votes", [1, 2])
@pytest.mark.parametrize("seed", range(12))
def test_knowledge_ranking_with_the_vector_branch_answers_as_before(
    seed: int, votes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large scopes (the partial head) and small ones, the vector branch ranking a few entries
    counted ``votes`` times."""
    rng = np.random.default_rng(1000 + seed)
    _epoch_at(rng, monkeypatch)
    count = int(rng.integers(2_500, 4_000)) if seed % 2 else int(rng.integers(5, 300))
    read, raw_size, expanded_size = _scope(rng, count, int(rng.integers(12, 60)), gated_share=0.9)
    ranked = rng.choice(count, size=int(rng.integers(1, min(count, 21) + 1)), replace=False)
    ranks = np.zeros(count, dtype=np.int64)
    ranks[ranked] = np.arange(1, len(ranked) + 1)
    for module in (ks, oracle):
        monkeypatch.setattr(module, "vector_branch", lambda *args: Branch(USED, ranks))
        monkeypatch.setattr(module, "vector_votes", lambda: votes)
    context = _context(rng)
    new = ks._ranked(read, raw_size, expanded_size, context, "q")
    old = oracle._ranked(read, raw_size, expanded_size, context, "q")
    _same(new, old)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(0, 300),
    huge=st.booleans(),
)
def test_retrieval_branch_order_is_as_before(seed: int, count: int, huge: bool) -> None:
    """Retrieval's branch order (now the engine's Jaccard order) against the one it had, with
    unions beyond 2**26 now and then (the exact path)."""
    rng = np.random.default_rng(seed)
    hits = rng.integers(0, 6, count).astype(np.int64)
    sizes = rng.integers(1, 12, count).astype(np.int32)
    if huge and count:
        sizes[rng.integers(0, count)] = 2**27
        sizes = sizes.astype(np.int64)
    query_size = int(rng.integers(1, 8))
    hits = np.minimum(hits, np.minimum(sizes, query_size))
    order = rng.permutation(count).astype(np.int32)
    among = rng.random(count) < 0.8
    new = ranking.branch_order(hits, query_size, sizes, order, among)
    old = oracle.branch_order(hits, query_size, sizes, order, among)
    assert new.tolist() == old.tolist()


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(0, 200), spread=st.integers(1, 200))
def test_intersections_are_counted_as_before(seed: int, count: int, spread: int) -> None:
    """The engine's count of |query ∩ item| (retrieval's, now knowledge's too) against both
    former ones, ids spread thinly or densely."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(max(count * spread, 1), size=count, replace=False)).astype(np.int64)
    ids += 1
    lists = [
        np.sort(rng.choice(ids, size=int(rng.integers(0, count + 1)), replace=False))
        for _ in range(int(rng.integers(0, 5)))
    ]
    new = ranking.intersections(ids, lists)
    old = oracle.intersections(ids, lists)
    assert new is not None and old is not None
    assert new.tolist() == old.tolist()
    if count:
        positions = oracle._positions(ids)
        assert new.tolist() == oracle._intersections(ids, positions, lists, count).tolist()


moments = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2026, 3, 1), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None)
@given(
    doc=st.builds(
        DocumentGateFields,
        tenant=st.sampled_from(["t", "u"]),
        brand=st.sampled_from(["b", "c"]),
        stores=st.frozensets(st.sampled_from(["s1", "s2", "s3"]), max_size=3),
        campaign=st.sampled_from(["x", "y"]),
        approved=st.booleans(),
        revoked=st.booleans(),
        valid_from=moments,
        valid_to=st.none() | moments,
        published_at=moments,
    ),
    scope=st.builds(
        Scope,
        tenant=st.sampled_from(["t", "u"]),
        brand=st.sampled_from(["b", "c"]),
        store=st.sampled_from(["s1", "s2", "s3"]),
        campaign=st.sampled_from(["x", "y"]),
        occurred_at=moments,
        known_at=moments,
    ),
)
def test_the_gate_declared_by_terms_admits_as_before(doc: DocumentGateFields, scope: Scope) -> None:
    assert admits(doc, scope) == oracle.admits(doc, scope)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200), multi=st.booleans())
def test_the_gate_over_packed_columns_admits_as_before(seed: int, count: int, multi: bool) -> None:
    """Knowledge's gate over the index's columns (its terms, ``INDEX_GATE``) with the
    newest-version rule, as ``_ranked`` applies it, against the former expression."""
    from knowledge.domain import INDEX_GATE, KNOWN, OCCURRED
    from textsearch.domain import columns_admit

    rng = np.random.default_rng(seed)
    entries = np.zeros(count, dtype=postings.ENTRY_DTYPE)
    entries["valid_from"] = rng.integers(0, 10, count)
    entries["valid_to"] = np.where(
        rng.random(count) < 0.3, postings.NEVER, rng.integers(0, 20, count)
    )
    entries["published_at"] = rng.integers(0, 10, count)
    at, known = int(rng.integers(0, 15)), int(rng.integers(0, 15))
    new = np.asarray(columns_admit(INDEX_GATE, entries, {OCCURRED: at, KNOWN: known}), dtype=bool)
    assert new.tolist() == oracle.gate(entries, at, known, False).tolist()


texts = st.text(alphabet=st.sampled_from(list("abc XYZ12-优惠券积分门店的了")), max_size=40)
lexicons = st.dictionaries(
    st.sampled_from(["coupon", "abc", "优惠", "积分", "x", "门店"]),
    st.sampled_from(["优惠券", "points", "store", "abc"]),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(text=texts, lexicon=lexicons, other=lexicons)
def test_a_query_is_parsed_as_it_was_tokenized(
    text: str, lexicon: dict[str, str], other: dict[str, str]
) -> None:
    """Parsed once: its raw and expanded tokens are what each stage tokenized before, and
    expanded again under another lexicon only the expanded set changes."""
    parsed = parse_query(text, lexicon, "one")
    assert parsed == ParsedQuery(
        text, oracle.tokenize(text), oracle.tokenize(oracle.expand(text, lexicon)), "one"
    )
    again = reparsed(parsed, other, "two")
    assert again.raw == parsed.raw
    assert again.expanded == oracle.tokenize(oracle.expand(text, other))
    assert reparsed(parsed, other, "one") is parsed
