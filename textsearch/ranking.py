"""Exact ranking over a scope's packed entries, as vector operations (numpy): what both
indexes' searches share.

Each branch (raw and expanded tokens) orders the items sharing a token with the query by Jaccard
|q ∩ d| / |q ∪ d| descending, ties by the items' id order (:func:`jaccard_order`,
:func:`branch_order`), exactly as ``textsearch.domain.rank_branch`` orders texts; the branches
(and the vector branch's ranks, counted its votes) are fused by reciprocal rank fusion,
Σ 1/(k + rank) descending, ties by id (:func:`fused_order`, :func:`exact_head`), exactly as
``textsearch.domain.reciprocal_rank_fusion``. No fraction is built per item: the few distinct
(intersection, union) pairs are ordered as doubles where those are exact and in Python
otherwise, and fused scores are sorted as floats (correctly rounded, so monotone) with any run
of equal floats checked by integer cross-multiplication. Intersections are counted from the
query's posting lists (:func:`intersections`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from textsearch.domain import exact_order, rrf_fraction, rrf_fractions

# A position table is built when a scope's entry ids span at most this many times their count
# (else the ids are searched).
_TABLE_SPAN = 64
# Below this (k + rank), a fused score's numerator and denominator are exact in a double, so
# its float is correctly rounded (and floats order as the scores, but for equal floats).
_EXACT_FLOAT = 1 << 26
# Below this, the cross-multiplication of two fused scores fits an int64.
_EXACT_INT64 = 1 << 20


def position_table(ids: np.ndarray, *, always: bool = False) -> np.ndarray | None:
    """A table from entry id (less the scope's smallest) to the entry's position in ``ids``
    (sorted; -1 where no entry has the id): built when the ids span at most ``_TABLE_SPAN``
    times their count, or ``always``; None otherwise (the ids are searched instead)."""
    count = len(ids)
    if count == 0:
        return None
    low, span = int(ids[0]), int(ids[-1]) - int(ids[0]) + 1
    if not always and span > _TABLE_SPAN * count:
        return None
    table = np.full(span, -1, dtype=np.int64)
    table[ids - low] = np.arange(count)
    return table


def intersections(
    ids: np.ndarray,
    lists: list[np.ndarray],
    *,
    table: np.ndarray | None = None,
    checked: bool = True,
) -> np.ndarray | None:
    """|query ∩ item| per entry of ``ids`` (sorted): how many of the query's posting lists hold
    each. ``table``: :func:`position_table` of ``ids`` when the caller built it (once for both
    branches). ``checked``: None when a list names an entry ``ids`` does not hold (the array and
    the lists disagree: the caller does not trust them); unchecked, the caller knows they agree
    (read in one statement)."""
    count = len(ids)
    if not lists:
        return np.zeros(count, dtype=np.int64)
    listed = np.concatenate(lists)
    if count == 0:
        return None if len(listed) else np.zeros(0, dtype=np.int64)
    if table is None:
        table = position_table(ids)
    low = int(ids[0])
    if table is not None:
        if checked and not ((listed >= low) & (listed < low + len(table))).all():
            return None
        at = table[listed - low]
        if checked and (at < 0).any():
            return None
    else:
        at = np.searchsorted(ids, listed)
        if checked and ((at >= count).any() or (ids[np.minimum(at, count - 1)] != listed).any()):
            return None
    counts = np.zeros(count, dtype=_count_dtype(len(lists)))
    _count_into(counts, np.split(at, np.cumsum([len(listed) for listed in lists])[:-1]), 0)
    return counts.astype(np.int64)


def both_intersections(
    ids: np.ndarray, raw: list[np.ndarray], expanded: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`intersections` of both branches at once, unchecked (the caller read the array
    and the lists together, so they agree). A list both branches hold (a token whose raw and
    expanded lists name the same entries, as most do) is counted once; each count runs over
    the ids' span (``ids`` less the smallest), not through a position table, and is then read
    at the entries' offsets, so each posting is touched once."""
    count = len(ids)
    if count == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    shared, raw_only, taken = [], [], set()
    by_shape: dict[tuple[int, int, int], list[int]] = {}
    for i, listed in enumerate(expanded):
        by_shape.setdefault(_shape(listed), []).append(i)
    for listed in raw:
        match = next(
            (
                i
                for i in by_shape.get(_shape(listed), ())
                if i not in taken and (expanded[i] is listed or np.array_equal(expanded[i], listed))
            ),
            None,
        )
        if match is None:
            raw_only.append(listed)
        else:
            taken.add(match)
            shared.append(listed)
    expanded_only = [listed for i, listed in enumerate(expanded) if i not in taken]
    low = int(ids[0])
    span = int(ids[-1]) - low + 1
    if span <= _TABLE_SPAN * count:
        offsets = ids - low
        shift, size = low, span
    else:  # ids spread thinly: count by position instead
        offsets, shift, size = None, 0, count
        shared, raw_only, expanded_only = (
            [np.searchsorted(ids, listed) for listed in lists]
            for lists in (shared, raw_only, expanded_only)
        )
    dtype = _count_dtype(max(len(raw), len(expanded)))
    expanded_counts = np.zeros(size, dtype=dtype)
    _count_into(expanded_counts, shared, shift)
    raw_counts = expanded_counts.copy()
    _count_into(raw_counts, raw_only, shift)
    _count_into(expanded_counts, expanded_only, shift)
    if offsets is not None:
        raw_counts, expanded_counts = raw_counts[offsets], expanded_counts[offsets]
    return raw_counts.astype(np.int64), expanded_counts.astype(np.int64)


def _count_dtype(lists: int) -> type[np.integer[Any]]:
    """The narrowest counter that holds ``lists`` (each list adds at most one per entry)."""
    if lists < 255:
        return np.uint8
    if lists < 65_535:
        return np.uint16
    return np.int64


def _count_into(counts: np.ndarray, lists: list[np.ndarray], shift: int) -> None:
    """Add one to ``counts`` at each id of each list (less ``shift``). The ids of one list are
    distinct (a posting list names an entry once), so each list is set in a mask and the mask
    added: a scatter and a sequential add per list, several times faster than ``bincount``
    over the lists concatenated."""
    if not lists:
        return
    mask = np.zeros(len(counts), dtype=bool)
    for listed in lists:
        if len(listed) == 0:
            continue
        at = listed - shift if shift else listed
        mask[at] = True
        counts += mask
        mask.fill(False)


def _shape(listed: np.ndarray) -> tuple[int, int, int]:
    if len(listed) == 0:
        return (0, 0, 0)
    return (len(listed), int(listed[0]), int(listed[-1]))


# The branches an answer names in ``found_by``, in the order their rank columns are fused: the
# raw and the expanded tokens, then the vector branch (its votes repeat its column).
BRANCHES = ("raw", "expanded", "vector")


def found_by(item_ranks: Sequence[int]) -> tuple[str, ...]:
    """The branches that rank an item, from its rank in each fused column (0: not ranked); the
    vector branch's repeated columns are named once."""
    return tuple(
        dict.fromkeys(
            BRANCHES[min(i, len(BRANCHES) - 1)] for i, rank in enumerate(item_ranks) if rank
        )
    )


def branch_order(
    hits: np.ndarray, query_size: int, sizes: np.ndarray, order: np.ndarray, among: np.ndarray
) -> np.ndarray:
    """Positions of the ``among`` entries sharing a token with the query (``hits`` > 0), by
    Jaccard descending, then by ``order`` (the item ids' order)."""
    positions = np.nonzero(among & (hits > 0))[0]
    if len(positions) == 0:
        return positions
    common = hits[positions]
    union = query_size + sizes[positions].astype(np.int64) - common
    ordered: np.ndarray = positions[jaccard_order(common, union, order[positions].astype(np.int64))]
    return ordered


def ranks(branch: np.ndarray, admitted: np.ndarray) -> np.ndarray:
    """Per entry, its rank (from 1) among the admitted entries of ``branch``; 0 when absent."""
    kept = branch[admitted[branch]]
    rank = np.zeros(len(admitted), dtype=np.int64)
    rank[kept] = np.arange(1, len(kept) + 1)
    return rank


def fused_order(
    positions: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    order: np.ndarray,
    k: int,
    *more: np.ndarray,
) -> np.ndarray:
    """``positions`` by Σ 1/(k + rank) over the branches that rank them (``first``, ``second``
    and any ``more``: the vector branch), descending, ties by ``order``: exactly."""
    if len(positions) == 0:
        return positions
    branches = (first, second, *more)
    top = k + int(max(branch[positions].max() for branch in branches))
    # The denominator is a product of one (k + rank) per branch: exact in a double (and its
    # float correctly rounded) while top ** branches stays below 2 ** 52.
    if top >= _EXACT_FLOAT or (len(branches) > 2 and top ** len(branches) >= 1 << 52):
        at = {int(order[p]): p for p in positions}
        exact = exact_order(
            (
                *rrf_fraction([r for r in (int(b[p]) for b in branches) if r], k),
                int(order[p]),
            )
            for p in positions
        )
        return np.array([at[tie] for tie in exact], dtype=positions.dtype)
    # As one fraction, added branch by branch: 1/a, then (a + b)/(a·b), …; its float is
    # correctly rounded.
    numerator, denominator = rrf_fractions([branch[positions] for branch in branches], k)
    value = numerator / denominator
    ties = order[positions]
    by_float = np.lexsort((ties, -value))
    ordered = positions[by_float]
    same = np.nonzero(value[by_float][1:] == value[by_float][:-1])[0]
    if len(same) == 0:
        return ordered
    n, d = numerator[by_float], denominator[by_float]
    if top < _EXACT_INT64 and len(branches) == 2:
        unequal = same[n[same + 1] * d[same] != n[same] * d[same + 1]]
    else:
        unequal = np.array(
            [i for i in same if int(n[i + 1]) * int(d[i]) != int(n[i]) * int(d[i + 1])],
            dtype=np.int64,
        )
    if len(unequal) == 0:
        return ordered  # equal floats are equal scores here: ``order`` already breaks the ties
    # Distinct scores that round to one float (rare): order each such run exactly.
    floats, tied = value[by_float], ties[by_float]
    result = ordered.copy()
    done: set[int] = set()
    for i in unequal.tolist():
        start = i
        while start > 0 and floats[start - 1] == floats[i]:
            start -= 1
        if start in done:
            continue
        done.add(start)
        end = i + 1
        while end < len(floats) and floats[end] == floats[i]:
            end += 1
        at = {int(tied[j]): j for j in range(start, end)}
        exact = exact_order((int(n[j]), int(d[j]), int(tied[j])) for j in range(start, end))
        result[start:end] = ordered[[at[tie] for tie in exact]]
    return result


# Below this union size the double common/union orders the Jaccard ratios exactly.
EXACT_RATIO_BOUND = 2**26


def jaccard_order(common: np.ndarray, union: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The permutation ordering entries by common/union descending, then by ``order``: exactly.

    The distinct (common, union) pairs are few; they are ranked exactly in Python (equal ratios
    share a rank), and each entry sorts by the integer key (rank, order).
    """
    if len(common) == 0:
        return np.zeros(0, dtype=np.int64)
    if int(union.max()) < EXACT_RATIO_BOUND:
        # 0 < common <= union < 2**26: two different ratios a/b != c/d differ by at least
        # 1/(b*d) > 2**-52, while each correctly rounded quotient (at most 1) is off by at most
        # 2**-54; so the doubles order exactly as the ratios and are equal exactly when they are.
        # Sorted by the double (ties in any order), then by (run of equal ratios, order): two
        # quicksorts cost less than one lexsort. ``order`` is unique per entry (a rank), so the
        # integer keys are unique and no stable sort is needed.
        ratio = common / union
        by_ratio = np.argsort(-ratio)
        ordered = ratio[by_ratio]
        runs = np.zeros(len(ordered), dtype=np.int64)
        np.cumsum(ordered[1:] != ordered[:-1], out=runs[1:])
        key = runs * (int(order.max()) + 1) + order[by_ratio]
        return by_ratio[np.argsort(key)]
    width = int(union.max()) + 1
    pairs, inverse = np.unique(common * width + union, return_inverse=True)
    ranked = exact_order((int(code) // width, int(code) % width, int(code)) for code in pairs)
    dense = np.zeros(len(pairs), dtype=np.int64)
    previous: tuple[int, int] | None = None
    rank = -1
    index = {int(code): i for i, code in enumerate(pairs)}
    for code in ranked:
        value = (code // width, code % width)
        if previous is None or value[0] * previous[1] != previous[0] * value[1]:
            rank += 1
        dense[index[code]] = rank
        previous = value
    key = dense[inverse.reshape(-1)] * (int(order.max()) + 1) + order
    return np.argsort(key, kind="stable")


def exact_head(
    rows: Sequence[tuple[int | None, ...]], limit: int, *, complete: bool
) -> list[int] | None:
    """The payloads of the first ``limit`` rows in exact order, or None if unsure.

    ``rows`` are ``(tie key, rank in each branch or None..., payload)`` (the raw and expanded
    branches, and the vector branch when it ran) ordered by the float of the fused score, then
    the tie key; ``complete`` says whether they are all the matched rows.
    Float rounding is monotone, so a row not given (float at most the last given one's) can
    only outrank a chosen row when the last given float equals the smallest chosen float.
    """
    values = {int(row[0] or 0): fused_value(row[1:-1]) for row in rows}
    payloads = {int(row[0] or 0): int(row[-1] or 0) for row in rows}
    chosen = exact_order((*values[key], key) for key in payloads)[:limit]
    if not complete and rows:
        last = values[int(rows[-1][0] or 0)]
        lowest = min(values[key][0] / values[key][1] for key in chosen)
        if not last[0] / last[1] < lowest:
            return None
    return [payloads[key] for key in chosen]


def fused_value(ranks: Sequence[int | None]) -> tuple[int, int]:
    return rrf_fraction([r for r in ranks if r])


def shares(inters: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Per entry, the larger share of the query's tokens it holds in the raw or expanded
    branch (what the lexical relevance curve reads)."""
    shares = np.zeros(len(inters[0]), dtype=np.float64)
    for inter, size in zip(inters, sizes, strict=True):
        if size:
            np.maximum(shares, inter / size, out=shares)
    return shares
