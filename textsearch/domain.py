"""The text-search engine's pure core: tokens, lexicon expansion, the exact Jaccard and RRF
orders, a query parsed once, and the gate declared as terms.

Knowledge search and experience retrieval are clients of this package (``textsearch``): both
rank a scope's items by two Jaccard branches (the raw tokens and the tokens after the lexicon's
rewriting) fused by reciprocal rank fusion, ties by id, exactly. No Django imports: every
function here is a plain function over plain values (the clock is passed in).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from fractions import Fraction
from functools import cmp_to_key
from typing import Any, TypeVar

import numpy as np

RRF_K = 60

# Han ideographs (unified, extension A-F, compatibility). Everything that is neither an ASCII
# letter/digit nor one of these separates tokens.
CJK_CHARACTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef\U0002f800-\U0002fa1f"
_TOKEN_RUN = re.compile(rf"[A-Za-z0-9]+|[{CJK_CHARACTERS}]+")
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


def jaccard(a: frozenset[str], b: frozenset[str]) -> Fraction:
    if not a or not b:
        return Fraction(0)
    inter = len(a & b)
    if inter == 0:
        return Fraction(0)
    return Fraction(inter, len(a) + len(b) - inter)


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


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Fuse ranked id lists: score = Σ 1/(k + rank), rank from 1; ties by id; exact at any size."""
    ranks: dict[str, list[int]] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            ranks.setdefault(doc_id, []).append(rank)
    return exact_order((*rrf_fraction(parts, k), doc_id) for doc_id, parts in ranks.items())


# --- a query, parsed once ----------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedQuery:
    """A query's text, its raw tokens and its tokens after the lexicon's rewriting, and the
    stamp of the lexicon they were expanded under. Parsed once at the edge of a search and
    passed down: the read, the ranking and the answer's order use these sets."""

    text: str
    raw: frozenset[str]
    expanded: frozenset[str]
    stamp: str | None = None

    @property
    def empty(self) -> bool:
        return not self.raw and not self.expanded


def parse_query(text: str, lexicon: Mapping[str, str], stamp: str | None = None) -> ParsedQuery:
    """``text`` tokenized raw and after ``lexicon`` (whose stamp is ``stamp``)."""
    return ParsedQuery(text, tokenize(text), tokenize(expand(text, lexicon)), stamp)


def reparsed(query: ParsedQuery, lexicon: Mapping[str, str], stamp: str | None) -> ParsedQuery:
    """``query`` expanded under another lexicon (its raw tokens are kept: they depend on no
    lexicon)."""
    if stamp == query.stamp:
        return query
    return ParsedQuery(query.text, query.raw, tokenize(expand(query.text, lexicon)), stamp)


# --- the gate, declared as terms ---------------------------------------------------------------
#
# A gate is a tuple of :class:`Term`: a field of the item compared with a value or with an
# instant of the request. The same terms are evaluated over one item (:func:`gate_holds`), over
# an index's packed columns (:func:`columns_admit`) and turned into an ORM filter
# (``textsearch.gate.gate_q``), so each indexed kind declares its gate once.

# The instant a term is compared with when none is named (retrieval's ``now``).
NOW = "now"


class Comparison(Enum):
    IS = "is"  # the field equals the term's value
    AT_OR_BEFORE_NOW = "at_or_before_now"  # field <= the instant; a missing time never is
    AFTER_NOW = "after_now"  # the instant < field; a missing time never is (unless open)


@dataclass(frozen=True)
class Term:
    """One condition of a gate: ``field`` compared with the request's instant ``instant`` (or
    with ``value``), and the codes of an item failing it (``cited_code``: of an item citing one
    failing it). ``open_when_missing``: a missing time passes (an open validity end)."""

    field: str
    comparison: Comparison
    code: str = ""
    cited_code: str = ""
    value: Any = ""
    instant: str = NOW
    open_when_missing: bool = False

    def holds(self, actual: Any, now: Any) -> bool:
        if self.comparison is Comparison.IS:
            return bool(actual == self.value)
        if actual is None:
            return self.open_when_missing
        if self.comparison is Comparison.AT_OR_BEFORE_NOW:
            return bool(actual <= now)
        return bool(now < actual)


def instant_of(term: Term, now: Any) -> Any:
    """The instant ``term`` compares with: ``now`` itself, or its entry ``term.instant`` when
    the request gives several (a mapping of instants by name)."""
    if term.comparison is Comparison.IS:
        return now
    if type(now) is dict or isinstance(now, Mapping):
        return now[term.instant]
    return now


def first_failed(terms: Sequence[Term], item: object, now: Any) -> Term | None:
    """The first of ``terms`` that ``item`` (anything with the terms' fields) fails at ``now``."""
    for term in terms:
        if not term.holds(getattr(item, term.field), instant_of(term, now)):
            return term
    return None


def gate_holds(terms: Sequence[Term], item: object, now: Any) -> bool:
    return first_failed(terms, item, now) is None


def values_admit(terms: Sequence[Term], values: Mapping[str, Any], now: Any) -> bool:
    """``terms`` over plain values by field name (datetimes, or an index's microseconds)."""
    return all(term.holds(values[term.field], instant_of(term, now)) for term in terms)


def columns_admit(terms: Sequence[Term], columns: Any, now: Any) -> Any:
    """``terms`` (time terms only) over whole columns (``columns[field]``: numpy arrays of an
    index's microseconds, where a missing end is stored as a value after every instant): the
    elementwise *and* of what :func:`values_admit` checks one item at a time."""
    admitted: Any = None
    for term in terms:
        column = columns[term.field]
        at = now[term.instant] if type(now) is dict else instant_of(term, now)
        holds = column <= at if term.comparison is Comparison.AT_OR_BEFORE_NOW else at < column
        if admitted is None:
            admitted = holds
        else:
            admitted &= holds
    return True if admitted is None else admitted


@dataclass(frozen=True)
class GateFields:
    """What a gate reads of a reviewed item: its status, exact scope and times."""

    status: str
    scope: Mapping[str, str]
    valid_from: datetime
    valid_to: datetime
    approved_at: datetime | None
