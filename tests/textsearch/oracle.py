"""Today's ranking, frozen: the oracle the engine's answers are compared with.

Copied unchanged from the code before ``textsearch`` (``knowledge/search.py``'s ranking over the
packed entries and its helpers, ``knowledge/domain.py``'s tokens and exact orders, and
``experience/retrieval/ranking.py``'s vector operations), so the property tests in this folder
hold the engine to the answers the two searches gave. Not imported by the project.
"""

# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cmp_to_key
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from semantic.branch import OFF, Branch, vector_branch
from semantic.branch import votes as vector_votes

RRF_K = 60
VECTOR_SPACE = "knowledge"
NEVER = np.iinfo(np.int64).max


# Han ideographs (unified, extension A-F, compatibility). Everything that is neither an ASCII
# letter/digit nor one of these separates tokens.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef\U0002f800-\U0002fa1f"
_TOKEN_RUN = re.compile(rf"[A-Za-z0-9]+|[{_CJK}]+")
_ASCII_RUN = re.compile(r"[A-Za-z0-9]+")


def tokenize(text: str) -> frozenset[str]:
    """Lower-cased ASCII letter/digit runs, and adjacent pairs inside each CJK run."""
    tokens: set[str] = set()
    for match in _TOKEN_RUN.finditer(text):
        run = match.group()
        if _ASCII_RUN.fullmatch(run):
            tokens.add(run.lower())
        elif len(run) == 1:
            tokens.add(run)
        else:
            tokens.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(tokens)


def expand(text: str, lexicon: Mapping[str, str]) -> str:
    """Rewrite every lexicon term to its canonical word in one left-to-right pass.

    Longer terms win over their prefixes, and a replacement is never rewritten again.
    ASCII terms match case-insensitively.
    """
    if not lexicon:
        return text
    folded = {term.lower(): canonical for term, canonical in lexicon.items() if term}
    pattern = _lexicon_pattern(tuple(sorted(folded, key=lambda t: (-len(t), t))))
    return pattern.sub(lambda m: folded[m.group().lower()], text)


_pattern_cache: dict[tuple[str, ...], re.Pattern[str]] = {}


def _lexicon_pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    pattern = _pattern_cache.get(terms)
    if pattern is None:
        if len(_pattern_cache) > 32:
            _pattern_cache.clear()
        pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
        _pattern_cache[terms] = pattern
    return pattern


# Ids that order ties: public ids, or their ranks in id order.
Key = TypeVar("Key", str, int)


def exact_order(scored: Iterable[tuple[int, int, Key]]) -> list[Key]:
    """Ids of ``(numerator, denominator, id)`` by n/d descending, ties by id: exactly, at any size.

    Python's int division is correctly rounded, and correctly rounded division is monotone:
    n1/d1 < n2/d2 implies float(n1/d1) <= float(n2/d2). Sorting by the float is therefore exact
    except inside a run of equal floats, which is re-sorted by integer cross-multiplication.
    No Fraction is built. Denominators must be positive.
    """
    items = sorted((-(n / d), doc_id, n, d) for n, d, doc_id in scored)
    ordered: list[Key] = []
    i, size = 0, len(items)
    while i < size:
        j = i + 1
        while j < size and items[j][0] == items[i][0]:
            j += 1
        if j - i == 1:
            ordered.append(items[i][1])
        else:
            run = sorted(items[i:j], key=cmp_to_key(_by_exact_value))
            ordered.extend(item[1] for item in run)
        i = j
    return ordered


def _by_exact_value(a: tuple[float, Key, int, int], b: tuple[float, Key, int, int]) -> int:
    left, right = b[2] * a[3], a[2] * b[3]  # b/bd vs a/ad, descending
    if left != right:
        return -1 if left < right else 1
    return -1 if a[1] < b[1] else (1 if a[1] > b[1] else 0)


def rank_branch(
    query: frozenset[str], documents: Iterable[tuple[str, Collection[str]]]
) -> list[str]:
    """Ids of documents with a positive Jaccard score, best first, ties by id.

    Each document's tokens must be distinct (stored token sets are). Ordered exactly
    (``exact_order``) as |A∩B| / (|A| + |B| − |A∩B|).
    """
    if not query:
        return []
    size = len(query)
    scored = []
    for doc_id, tokens in documents:
        inter = len(query.intersection(tokens))
        if inter:
            scored.append((inter, size + len(tokens) - inter, doc_id))
    return exact_order(scored)


def rrf_fraction(ranks: Iterable[int], k: int = RRF_K) -> tuple[int, int]:
    """Σ 1/(k + rank) as one integer fraction (numerator, denominator), not reduced."""
    numerator, denominator = 0, 1
    for rank in ranks:
        numerator, denominator = numerator * (k + rank) + denominator, denominator * (k + rank)
    return numerator, denominator


def rrf_fractions(ranks: Sequence[np.ndarray], k: int = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """``rrf_fraction`` of many items at once: per item (one column of every branch's ranks,
    0 where a branch does not rank it), Σ 1/(k + rank) as (numerator, denominator) arrays,
    int64, exact while the product of one (k + rank) per branch fits."""
    size = len(ranks[0]) if ranks else 0
    numerator = np.zeros(size, dtype=np.int64)
    denominator = np.ones(size, dtype=np.int64)
    for rank in ranks:
        has = rank > 0
        a = k + rank.astype(np.int64)
        numerator = np.where(has, numerator * a + denominator, numerator)
        denominator = np.where(has, denominator * a, denominator)
    return numerator, denominator


@dataclass(frozen=True)
class Ranked:
    """The first ``limit`` fused documents (their ids), how many matched, which of the chosen
    ones are in conflict, which branches found each (``BRANCHES``), and what the vector branch
    did (``semantic.branch`` statuses)."""

    chosen: list[int]
    matched: int
    conflicts: list[bool]
    versions: list[int] = field(default_factory=list)  # of the chosen, as the index holds them
    found_by: list[list[str]] = field(default_factory=list)
    semantic: str = OFF
    # Of the chosen: ``relevance`` and, where the vector branch scored it, ``similarity``.
    relevance: list[dict[str, float]] = field(default_factory=list)


# The branches a result names in ``found_by``, in this order.
RAW, EXPANDED, VECTOR = "raw", "expanded", "vector"

NOTHING = Ranked([], 0, [])


def _found_by(index: int, ranks: Sequence[np.ndarray]) -> list[str]:
    return [name for name, rank in zip((RAW, EXPANDED, VECTOR), ranks, strict=False) if rank[index]]


def _shares(inters: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Per entry, the larger share of the query's tokens it holds in the raw or expanded
    branch (what the lexical relevance curve reads)."""
    shares = np.zeros(len(inters[0]), dtype=np.float64)
    for inter, size in zip(inters, sizes, strict=True):
        if size:
            np.maximum(shares, inter / size, out=shares)
    return shares


def _described(vector: Branch, shares: np.ndarray, chosen: Sequence[int]) -> list[dict[str, float]]:
    return [vector.described(i, float(shares[i]) or None) for i in chosen]


def _ranked(
    read: _Read, raw_size: int, expanded_size: int, context: KnowledgeContext, query: str = ""
) -> Ranked:
    entries = read.entries
    count = len(entries)
    if count == 0:
        return NOTHING
    at = micros(context.occurred_at)
    known = micros(context.known_at)
    gated = (
        (entries["valid_from"] <= at)
        & (at < entries["valid_to"])
        & (entries["published_at"] <= known)
    )
    if read.multi_version:
        # Only the newest gated version of each doc_key goes on to ranking.
        index = np.nonzero(gated)[0]
        # ufunc.at takes its fast path only for native index and matching value types.
        groups = entries["group"][index].astype(np.intp)
        versions = entries["version"][index].astype(np.int64)
        newest = np.zeros(int(entries["group"].max()) + 1, dtype=np.int64)
        np.maximum.at(newest, groups, versions)
        gated[index[versions < newest[groups]]] = False
    order = entries["order"].astype(np.int64)
    ids = entries["id"]
    positions = _positions(ids)
    branches = []
    inters = []
    for lists, query_size, sizes in (
        (read.raw, raw_size, entries["raw_size"]),
        (read.expanded, expanded_size, entries["expanded_size"]),
    ):
        inter = _intersections(ids, positions, lists, count)
        inters.append(inter)
        candidates = np.nonzero(gated & (inter > 0))[0]
        common = inter[candidates]
        branches.append((candidates, common, query_size + sizes[candidates] - common))
    hits = []
    for candidates, _, _ in branches:
        hit = np.zeros(count, dtype=bool)
        hit[candidates] = True
        hits.append(hit)
    # The vector branch, over exactly the entries past the gate and the newest-version rule.
    vector = vector_branch(VECTOR_SPACE, read.scope_id, ids, gated, order, query)
    shares = _shares(inters, (raw_size, expanded_size))
    if vector.ranked:
        assert vector.ranks is not None
        hits.append(vector.ranks > 0)
    if max(len(c) for c, _, _ in branches) >= PARTIAL_FROM:
        partial = _partial_head(
            branches,
            order,
            count,
            context.limit,
            vector.ranks if vector.ranked else None,
            vector_votes(),
        )
        if partial is not None:
            picked_head, matched = partial
            return Ranked(
                chosen=[int(entries["document_id"][i]) for i in picked_head],
                matched=matched,
                conflicts=[_in_conflict(entries, gated, i) for i in picked_head],
                versions=[int(entries["version"][i]) for i in picked_head],
                found_by=[_found_by(i, hits) for i in picked_head],
                semantic=vector.status,
                relevance=_described(vector, shares, picked_head),
            )
    ranks = []
    for candidates, common, union in branches:
        by_rank = candidates[_jaccard_order(common, union, order[candidates])]
        rank = np.zeros(count, dtype=np.int64)
        rank[by_rank] = np.arange(1, len(by_rank) + 1)
        ranks.append(rank)
    if vector.ranked:
        assert vector.ranks is not None
        ranks.extend([vector.ranks] * vector_votes())
    fused = np.nonzero(np.logical_or.reduce([rank > 0 for rank in ranks]))[0]
    if len(fused) == 0:
        return Ranked([], 0, [], semantic=vector.status)
    # The fused score as one division (the fraction Σ 1/(k + rank), integers exact in a double
    # for the ranks a scope holds): correctly rounded, so ordered as the exact values, but for
    # runs of equal floats, which _exact_head orders exactly.
    numerator, denominator = rrf_fractions([rank[fused] for rank in ranks])
    value = numerator / denominator
    fetch = context.limit + 16
    while True:
        if fetch < len(fused):
            picked = np.argpartition(-value, fetch - 1)[:fetch]
            top, head_value = fused[picked], value[picked]
        else:
            top, head_value = fused, value
        by_float = top[np.lexsort((order[top], -head_value))]
        head = [
            (int(order[i]), *(int(rank[i]) or None for rank in ranks), int(i)) for i in by_float
        ]
        chosen = _exact_head(head, context.limit, complete=len(top) == len(fused))
        if chosen is not None:
            break
        fetch *= 8
    return Ranked(
        chosen=[int(entries["document_id"][i]) for i in chosen],
        matched=len(fused),
        conflicts=[_in_conflict(entries, gated, i) for i in chosen],
        versions=[int(entries["version"][i]) for i in chosen],
        found_by=[_found_by(i, ranks) for i in chosen],
        semantic=vector.status,
        relevance=_described(vector, shares, chosen),
    )


# From this many candidates in a branch, the head is first sought from each branch's best
# (:func:`_partial_head`) rather than from both branches ranked whole.
PARTIAL_FROM = 2_048
# A head the bounds leave this many rows or more undecided is found by the full ranking.
MAX_CONTENDERS = 64


def _depth(limit: int) -> int:
    """How many of each branch's best are ranked: enough that an entry outside both (its fused
    score at most 2/(k+depth+1)) falls below the ``limit``-th of a branch's own first ``limit``
    (each at least 1/(k+limit)): depth > k + 2*limit - 1, with room to spare."""
    return 4 * (RRF_K + 2 * limit)


def _partial_head(
    branches: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    order: np.ndarray,
    count: int,
    limit: int,
    vector: np.ndarray | None = None,
    votes: int = 1,
) -> tuple[list[int], int] | None:
    """The first ``limit`` entries of the fused ranking, exactly as the full ranking orders
    them, and how many entries matched, from each branch's best only; None when the bounds do
    not decide the head (the caller then ranks every candidate).

    Each branch ranks exactly its candidates with a Jaccard ratio at least its ``depth``-th best
    (ties at that ratio included, so those ranks are the full ranking's); every other candidate
    of the branch ranks below them. An entry's fused score is then known, or known within the
    bound 1/(k+m+1) of the branch whose rank it lacks (m the ranks known there). The entries
    whose upper bound reaches the ``limit``-th best lower bound are the only ones that can be in
    the head; their missing ranks are counted exactly, and the head is ordered exactly by
    ``_exact_head`` over all of them.

    The vector branch's ranks (``vector``, counted ``votes`` times), when it ran, are known
    whole: an entry it ranks is a contender like one a lexical branch ranks, and an entry it
    does not rank gains nothing from it, so the bounds hold as they are.
    """
    depth = _depth(limit)
    known: list[np.ndarray] = []  # per branch: rank (1..m) of the entries ranked, else 0
    in_branch: list[np.ndarray] = []  # per branch: whether an entry is a candidate at all
    ratios: list[np.ndarray] = []  # per branch: each entry's ratio (0 when not a candidate)
    bounds: list[float] = []  # per branch: the most an unranked candidate adds
    for candidates, common, union in branches:
        member = np.zeros(count, dtype=bool)
        member[candidates] = True
        rank = np.zeros(count, dtype=np.int64)
        ratio = np.zeros(count, dtype=np.float64)
        if len(candidates):
            if int(union.max()) >= EXACT_RATIO_BOUND:
                return None
            values = common / union
            ratio[candidates] = values
            if len(candidates) > depth:
                threshold = -np.partition(-values, depth - 1)[depth - 1]
                best = values >= threshold
                if np.count_nonzero(best) > 4 * depth:
                    return None  # a tie of many at the boundary: rank them all instead
            else:
                best = np.ones(len(candidates), dtype=bool)
            ranked = candidates[best][
                _jaccard_order(common[best], union[best], order[candidates[best]])
            ]
            rank[ranked] = np.arange(1, len(ranked) + 1)
            unranked = len(candidates) - len(ranked)
        else:
            unranked = 0
        known.append(rank)
        in_branch.append(member)
        ratios.append(ratio)
        bounds.append(1.0 / (RRF_K + int(rank.max()) + 1) if unranked else 0.0)
    by_vector = vector if vector is not None else np.zeros(count, dtype=np.int64)
    matched = int(np.count_nonzero(in_branch[0] | in_branch[1] | (by_vector > 0)))
    ranked_any = np.nonzero((known[0] > 0) | (known[1] > 0) | (by_vector > 0))[0]
    lower = np.zeros(len(ranked_any), dtype=np.float64)
    upper = np.zeros(len(ranked_any), dtype=np.float64)
    r = by_vector[ranked_any]
    lower += np.where(r > 0, votes / (RRF_K + np.maximum(r, 1)), 0.0)
    upper += lower
    for rank, member, bound in zip(known, in_branch, bounds, strict=True):
        r = rank[ranked_any]
        part = np.where(r > 0, 1.0 / (RRF_K + np.maximum(r, 1)), 0.0)
        lower += part
        upper += part + np.where((r == 0) & member[ranked_any], bound, 0.0)
    if len(ranked_any) < limit:
        return None
    # Floats with a margin far above their rounding, in the direction that keeps more rows.
    floor = float(-np.partition(-lower, limit - 1)[limit - 1]) * (1 - 1e-9)
    if not sum(bounds) < floor:
        return None
    contenders = ranked_any[upper >= floor]
    if len(contenders) > MAX_CONTENDERS:
        return None
    rows = []
    for index in (int(i) for i in contenders):
        ranks: list[int | None] = []
        for rank, member, ratio in zip(known, in_branch, ratios, strict=True):
            if rank[index] > 0:
                ranks.append(int(rank[index]))
            elif member[index]:
                ranks.append(_rank_of(index, ratio, member, order))
            else:
                ranks.append(None)
        ranks.extend([int(by_vector[index]) or None] * (votes if vector is not None else 0))
        rows.append((int(order[index]), *ranks, index))
    head = _exact_head(rows, limit, complete=True)
    return (head, matched) if head is not None else None


def _rank_of(index: int, ratio: np.ndarray, member: np.ndarray, order: np.ndarray) -> int:
    """The rank of candidate ``index`` in its branch's full ranking (ratio descending, then
    ``order``): the candidates before it, plus one."""
    better = (ratio > ratio[index]) | ((ratio == ratio[index]) & (order < order[index]))
    return int(np.count_nonzero(better & member)) + 1


def _in_conflict(entries: np.ndarray, gated: np.ndarray, index: int) -> bool:
    """Whether the gated members of this entry's rule group (newest versions of different
    documents) hold more than one set of requirements. ``contested`` (kept at write time)
    says whether the group can disagree at all."""
    if not entries["contested"][index]:
        return False
    members = gated & (entries["rule"] == entries["rule"][index])
    return len(np.unique(entries["requirements"][members])) > 1


def _positions(ids: np.ndarray) -> np.ndarray:
    """A table from entry id (less the scope's smallest) to the entry's position in the array."""
    if len(ids) == 0:
        return np.zeros(1, dtype=np.int64)
    table = np.zeros(int(ids[-1] - ids[0]) + 1, dtype=np.int64)
    table[ids - ids[0]] = np.arange(len(ids))
    return table


def _intersections(
    ids: np.ndarray, positions: np.ndarray, lists: list[np.ndarray], count: int
) -> np.ndarray:
    """|query ∩ document| per entry: how many of the query's posting lists hold each entry.

    Posting lists and the scope array come from one statement, so every listed id is an entry.
    """
    if not lists or count == 0:
        return np.zeros(count, dtype=np.int64)
    listed = np.concatenate(lists)
    return np.bincount(positions[listed - ids[0]], minlength=count).astype(np.int64)


# Below this union size the double common/union orders the Jaccard ratios exactly.
EXACT_RATIO_BOUND = 2**26


def _jaccard_order(common: np.ndarray, union: np.ndarray, order: np.ndarray) -> np.ndarray:
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


def _exact_head(
    rows: Sequence[tuple[int | None, ...]], limit: int, *, complete: bool
) -> list[int] | None:
    """The payloads of the first ``limit`` rows in exact order, or None if unsure.

    ``rows`` are ``(tie key, rank in each branch or None..., payload)`` (the raw and expanded
    branches, and the vector branch when it ran) ordered by the float of the fused score, then
    the tie key; ``complete`` says whether they are all the matched rows.
    Float rounding is monotone, so a row not given (float at most the last given one's) can
    only outrank a chosen row when the last given float equals the smallest chosen float.
    """
    values = {int(row[0] or 0): _fused_value(row[1:-1]) for row in rows}
    payloads = {int(row[0] or 0): int(row[-1] or 0) for row in rows}
    chosen = exact_order((*values[key], key) for key in payloads)[:limit]
    if not complete and rows:
        last = values[int(rows[-1][0] or 0)]
        lowest = min(values[key][0] / values[key][1] for key in chosen)
        if not last[0] / last[1] < lowest:
            return None
    return [payloads[key] for key in chosen]


def _fused_value(ranks: Sequence[int | None]) -> tuple[int, int]:
    return rrf_fraction([r for r in ranks if r])


# A position table is built when a scope's entry ids span at most this many times their count
# (else the ids are searched).
_TABLE_SPAN = 64
# Below this (k + rank), a fused score's numerator and denominator are exact in a double, so
# its float is correctly rounded (and floats order as the scores, but for equal floats).
_EXACT_FLOAT = 1 << 26
# Below this, the cross-multiplication of two fused scores fits an int64.
_EXACT_INT64 = 1 << 20


def intersections(ids: np.ndarray, lists: list[np.ndarray]) -> np.ndarray | None:
    """|query ∩ item| per entry of ``ids`` (sorted): how many of the query's posting lists hold
    each. None when a list names an entry ``ids`` does not hold (the array and the lists
    disagree: the caller does not trust them)."""
    count = len(ids)
    if not lists:
        return np.zeros(count, dtype=np.int64)
    listed = np.concatenate(lists)
    if count == 0:
        return None if len(listed) else np.zeros(0, dtype=np.int64)
    low, span = int(ids[0]), int(ids[-1]) - int(ids[0]) + 1
    if span <= _TABLE_SPAN * count:
        # A table from entry id to position (ids of one scope are spread thinly enough).
        table = np.full(span, -1, dtype=np.int64)
        table[ids - low] = np.arange(count)
        inside = (listed >= low) & (listed < low + span)
        if not inside.all():
            return None
        at = table[listed - low]
        if (at < 0).any():
            return None
    else:
        at = np.searchsorted(ids, listed)
        if (at >= count).any() or (ids[np.minimum(at, count - 1)] != listed).any():
            return None
    return np.bincount(at, minlength=count).astype(np.int64)


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
    width = int(union.max()) + 1
    pairs, inverse = np.unique(common * width + union, return_inverse=True)
    ranked = exact_order((int(code) // width, int(code) % width, int(code)) for code in pairs)
    dense = np.zeros(len(pairs), dtype=np.int64)
    where = {int(code): i for i, code in enumerate(pairs)}
    previous: tuple[int, int] | None = None
    rank = -1
    for code in ranked:
        value = (code // width, code % width)
        if previous is None or value[0] * previous[1] != previous[0] * value[1]:
            rank += 1
        dense[where[code]] = rank
        previous = value
    ties = order[positions].astype(np.int64)
    key = dense[inverse.reshape(-1)] * (int(ties.max()) + 1) + ties
    return positions[np.argsort(key, kind="stable")]


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


def gate(entries: np.ndarray, at: int, known: int, multi_version: bool) -> np.ndarray:
    """The gate of knowledge's ``_ranked`` before the engine (with the newest-version rule)."""
    gated = (
        (entries["valid_from"] <= at)
        & (at < entries["valid_to"])
        & (entries["published_at"] <= known)
    )
    if multi_version:
        index = np.nonzero(gated)[0]
        groups = entries["group"][index].astype(np.intp)
        versions = entries["version"][index].astype(np.int64)
        newest = np.zeros(int(entries["group"].max()) + 1, dtype=np.int64)
        np.maximum.at(newest, groups, versions)
        gated[index[versions < newest[groups]]] = False
    return gated


def admits(doc: Any, scope: Any) -> bool:
    """knowledge.domain.admits before the engine."""
    return (
        doc.tenant == scope.tenant
        and doc.brand == scope.brand
        and scope.store in doc.stores
        and doc.campaign == scope.campaign
        and doc.approved
        and not doc.revoked
        and doc.valid_from <= scope.occurred_at
        and (doc.valid_to is None or scope.occurred_at < doc.valid_to)
        and doc.published_at <= scope.known_at
    )


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime | None) -> int:
    if moment is None:
        return int(NEVER)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
