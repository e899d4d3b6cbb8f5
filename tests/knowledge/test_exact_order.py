"""Exact ordering without Fraction, at any size, against the exact definition (Fraction)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.domain import RRF_K, exact_order, reciprocal_rank_fusion, rrf_fraction
from knowledge.search import _exact_head, _jaccard_order

# Fractions whose floats collide: n/d next to (n*m ± 1)/(d*m) for a large m.
BIG = st.integers(min_value=1, max_value=10**30)


@st.composite
def near_fractions(draw: st.DrawFn) -> list[tuple[int, int]]:
    base_n = draw(st.integers(min_value=1, max_value=10**6))
    base_d = draw(st.integers(min_value=base_n, max_value=10**7))
    out = []
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        m = draw(st.sampled_from([1, 2, 10**9, 10**18, 3**40]))
        delta = draw(st.sampled_from([-1, 0, 0, 1]))
        out.append((max(1, base_n * m + delta), base_d * m))
    out += draw(st.lists(st.tuples(BIG, BIG), max_size=5))
    return out


def by_fraction(items: list[tuple[int, int, str]]) -> list[str]:
    return [i for _, i in sorted((-Fraction(n, d), i) for n, d, i in items)]


@given(near_fractions())
def test_exact_order_equals_fraction_order(fractions: list[tuple[int, int]]) -> None:
    items = [(n, d, f"id{k % 5}-{k}") for k, (n, d) in enumerate(fractions)]
    assert exact_order(items) == by_fraction(items)


@given(st.lists(st.tuples(BIG, BIG), max_size=30))
def test_exact_order_breaks_exact_ties_by_id(pairs: list[tuple[int, int]]) -> None:
    # Every value twice, once reduced and once scaled: equal values, different ids.
    items = [(n, d, f"a{k}") for k, (n, d) in enumerate(pairs)]
    items += [(n * 7, d * 7, f"b{k}") for k, (n, d) in enumerate(pairs)]
    assert exact_order(items) == by_fraction(items)


RANK = st.integers(min_value=1, max_value=10**12)


@given(st.lists(st.tuples(RANK, st.one_of(st.none(), RANK)), min_size=1, max_size=40))
def test_rrf_fraction_orders_as_the_sum_of_fractions(ranks: list[tuple[int, int | None]]) -> None:
    # Ranks far beyond any float shortcut: the ordering stays exact.
    items = []
    exact: dict[str, Fraction] = {}
    for k, (r1, r2) in enumerate(ranks):
        parts = [r for r in (r1, r2) if r is not None]
        doc_id = f"d{k:03d}"
        items.append((*rrf_fraction(parts), doc_id))
        exact[doc_id] = sum((Fraction(1, RRF_K + r) for r in parts), Fraction(0))
    assert exact_order(items) == sorted(exact, key=lambda i: (-exact[i], i))


def test_rrf_is_exact_beyond_ten_thousand_ranked_documents() -> None:
    ids = [f"d{i:05d}" for i in range(30_000)]
    first = ids[::-1]
    second = ids[1::2] + ids[::2]
    exact: dict[str, Fraction] = {}
    for ranking in (first, second):
        for rank, doc_id in enumerate(ranking, start=1):
            exact[doc_id] = exact.get(doc_id, Fraction(0)) + Fraction(1, RRF_K + rank)
    assert reciprocal_rank_fusion([first, second]) == sorted(exact, key=lambda i: (-exact[i], i))


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=2_000_000),
            st.one_of(st.none(), st.integers(min_value=1, max_value=2_000_000)),
        ),
        min_size=1,
        max_size=60,
        unique_by=lambda pair: pair,
    ),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=1, max_value=70),
)
def test_the_head_in_float_order_is_exact_or_asks_for_more(
    ranks: list[tuple[int, int | None]], limit: int, fetch: int
) -> None:
    # Rows as the ranking hands them over: ordered by the float of the fused score, then the
    # tie key, cut to ``fetch``; the head is either the exact one or refused.
    rows = []
    for key, (r1, r2) in enumerate(ranks):
        n, d = rrf_fraction([r for r in (r1, r2) if r is not None])
        rows.append((n / d, (key, r1, r2, 1000 + key)))
    rows.sort(key=lambda row: (-row[0], row[1][0]))
    ordered = [row for _, row in rows]
    exact = sorted(
        range(len(ranks)),
        key=lambda k: (
            -sum((Fraction(1, RRF_K + r) for r in ranks[k] if r is not None), Fraction(0)),
            k,
        ),
    )

    full = _exact_head(ordered, limit, complete=True)
    head = _exact_head(ordered[:fetch], limit, complete=fetch >= len(ordered))

    assert full == [1000 + k for k in exact[:limit]]
    if head is not None:
        assert head == full


@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=200)),
        min_size=1,
        max_size=80,
    )
)
def test_jaccard_order_is_exact_with_ties_by_order(pairs: list[tuple[int, int]]) -> None:
    # (common, extra) with union = common + extra: ratios repeat (1/2 = 2/4), ties by order.
    common = np.array([c for c, _ in pairs], dtype=np.int64)
    union = np.array([c + e for c, e in pairs], dtype=np.int64)
    order = np.random.default_rng(len(pairs)).permutation(len(pairs)).astype(np.int64)

    got = list(_jaccard_order(common, union, order))

    expected = sorted(
        range(len(pairs)), key=lambda i: (-Fraction(int(common[i]), int(union[i])), order[i])
    )
    assert got == expected


BOUND = 2**26


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=BOUND // 2, max_value=BOUND - 2),
            st.integers(min_value=0, max_value=3),
        ),
        min_size=2,
        max_size=40,
    ),
    st.booleans(),
)
def test_jaccard_order_is_exact_for_neighbouring_ratios_at_both_sides_of_the_bound(
    pairs: list[tuple[int, int]], above: bool
) -> None:
    """Ratios as close as ratios of such sizes get (a/b beside (a+1)/(b+1)), just under the
    size where the double ordering is exact and, with ``above``, past it (the integer path)."""
    rows = [(n - k, n + (BOUND if above else 0)) for n, k in pairs]
    rows += [(c + 1, u + 1) for c, u in rows if u + 1 < BOUND or above]
    common = np.array([c for c, _ in rows], dtype=np.int64)
    union = np.array([u for _, u in rows], dtype=np.int64)
    order = np.random.default_rng(len(rows)).permutation(len(rows)).astype(np.int64)

    got = list(_jaccard_order(common, union, order))

    expected = sorted(
        range(len(rows)), key=lambda i: (-Fraction(int(common[i]), int(union[i])), order[i])
    )
    assert got == expected
