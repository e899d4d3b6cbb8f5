"""The order of an answer: relevance fused with confidence and scene match, best first.

The pipeline ranks a scope's candidates by relevance (``experience.retrieval.ranking``: the
Jaccard branches, and the vector branch when it runs, fused by RRF). What ``retrieve_experience``
returns and the context block lists is ordered by the fused score instead
(``ranking.fused_score``)::

    score = relevance × (3/4 + 1/4 · confidence) × (1 + 1/16 · scene share)

* *relevance*: Σ 1/(60 + rank) over the branches that rank the item (ranks among the admitted
  items, as the relevance order counts them);
* *confidence*: the item's confidence as the answer shows it (three places: the Wilson lower
  bound over its distinct incidents and counted outcomes, decayed since last confirmed);
* *scene share*: the share of the item's declared scene (the tokens of a lesson's scene tags)
  that the request's words name; 0 for cases and skills, which declare none. Every returned item
  is of exactly the request's scope (the gate), so the scope itself cannot tell items apart.

Ties by item id. Exact: every factor is a fraction of integers.

The relevance order is read only as deep as the answer needs, and only the items that can
still reach the head get a confidence (:class:`BestFirst`): how deep is worked out from the
branch ranks alone, against a guess at the n-th score (the n-th best relevance times
``ranking.LIKELY_WEIGHT``); an item is scored only when its relevance times the largest weight it
may carry reaches that guess, or the n-th score found when that is lower (a lesson: its known
confidence, the whole scene named; a case without counted outcomes: the Wilson bound of its one
incident; else confidence 1). The answer stands once the n-th score is above the relevance of
the first item not ranked yet times the largest weight any candidate may carry; else the ranks
are read twice as deep. What is read and scored depends on the guess; the order never does.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from experience.core.models import ItemType
from experience.lessons import domain as ld
from experience.lessons.models import Lesson
from experience.lessons.selectors import confidence_settings
from experience.retrieval import ranking
from experience.retrieval.pipeline import Hit, Ranked
from experience.retrieval.recall import with_confidence
from textsearch.domain import RRF_K, ParsedQuery, tokenize


@dataclass(frozen=True)
class Scored:
    """A hit with its answer item (``confidence`` and the rest) and its fused score."""

    hit: Hit
    item: dict[str, Any]
    score: Fraction


class BestFirst:
    """The items of one ranking in the order of their fused score, asked for as deep as needed;
    each item is scored once (its confidence with ``explain`` as ``with_confidence`` takes it)."""

    def __init__(
        self, ranked: Ranked, now: datetime, query: str | ParsedQuery, *, explain: bool
    ) -> None:
        self._ranked = ranked
        self._now = now
        # The request's words (what a lesson's scene is matched against): the parsed query's.
        self._query = query.raw if isinstance(query, ParsedQuery) else tokenize(query)
        self._explain = explain
        self._scored: dict[str, Scored] = {}
        self._depth = 0
        self._guess: float | None = None

    def head(self, n: int) -> list[Scored]:
        """The first ``n`` items by fused score (fewer when fewer are found)."""
        if n <= 0:
            return []
        depth = max(self._depth, ranking.first_depth(n, self._ranked.lesson_candidates > 0))
        depth = self._deep_enough(n, depth)
        # What the n-th score will at least be: first the guess, then the n-th score found. As
        # a float: it only says which items to score (with a margin for rounding, below).
        least = self._guess
        # The largest weight of any candidate (a scene only when a lesson is among them).
        bound = ranking.most_weight(self._ranked.lesson_candidates > 0)
        while True:
            ranks = self._ranked.ranks(depth + 1)
            self._depth = max(self._depth, depth)
            complete = len(ranks) <= depth  # every candidate is ranked
            ranked = ranks if complete else ranks[:depth]
            # Only the items that could reach ``least`` are read and scored: a prefix of the
            # relevance order. Then the n-th score found asks for the rest that could reach it
            # (when the guess was too high).
            read = self._ranked.head(_reaching(ranked, least, float(bound)))
            top = self._top(read, n, least)
            if len(top) == n and (least is None or float(top[-1].score) < least):
                least = float(top[-1].score)
                read = self._ranked.head(_reaching(ranked, least, float(bound)))
                top = self._top(read, n, least)
            if len(top) == n:
                least = float(top[-1].score)
            if complete:
                return top
            # Anything not ranked yet ranks no higher than the last one ranked, and weighs no
            # more than the bound: it cannot pass the n-th score when that is above the two
            # multiplied.
            unread = ranking.relevance(ranks[depth]) * bound
            if len(top) == n and top[-1].score > unread:
                return top
            depth *= 2

    def _deep_enough(self, n: int, depth: int) -> int:
        """How deep to read first: deeper than ``depth`` (doubled) while an unread item could
        pass the guess at the n-th score, the n-th best had every item read the likely weight
        (only the relevance order is read for that, not the items; the guess is kept)."""
        most = _MOST if self._ranked.lesson_candidates > 0 else 1.0
        while True:
            ranks = self._ranked.ranks(depth + 1)
            self._guess = _nth_best([_relevance(one) * _LIKELY for one in ranks[:depth]], n)
            if len(ranks) <= depth:
                return depth
            unread = _relevance(ranks[depth]) * most
            if self._guess is not None and unread < self._guess:
                return depth
            depth *= 2

    def _top(self, read: list[Hit], n: int, least: float | None) -> list[Scored]:
        """The best ``n`` of ``read`` once every item of it that could score ``least`` or more
        is scored (each at most its relevance times the largest weight of its kind); the items
        left unscored score less than ``least``."""
        if least is None:
            self._score(read)
        else:
            # Skipped only when below by more than a float's rounding can account for.
            floor = least * _MARGIN
            within = [
                hit
                for hit in read
                if hit.item_id not in self._scored
                and _relevance(hit.ranks) * self._most(hit) >= floor
            ]
            # A case without counted outcomes weighs at most what its one incident allows; its
            # outcomes are read with the others' (one statement), its confidence only if it
            # can still reach ``least``.
            voted = self._ranked.outcomes.tallies(
                hit.item_id for hit in within if hit.kind == ItemType.CASE
            )
            cap = _case_cap()
            self._score(
                [
                    hit
                    for hit in within
                    if hit.kind != ItemType.CASE
                    or hit.item_id in voted
                    or _relevance(hit.ranks) * cap >= floor
                ]
            )
        scored = [self._scored[hit.item_id] for hit in read if hit.item_id in self._scored]
        order = ranking.best_first([(one.score, one.hit.item_id) for one in scored])
        return [scored[i] for i in order[:n]]

    def _most(self, hit: Hit) -> float:
        """The largest weight ``hit`` may carry: confidence 1 (a lesson: its confidence, known
        once the ranking admitted it), and its whole scene named (a lesson; cases and skills
        declare none)."""
        if hit.kind != ItemType.LESSON:
            return 1.0
        lesson = self._ranked.lessons.get(hit.item_id)
        if lesson is None:
            return _MOST
        return float(ranking.confidence_weight(lesson.confidence.value)) * _MOST

    def _score(self, hits: list[Hit]) -> None:
        new = [hit for hit in hits if hit.item_id not in self._scored]
        if not new:
            return
        cases = {
            hit.item_id: hit.entry.gate_times()
            for hit in new
            if hit.kind == ItemType.CASE and hit.entry is not None
        }
        items = with_confidence(
            [_item(hit) for hit in new],
            self._ranked.lessons,
            self._now,
            self._ranked.outcomes,
            cases,
            explain=self._explain,
            skill_evidence=self._ranked.skill_evidence,
        )
        scenes = scene_tokens(hit.item_id for hit in new if hit.kind == ItemType.LESSON)
        for hit, item in zip(new, items, strict=True):
            share = ranking.scene_share(scenes.get(hit.item_id, frozenset()), self._query)
            score = ranking.fused_score(hit.ranks, item["confidence"], share)
            self._scored[hit.item_id] = Scored(hit, item, score)


# Which items are scored is worked out in floats (the order itself, in fractions): a bound
# below the n-th score by more than this relative margin is below it exactly (a double's
# rounding of these few sums and products errs by far less).
_MARGIN = 1 - 2.0**-30
_LIKELY = float(ranking.LIKELY_WEIGHT)
_MOST = float(ranking.most_weight(True))


def _relevance(ranks: tuple[int, ...]) -> float:
    return sum(1.0 / (RRF_K + rank) for rank in ranks if rank)


def _reaching(ranks: list[tuple[int, ...]], least: float | None, most: float) -> int:
    """How many of the leading ``ranks`` (relevance descending) could score ``least`` at the
    largest weight ``most``: all when ``least`` is None."""
    if least is None:
        return len(ranks)
    floor = least * _MARGIN
    for count, one in enumerate(ranks):
        if _relevance(one) * most < floor:
            return count
    return len(ranks)


def _case_cap() -> float:
    """The largest weight of a case without counted outcomes: its confidence is the Wilson
    lower bound of at most one incident, decayed (never lifted) since its approval, as shown."""
    most = round(ld.wilson_lower_bound(1, 0, confidence_settings().z), 3)
    return float(ranking.confidence_weight(most))


def _nth_best(values: list[float], n: int) -> float | None:
    """The ``n``-th largest of ``values`` (None when there are fewer)."""
    return heapq.nlargest(n, values)[-1] if 0 < n <= len(values) else None


def _item(hit: Hit) -> dict[str, Any]:
    item: dict[str, Any] = {"id": hit.item_id, "type": hit.kind, "title": hit.title}
    if hit.found_by:
        item["found_by"] = list(hit.found_by)
    item.update(hit.relevance)
    return item


# A lesson's id hashes its content, scene included: its scene's tokens never change. Kept per
# process, bounded, so a lesson's tags are read once.
_SCENE_CACHE_SIZE = 50_000
_scenes: OrderedDict[str, frozenset[str]] = OrderedDict()


def scene_tokens(lesson_ids: Iterable[str]) -> dict[str, frozenset[str]]:
    """The tokens of each lesson's scene tags (one statement for those not read before)."""
    wanted = list(dict.fromkeys(lesson_ids))
    missing = [lesson_id for lesson_id in wanted if lesson_id not in _scenes]
    if missing:
        rows = Lesson.objects.filter(pk__in=missing).values_list("pk", "scene_tags")
        for lesson_id, tags in rows:
            _scenes[lesson_id] = tokenize(" ".join(str(tag) for tag in tags or []))
            if len(_scenes) > _SCENE_CACHE_SIZE:
                _scenes.popitem(last=False)
    return {lesson_id: _scenes[lesson_id] for lesson_id in wanted if lesson_id in _scenes}
