"""Exact lexical ranking over a scope's packed entries, as vector operations (numpy).

Orders items exactly as ``textsearch.domain`` does for texts (the vector operations are the
engine's, ``textsearch.ranking``): each branch (raw and expanded tokens)
by Jaccard |q ∩ d| / |q ∪ d| descending (``rank_branch``), the branches fused by reciprocal rank
fusion, Σ 1/(k + rank) descending (``reciprocal_rank_fusion``), ties by item id. No fraction is
built per item: the few distinct (intersection, union) pairs of a branch are ordered exactly in
Python, and fused scores are sorted as floats (correctly rounded, so monotone) with any run of
equal floats checked by integer cross-multiplication.

An item's rank counts only the *admitted* items before it, and whether a skill or a lesson is
admitted takes reads (its cited cases; a lesson's confidence against the threshold). So
:class:`Ranking` asks ``decide`` only about the items that can reach the head it is asked for:
the first ``k + 2n`` admitted items of each branch (an item ranked below that in both branches
scores at most 2/(k + k + 2n + 1) < 1/(k + n), the least of the first n of a branch, so it
cannot be among the first n), and whatever precedes those in either branch (their ranks).

The order an answer returns (``fused_score``) fuses that relevance with each item's confidence
and how well the request names its declared scene; ``experience.retrieval.order`` reads the
relevance order only as deep as that order needs.

Pure: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from textsearch.domain import RRF_K, rrf_fraction
from textsearch.ranking import branch_order as branch_order
from textsearch.ranking import fused_order as fused_order
from textsearch.ranking import intersections as intersections
from textsearch.ranking import ranks as ranks

Decide = Callable[[np.ndarray], np.ndarray]


class Ranking:
    """The fused ranking of a scope's candidates, worked out only as deep as it is asked.

    ``candidates``: entries past the gate that share a token with the query; ``known``: those
    admitted without asking (cases); ``decide(positions)`` says which of the other candidates
    at ``positions`` are admitted (called only once per entry, with every entry it is asked
    about in one call, so it can read them together).
    """

    def __init__(
        self,
        *,
        raw_hits: np.ndarray,
        expanded_hits: np.ndarray,
        raw_size: int,
        expanded_size: int,
        raw_sizes: np.ndarray,
        expanded_sizes: np.ndarray,
        order: np.ndarray,
        candidates: np.ndarray,
        known: np.ndarray,
        decide: Decide,
        k: int = RRF_K,
        vector: np.ndarray | None = None,
        votes: int = 1,
        lessons: np.ndarray | None = None,
    ) -> None:
        self._order = order.astype(np.int64)
        # How many candidates are lessons (the one kind that declares a scene).
        self._lessons_among = int((lessons & candidates).sum()) if lessons is not None else 0
        self._branches: tuple[np.ndarray, ...] = (
            branch_order(raw_hits, raw_size, raw_sizes, self._order, candidates),
            branch_order(expanded_hits, expanded_size, expanded_sizes, self._order, candidates),
        )
        if vector is not None:
            # The vector branch: its ranks (from 1, 0 = not ranked) over the gated entries.
            ranked = np.nonzero(candidates & (vector > 0))[0]
            # Counted ``votes`` times in the fused sum (one branch object, repeated).
            self._branches += (ranked[np.argsort(vector[ranked], kind="stable")],) * votes
        self._candidates = candidates
        self._admitted = candidates & known
        self._decided = known | ~candidates
        self._decide = decide
        self._k = k

    def leading(self, n: int) -> np.ndarray:
        """The first ``n`` of the fused ranking were every candidate admitted: where the head
        almost always is, known before anything is decided (for a caller that reads ahead)."""
        return self._fused(self._candidates, n)

    def _bound(self, n: int) -> int:
        """How deep each branch must be known for the first ``n``: an item ranked below
        ``bound`` in all m branches scores at most m/(k + bound + 1), below 1/(k + n), the least
        of the first n of one branch, when bound >= (m - 1)·k + m·n."""
        m = len(self._branches)
        return (m - 1) * self._k + m * n

    def ranks_at(self, positions: Sequence[int]) -> list[tuple[int, ...]]:
        """Per entry at ``positions``, its rank (from 1; 0 = not ranked) in each branch among
        the admitted entries: exact for the entries :meth:`head` returned (everything before
        them is decided). A rank above 0 also says the branch holds the entry."""
        if not positions:
            return []
        at = np.asarray(positions, dtype=np.int64)
        columns = [ranks(branch, self._admitted)[at] for branch in self._branches]
        return [tuple(int(c[i]) for c in columns) for i in range(len(at))]

    @property
    def lesson_candidates(self) -> int:
        return self._lessons_among

    def head(self, n: int) -> np.ndarray:
        """Positions of the first ``n`` admitted candidates of the fused ranking, in order."""
        bound = self._bound(n)
        while not self._decided.all():
            # Every entry that could rank within ``bound`` in a branch (undecided ones counted
            # as admitted), and whatever precedes those in either branch (their ranks there),
            # decided together; again when refusals moved the bound deeper.
            reach = np.concatenate(
                [branch[: self._holding(branch, bound)] for branch in self._branches]
            )
            before = [branch[: _last_of(branch, reach)] for branch in self._branches]
            pending = np.unique(np.concatenate(before))
            pending = pending[~self._decided[pending]]
            if len(pending) == 0:
                break
            self._admitted[pending] = np.asarray(self._decide(pending), dtype=bool)
            self._decided[pending] = True
        return self._fused(self._admitted, n)

    def _fused(self, admitted: np.ndarray, n: int) -> np.ndarray:
        """The first ``n`` of the fusion of the ``admitted`` entries (each branch decided as
        deep as :meth:`head` makes sure of)."""
        bound = self._bound(n)
        first, second, *more = (ranks(branch, admitted) for branch in self._branches)
        near = np.zeros(len(admitted), dtype=bool)
        for rank in (first, second, *more):
            near |= (rank > 0) & (rank <= bound)
        contenders = np.nonzero(near)[0]
        return fused_order(contenders, first, second, self._order, self._k, *more)[:n]

    def _holding(self, branch: np.ndarray, count: int) -> int:
        """The length of the shortest prefix of ``branch`` holding ``count`` entries that are
        admitted or not yet decided (the whole branch when it holds fewer)."""
        maybe = np.cumsum(self._admitted[branch] | ~self._decided[branch])
        return min(len(branch), int(np.searchsorted(maybe, count)) + 1)


def _last_of(branch: np.ndarray, entries: np.ndarray) -> int:
    """The length of the shortest prefix of ``branch`` holding every one of ``entries`` it
    holds."""
    inside = np.nonzero(np.isin(branch, entries))[0]
    return int(inside[-1]) + 1 if len(inside) else 0


# --- the order of an answer: relevance fused with confidence and scene match ---------------------

# An item's confidence weighs its relevance from CONFIDENCE_FLOOR (confidence 0) to 1 (confidence
# 1), linearly: enough that 0.75 one place behind 0.667 in both branches comes first (3.75/3.667
# against 62/61). A request that names the whole of an item's declared scene lifts it by
# SCENE_LIFT, one that names part of it by that share: about four places near the top, as much
# as a quarter more confidence. The largest weight over the smallest, (1 + SCENE_LIFT) /
# CONFIDENCE_FLOOR = 17/12, stays below 2: an item whose relevance is twice another's (found by
# two branches against one, at the same ranks) always comes first.
CONFIDENCE_FLOOR = Fraction(3, 4)
SCENE_LIFT = Fraction(1, 16)
# Confidence is shown, and fused, at three places.
CONFIDENCE_PLACES = 1000
# The weight of a fresh case of one incident (confidence 1/2): what the first read assumes the
# items asked for weigh, to read deep enough at once in the common case.
TYPICAL_WEIGHT = CONFIDENCE_FLOOR + (1 - CONFIDENCE_FLOOR) / 2
# What the first guess at the n-th score of an answer assumes the items read weigh: a little
# below a fresh case's, as a case a few weeks old weighs. Only which items are scored depends on
# it (an item is scored when its relevance times its largest weight reaches the guess), never
# the order: a guess too low scores a few items for nothing, one too high a second batch.
LIKELY_WEIGHT = CONFIDENCE_FLOOR + (1 - CONFIDENCE_FLOOR) * Fraction(9, 20)


def relevance(item_ranks: Sequence[int], k: int = RRF_K) -> Fraction:
    """The fused relevance of one item: Σ 1/(k + rank) over the branches that rank it."""
    numerator, denominator = rrf_fraction([rank for rank in item_ranks if rank], k)
    return Fraction(numerator, denominator)


def confidence_weight(confidence: float | None) -> Fraction:
    """From CONFIDENCE_FLOOR at confidence 0 (or none) to 1 at confidence 1, linearly; the
    confidence as shown (three places), so the weight is exact."""
    if confidence is None:
        return CONFIDENCE_FLOOR
    shown = Fraction(round(confidence * CONFIDENCE_PLACES), CONFIDENCE_PLACES)
    shown = min(max(shown, Fraction(0)), Fraction(1))
    return CONFIDENCE_FLOOR + (1 - CONFIDENCE_FLOOR) * shown


def scene_share(scene: frozenset[str], query: frozenset[str]) -> Fraction:
    """How much of an item's declared scene (the tokens of its scene tags) the request names:
    0 for an item that declares none."""
    if not scene:
        return Fraction(0)
    return Fraction(len(scene & query), len(scene))


def scene_weight(share: Fraction) -> Fraction:
    return 1 + SCENE_LIFT * share


def fused_score(item_ranks: Sequence[int], confidence: float | None, share: Fraction) -> Fraction:
    """relevance × confidence weight × scene weight, exactly (one fraction of integers, built
    once: this runs for every item an answer reads)."""
    numerator, denominator = rrf_fraction([rank for rank in item_ranks if rank], RRF_K)
    shown = 0 if confidence is None else round(confidence * CONFIDENCE_PLACES)
    shown = min(max(shown, 0), CONFIDENCE_PLACES)
    # confidence_weight = (floor.n · places + (floor.d - floor.n) · shown) / (floor.d · places)
    floor_n, floor_d = CONFIDENCE_FLOOR.numerator, CONFIDENCE_FLOOR.denominator
    weight_n = floor_n * CONFIDENCE_PLACES + (floor_d - floor_n) * shown
    weight_d = floor_d * CONFIDENCE_PLACES
    # scene_weight = 1 + lift · share = (lift.d · share.d + lift.n · share.n) / (lift.d · share.d)
    lift_n, lift_d = SCENE_LIFT.numerator, SCENE_LIFT.denominator
    scene_n = lift_d * share.denominator + lift_n * share.numerator
    scene_d = lift_d * share.denominator
    return Fraction(numerator * weight_n * scene_n, denominator * weight_d * scene_d)


def most_weight(scenes: bool) -> Fraction:
    """The largest weight an item not yet scored may carry: confidence 1, and the whole scene
    named when any candidate may declare one (``scenes``)."""
    return scene_weight(Fraction(1)) if scenes else Fraction(1)


def first_depth(n: int, scenes: bool = True, k: int = RRF_K) -> int:
    """How deep to read the relevance order first for the best ``n``: deep enough that an
    unread item could not pass the n-th had the first ``n`` the typical weight and the rest the
    largest (with a scene named only when a lesson is among the candidates, ``scenes``;
    relevance ~ 1/(k + rank) near the top of every branch alike)."""
    ratio = most_weight(scenes) / TYPICAL_WEIGHT
    return max(n, math.ceil((k + n) * ratio) - k)


def best_first(scored: Sequence[tuple[Fraction, str]]) -> list[int]:
    """Indexes of ``(score, id)`` pairs, score descending, ties by id.

    Sorted by each score's float (correctly rounded, so floats order as the scores but for
    equal floats), then each run of equal floats exactly: fractions compare only there."""
    floats = [float(score) for score, _id in scored]
    by_float = sorted(range(len(scored)), key=lambda i: (-floats[i], scored[i][1]))
    start = 0
    while start < len(by_float):
        end = start + 1
        while end < len(by_float) and floats[by_float[end]] == floats[by_float[start]]:
            end += 1
        if end - start > 1:
            # Already by id within the run; the sort is stable.
            by_float[start:end] = sorted(
                by_float[start:end], key=lambda i: scored[i][0], reverse=True
            )
        start = end
    return by_float
