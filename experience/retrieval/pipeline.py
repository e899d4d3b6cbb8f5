"""The request path of retrieval and of the context block, as one pipeline.

    gate → candidates → rank → hydrate the returned items → record the reads

1. **Read.** One statement (``experience.index.postings.scope_read``) reads the scope's packed
   entries (gate times, token-set sizes, kind, tie order of every entry) and the posting lists
   of the query's tokens.
2. **Gate.** :func:`available` over the packed entries: approved (the index holds only
   approved items), approved by ``now``, in force at ``now``. The scope is exact by
   construction (one index scope per exact scope).
3. **Candidates.** Gated entries sharing a token with the query; intersections are counted from
   the posting lists. Cases are admitted as they are; a skill only while its cited cases are
   usable, a lesson only while it is recallable (usable support, confidence at the threshold or
   an open conflict): those are decided by reads, and only for the entries that can reach the
   head asked for (``experience.retrieval.ranking.Ranking``).
4. **Rank.** Both Jaccard branches and their fusion, as vector operations, exactly as
   ``experience.core.domain.rank_items`` ranks the gated texts.
5. **Order and hydrate.** The answer's order fuses relevance with confidence and scene match
   (``experience.retrieval.order``), reading the relevance order only as deep as that order
   needs; only the items read get a confidence (ids and titles from their index entries; the
   context block's texts from the items).
6. **Record.** The service claims the run and records one ``Reference`` per returned item.

While a scope's index cannot answer (never indexed, not packed, or behind the lexicon) the same
stages run over every gated item's text instead (:class:`TextRanking`): correct, only slower.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

import numpy as np

from experience.cases.models import Case, Skill
from experience.core import availability
from experience.core.gate import admitted_q
from experience.core.models import ItemType
from experience.index import postings
from experience.lessons.outcome_tallies import OutcomeBatch
from experience.lessons.selectors import CaseTimes, SkillEvidence, skill_evidence_rows
from experience.retrieval import ranking
from experience.retrieval.recall import Recallable, recallable_lessons
from semantic import calibration, embedders
from textsearch.domain import (
    ParsedQuery,
    expand,
    parse_query,
    rank_branch,
    reciprocal_rank_fusion,
    reparsed,
    tokenize,
)
from textsearch.postings import micros
from textsearch.ranking import BRANCHES, found_by
from textsearch.vector import NOT_INDEXED, OFF, ranks_or_none, vector_branch
from textsearch.vector import votes as vector_votes

# How many more cases and skills than asked for have their outcomes read with the lessons'.
OUTCOMES_MARGIN = 2
# Attempts at an answer from the index when entries move between its two reads.
ATTEMPTS = 3


# --- 2. the gate ---------------------------------------------------------------------------------


def available(entries: np.ndarray, now: datetime) -> np.ndarray:
    """The availability gate over packed index entries (one bool per entry): approved (every
    indexed item is) and the time terms of ``availability.TIME_GATE``."""
    return np.asarray(availability.times_admit_columns(entries, micros(now)), dtype=bool)


def gated_cases(scope: Mapping[str, str], now: datetime) -> Any:
    return Case.objects.filter(admitted_q(scope, now))


def gated_skills(
    scope: Mapping[str, str],
    now: datetime,
    evidence: dict[str, list[tuple[Any, ...]]] | None = None,
) -> list[tuple[str, str, str]]:
    """``(id, title, when)`` of skills that pass the gate *and* whose cited cases are usable now
    (``evidence``: as :func:`usable_skills` fills it)."""
    skills = list(Skill.objects.filter(admitted_q(scope, now)).values_list("id", "title", "when"))
    if not skills:
        return []
    usable = usable_skills([s[0] for s in skills], now, evidence)
    return [s for s in skills if s[0] in usable]


def usable_skills(
    skill_ids: list[str], now: datetime, evidence: dict[str, list[tuple[Any, ...]]] | None = None
) -> set[str]:
    """The skills among ``skill_ids`` whose cited cases are all usable at ``now`` (one compiled
    statement, the one their confidence is read from). ``evidence``, when given, receives each
    skill's rows, so a returned skill's confidence is worked out from them without a second
    read."""
    cited: dict[str, bool] = {}
    if evidence is not None:
        for skill_id in skill_ids:
            evidence[skill_id] = []
    for row in skill_evidence_rows(skill_ids):
        skill_id, _approved, _case, status, _inc, valid_from, valid_to, _at = row
        if evidence is not None:
            evidence[skill_id].append(row)
        usable = availability.case_usable_values(
            status=status, valid_from=valid_from, valid_to=valid_to, now=now
        )
        cited[skill_id] = cited.get(skill_id, True) and usable
    return {skill_id for skill_id, usable in cited.items() if usable}


# --- 3, 4. candidates and their ranking ------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """A ranked item: its id, kind and title, and its index entry when the index ranked it."""

    item_id: str
    kind: str
    title: str
    entry: postings.EntryRow | None = None
    # The branches that found it (``raw``, ``expanded``, ``vector``).
    found_by: tuple[str, ...] = ()
    # Its rank (from 1; 0 = not ranked) in each branch, among the admitted items: its relevance.
    ranks: tuple[int, ...] = ()
    # What the answer says of its relevance: ``relevance`` (calibrated, 0 to 1) and, where the
    # vector branch scored it, ``similarity`` (semantic.branch.Branch.described).
    relevance: Mapping[str, float] = field(default_factory=dict)

    @property
    def times(self) -> CaseTimes | None:
        """The item's gate times as its index entry holds them (None: ranked from the texts)."""
        return None if self.entry is None else self.entry.gate_times()


class Ranked(Protocol):
    """The ranking of one call, asked for its head as deep as the caller needs."""

    @property
    def lessons(self) -> Mapping[str, Recallable]: ...

    @property
    def outcomes(self) -> OutcomeBatch: ...

    @property
    def semantic(self) -> str: ...

    @property
    def skill_evidence(self) -> SkillEvidence:
        """The cited-case rows of the skills the ranking decided on (their confidence needs
        the same rows)."""
        ...

    @property
    def lesson_candidates(self) -> int:
        """At least as many as the lessons the ranking may return (the one kind that declares
        a scene)."""
        ...

    def head(self, n: int) -> list[Hit]: ...

    def ranks(self, n: int) -> list[tuple[int, ...]]:
        """The branch ranks of the first ``n`` of :meth:`head` (their relevance), without
        reading the items: for a caller working out how deep to read."""
        ...


class Moved(Exception):
    """The index changed between the read of a scope's array and of its entries' rows."""


_CASE = postings.KIND_CODES[ItemType.CASE]
_LESSON = postings.KIND_CODES[ItemType.LESSON]


class IndexRanking:
    """The pipeline over one :class:`~experience.index.postings.ScopeRead`."""

    def __init__(
        self,
        read: postings.ScopeRead,
        scope: Mapping[str, str],
        now: datetime,
        *,
        ahead: int,
        lessons: Mapping[str, Recallable] | None = None,
        query: str = "",
    ) -> None:
        entries = read.entries
        raw_hits = ranking.intersections(entries["id"], read.raw)
        expanded_hits = ranking.intersections(entries["id"], read.expanded)
        if raw_hits is None or expanded_hits is None:
            raise Moved
        gated = available(entries, now)
        # The vector branch, over exactly the entries past the gate (semantic.branch).
        vector = vector_branch(
            postings.VECTOR_SPACE, read.scope_id, entries["id"], gated, entries["order"], query
        )
        self._semantic = vector.status
        self._vector = vector
        self._shares = np.zeros(len(raw_hits), dtype=np.float64)
        for hits, size in ((raw_hits, read.raw_size), (expanded_hits, read.expanded_size)):
            if size:
                np.maximum(self._shares, hits / size, out=self._shares)
        found = (raw_hits > 0) | (expanded_hits > 0)
        if vector.ranked:
            assert vector.ranks is not None
            found |= vector.ranks > 0
        candidates = gated & found
        self._read = read
        self._scope = scope
        self._now = now
        self._ahead = ahead
        self._given = lessons
        self._rows: dict[int, postings.EntryRow] = {}
        self._hits: dict[int, Hit] = {}
        self._heads: dict[int, list[int]] = {}
        self._ranks: dict[int, tuple[int, ...]] = {}
        self._lessons: dict[str, Recallable] = {}
        self._skill_evidence: dict[str, list[tuple[Any, ...]]] = {}
        self._outcomes: OutcomeBatch | None = None
        self._ranking = ranking.Ranking(
            raw_hits=raw_hits,
            expanded_hits=expanded_hits,
            raw_size=read.raw_size,
            expanded_size=read.expanded_size,
            raw_sizes=entries["raw_size"],
            expanded_sizes=entries["expanded_size"],
            order=entries["order"],
            candidates=candidates,
            known=entries["kind"] == _CASE,
            decide=self._admitted,
            vector=ranks_or_none(vector),
            votes=vector_votes(),
            lessons=entries["kind"] == _LESSON,
        )

    @property
    def lessons(self) -> Mapping[str, Recallable]:
        return self._lessons

    @property
    def outcomes(self) -> OutcomeBatch:
        if self._outcomes is None:
            self._outcomes = OutcomeBatch(self._now)
        return self._outcomes

    @property
    def semantic(self) -> str:
        return self._semantic

    @property
    def skill_evidence(self) -> SkillEvidence:
        return self._skill_evidence

    @property
    def lesson_candidates(self) -> int:
        return self._ranking.lesson_candidates

    def ranks(self, n: int) -> list[tuple[int, ...]]:
        positions = self._positions(n)
        new = [p for p in positions if p not in self._ranks]
        for p, item_ranks in zip(new, self._ranking.ranks_at(new), strict=True):
            self._ranks[p] = item_ranks
        return [self._ranks[p] for p in positions]

    def head(self, n: int) -> list[Hit]:
        positions = self._positions(n)
        rows = self._rows_of(positions)
        self.ranks(n)
        for p in positions:
            if p in self._hits:
                continue
            item_ranks = self._ranks[p]
            self._hits[p] = Hit(
                rows[p].item_id,
                rows[p].kind,
                rows[p].title,
                rows[p],
                found_by(item_ranks),
                item_ranks,
                self._vector.described(p, float(self._shares[p]) or None),
            )
        return [self._hits[p] for p in positions]

    def _positions(self, n: int) -> list[int]:
        """The positions of the first ``n`` of the ranking (worked out once per ``n``)."""
        if n not in self._heads:
            self._heads[n] = [int(p) for p in self._ranking.head(n)]
        return self._heads[n]

    def _admitted(self, positions: np.ndarray) -> np.ndarray:
        """Which skills and lessons at ``positions`` may be returned: the skills whose cited
        cases are usable, the recallable lessons. The first call also reads the rows of the
        leading items and has their outcomes read with the lessons' (one statement)."""
        asked = [int(p) for p in positions]
        likely: list[int] = []
        if self._outcomes is None:
            likely = [int(p) for p in self._ranking.leading(self._ahead + OUTCOMES_MARGIN)]
        rows = self._rows_of([*asked, *likely])
        if self._outcomes is None:
            ahead = [rows[p].item_id for p in likely if rows[p].kind != ItemType.LESSON]
            self._outcomes = OutcomeBatch(self._now, ahead)
        skills = [rows[p].item_id for p in asked if rows[p].kind == ItemType.SKILL]
        usable = usable_skills(skills, self._now, self._skill_evidence) if skills else set()
        among = {rows[p].item_id: rows[p] for p in asked if rows[p].kind == ItemType.LESSON}
        if not among:
            recalled: Mapping[str, Recallable] = {}
        elif self._given is None:
            recalled = recallable_lessons(self._scope, self._now, self._outcomes, among)
        else:
            recalled = {i: self._given[i] for i in among if i in self._given}
        self._lessons.update(recalled)
        return np.array([rows[p].item_id in usable or rows[p].item_id in recalled for p in asked])

    def _rows_of(self, positions: Sequence[int]) -> dict[int, postings.EntryRow]:
        """The entry rows at ``positions``, read once per call; :class:`Moved` when one is gone
        or is no longer what the array read (the item was taken out meanwhile)."""
        ids = self._read.entries["id"]
        missing = {int(ids[p]): p for p in positions if p not in self._rows}
        if missing:
            read = postings.entry_rows(missing)
            for entry_id, p in missing.items():
                row = read.get(entry_id)
                if row is None or row.scope_id != self._read.scope_id:
                    raise Moved
                self._rows[p] = row
        return {p: self._rows[p] for p in positions}


class TextRanking:
    """The same ranking read from every gated item's text (the reference the index is tested
    against, and what answers while a scope's index cannot)."""

    def __init__(
        self,
        query: str | ParsedQuery,
        scope: Mapping[str, str],
        now: datetime,
        lessons: Mapping[str, Recallable] | None = None,
    ) -> None:
        self._outcomes = OutcomeBatch(now)
        if lessons is None:
            lessons = recallable_lessons(scope, now, self._outcomes, None)
        self._lessons = lessons
        self._skill_evidence: dict[str, list[tuple[Any, ...]]] = {}
        self._ranked = _ranked_from_texts(query, scope, now, lessons, self._skill_evidence)

    @property
    def lessons(self) -> Mapping[str, Recallable]:
        return self._lessons

    @property
    def outcomes(self) -> OutcomeBatch:
        return self._outcomes

    @property
    def semantic(self) -> str:
        # Ranked from the texts while the scope's index cannot answer: the vector branch
        # needs the index's entries, so this answer is lexical.
        return NOT_INDEXED if embedders.enabled() else OFF

    @property
    def skill_evidence(self) -> SkillEvidence:
        return self._skill_evidence

    @property
    def lesson_candidates(self) -> int:
        return len(self._lessons)

    def head(self, n: int) -> list[Hit]:
        return self._ranked[:n]

    def ranks(self, n: int) -> list[tuple[int, ...]]:
        return [hit.ranks for hit in self._ranked[:n]]


Answer = TypeVar("Answer")


def answered(
    query: str | ParsedQuery,
    scope: Mapping[str, str],
    now: datetime,
    use: Callable[[Ranked], Answer],
    *,
    ahead: int,
    lessons: Mapping[str, Recallable] | None = None,
) -> Answer:
    """``use`` applied to the ranking of ``query`` in ``scope`` at ``now``: from the index when
    it can answer (read again when entries moved between its reads), else from the texts.
    ``ahead``: how deep the caller will most likely ask (outcomes of that many leading items are
    read with the lessons'); ``lessons``: the recallable lessons when the caller knows them.
    ``query`` is parsed once (here when the caller did not) and passed down."""
    parsed = query if isinstance(query, ParsedQuery) else postings.query_parsed(query)
    for _attempt in range(ATTEMPTS):
        read = postings.scope_read(scope, parsed)
        if read is postings.STALE:
            break
        try:
            return use(
                IndexRanking(read, scope, now, ahead=ahead, lessons=lessons, query=parsed.text)
            )
        except Moved:
            continue
    return use(TextRanking(parsed, scope, now, lessons))


def semantic_note(status: str) -> dict[str, str]:
    """What the vector branch did, as answers carry it (``semantic``): absent while it is off,
    so a lexical deployment's answers keep their shape."""
    return {} if status == OFF else {"semantic": status}


# --- ranking from the texts ---------------------------------------------------------------------


def _ranked_from_texts(
    query: str | ParsedQuery,
    scope: Mapping[str, str],
    now: datetime,
    lessons: Mapping[str, Recallable],
    skill_evidence: dict[str, list[tuple[Any, ...]]],
) -> list[Hit]:
    titles: dict[str, tuple[str, str]] = {}
    texts: list[tuple[str, str]] = []
    for case_id, title, text in gated_cases(scope, now).values_list("id", "title", "search_text"):
        titles[case_id] = (ItemType.CASE, title)
        texts.append((case_id, text))
    for skill_id, title, when in gated_skills(scope, now, skill_evidence):
        titles[skill_id] = (ItemType.SKILL, title)
        texts.append((skill_id, postings.skill_text(title, when)))
    for lesson in lessons.values():
        titles[lesson.id] = (ItemType.LESSON, lesson.title)
        texts.append((lesson.id, lesson.search_text))
    if not texts:
        return []
    raw, expanded, shares = _branches(query, texts)
    curves = calibration.lexical_only()
    found = [
        {item_id: rank for rank, item_id in enumerate(ids, start=1)} for ids in (raw, expanded)
    ]
    return [
        Hit(
            i,
            str(titles[i][0]),
            titles[i][1],
            None,
            tuple(name for name, ranked in zip(BRANCHES, found, strict=False) if i in ranked),
            tuple(ranked.get(i, 0) for ranked in found),
            {"relevance": curves.relevance(None, shares.get(i))},
        )
        for i in reciprocal_rank_fusion([raw, expanded])
    ]


# Case and skill ids hash their content, so an id's token sets never change; only a lexicon
# change (a new stamp) changes the expanded ones. Each query then tokenizes only itself and the
# items it has not met before. Bounded, so a long-running process keeps a steady footprint.
_TOKEN_CACHE_SIZE = 50_000
_tokens: OrderedDict[str, tuple[frozenset[str], frozenset[str]]] = OrderedDict()
_tokens_stamp: list[str | None] = [None]


def _item_tokens(
    item_id: str, text: str, lexicon: Mapping[str, str]
) -> tuple[frozenset[str], frozenset[str]]:
    cached = _tokens.get(item_id)
    if cached is None:
        cached = (tokenize(text), tokenize(expand(text, lexicon)))
        _tokens[item_id] = cached
        if len(_tokens) > _TOKEN_CACHE_SIZE:
            _tokens.popitem(last=False)
    return cached


def _ranked(query: str | ParsedQuery, texts: list[tuple[str, str]]) -> list[str]:
    """Ids ranked as ``experience.core.domain.rank_items`` ranks them (raw + expanded, RRF)."""
    raw, expanded, _ = _branches(query, texts)
    return reciprocal_rank_fusion([raw, expanded])


def _branches(
    query: str | ParsedQuery, texts: list[tuple[str, str]]
) -> tuple[list[str], list[str], dict[str, float]]:
    """The raw and the expanded branch's ranked ids, and per item found the larger share of the
    query's tokens it holds in either (the query expanded again only under another lexicon)."""
    stamp, lexicon = postings.current_lexicon()
    if isinstance(query, ParsedQuery):
        parsed = reparsed(query, lexicon, stamp)
    else:
        parsed = parse_query(query, lexicon, stamp)
    if stamp is None or stamp != _tokens_stamp[0]:
        _tokens.clear()
        _tokens_stamp[0] = stamp
    sets = [(item_id, _item_tokens(item_id, text, lexicon)) for item_id, text in texts]
    raw_query, expanded_query = parsed.raw, parsed.expanded
    raw = rank_branch(raw_query, ((i, t[0]) for i, t in sets))
    expanded = rank_branch(expanded_query, ((i, t[1]) for i, t in sets))
    shares: dict[str, float] = {}
    for item_id, (raw_tokens, expanded_tokens) in sets:
        share = max(
            len(raw_query & raw_tokens) / len(raw_query) if raw_query else 0.0,
            len(expanded_query & expanded_tokens) / len(expanded_query) if expanded_query else 0.0,
        )
        if share:
            shares[item_id] = share
    return raw, expanded, shares
