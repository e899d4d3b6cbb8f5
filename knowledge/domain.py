"""The knowledge base's pure core: tokens, ranking, conditions, conflicts and the gate.

No Django imports: every function here is a plain function over plain values, so it can be
tested exhaustively and reused by benchmarks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from functools import cmp_to_key
from typing import Any, TypeVar

import numpy as np
import rfc8785

from reviewconsole.errors import ValidationFailure

RRF_K = 60
HISTORICAL_CASE_PREFIX = "历史案例，仅作排查线索"

# The status of a knowledge search's answer (docs/contracts.md, Statuses): read by the search, the
# verifier of an investigation's answer, a skill's recipe steps and the replay's investigator.
RETRIEVED = "retrieved"
NEEDS_CONTEXT = "needs_context"
CONFLICTING_SOURCES = "conflicting_sources"
NO_MATCH = "no_match"

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


# --- the definition, kept as the oracle that the indexed search is tested against ------------


@dataclass(frozen=True)
class ReferenceDocument:
    """A gated document version as the straightforward search scanned it."""

    public_id: str
    doc_key: str
    version: int
    rule_key: str
    requirements: Mapping[str, Any]
    raw_tokens: frozenset[str]
    expanded_tokens: frozenset[str]


def reference_search(
    raw_query: frozenset[str],
    expanded_query: frozenset[str],
    gated: Iterable[ReferenceDocument],
) -> tuple[list[str], frozenset[str]]:
    """Ranked ids and conflicting ids over ``gated``, straight from the definition.

    Every gated document is scanned, scores are Fractions: slow, obviously right. Only the
    newest gated version of each doc_key takes part; documents scoring 0 are not ranked.
    """
    documents = list(gated)
    newest = newest_versions((d.doc_key, d.version) for d in documents)
    documents = [d for d in documents if (d.doc_key, d.version) in newest]
    rankings = []
    for query, tokens_of in (
        (raw_query, lambda d: d.raw_tokens),
        (expanded_query, lambda d: d.expanded_tokens),
    ):
        scored = [(jaccard(query, tokens_of(d)), d.public_id) for d in documents]
        rankings.append(
            [pid for score, pid in sorted(scored, key=lambda p: (-p[0], p[1])) if score > 0]
        )
    fused: dict[str, Fraction] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            fused[pid] = fused.get(pid, Fraction(0)) + Fraction(1, RRF_K + rank)
    ranked = sorted(fused, key=lambda pid: (-fused[pid], pid))
    in_conflict = conflicting((d.public_id, d.rule_key, d.requirements) for d in documents)
    return ranked, in_conflict


# --- conditions -----------------------------------------------------------------------------

MATCH = "match"
MISMATCH = "mismatch"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Conditions:
    status: str
    mismatches: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "mismatches": list(self.mismatches),
            "unknown": list(self.unknown),
        }


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _allows(constraint: Any, value: object) -> bool:
    if isinstance(constraint, list):
        return any(value == allowed or str(value) == str(allowed) for allowed in constraint)
    number = _as_int(value)
    if number is None:
        return False
    low, high = constraint.get("min"), constraint.get("max")
    return (low is None or number >= low) and (high is None or number <= high)


def compare_conditions(requirements: Mapping[str, Any], facts: Mapping[str, object]) -> Conditions:
    """Each required fact: absent → unknown; present but not allowed → mismatch."""
    mismatches: list[str] = []
    unknown: list[str] = []
    for name in sorted(requirements):
        value = facts.get(name)
        if value is None or value == "":
            unknown.append(name)
        elif not _allows(requirements[name], value):
            mismatches.append(name)
    if mismatches:
        status = MISMATCH
    elif unknown:
        status = UNKNOWN
    else:
        status = MATCH
    return Conditions(status, tuple(mismatches), tuple(unknown))


def validate_requirements(value: object, *, field: str = "requirements") -> dict[str, Any]:
    """A mapping of fact name → non-empty list of allowed values, or {"min": N, "max": N}."""
    if not isinstance(value, dict):
        raise ValidationFailure(field, "must be an object mapping fact names to constraints")
    clean: dict[str, Any] = {}
    for name, constraint in value.items():
        path = f"{field}.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
            raise ValidationFailure(path, "fact names are lower-case identifiers")
        if isinstance(constraint, list):
            if not constraint:
                raise ValidationFailure(path, "must list at least one allowed value")
            for i, allowed in enumerate(constraint):
                if isinstance(allowed, bool) or not isinstance(allowed, (str, int)):
                    raise ValidationFailure(
                        f"{path}[{i}]", "allowed values are strings or integers"
                    )
            clean[name] = list(constraint)
        elif isinstance(constraint, dict):
            if not constraint or set(constraint) - {"min", "max"}:
                raise ValidationFailure(path, 'a range is {"min": N}, {"max": N} or both')
            for bound, number in constraint.items():
                if isinstance(number, bool) or not isinstance(number, int):
                    raise ValidationFailure(f"{path}.{bound}", "must be an integer")
            if (
                "min" in constraint
                and "max" in constraint
                and constraint["min"] > constraint["max"]
            ):
                raise ValidationFailure(path, "min must not exceed max")
            clean[name] = dict(constraint)
        else:
            raise ValidationFailure(path, "must be a list of allowed values or a min/max range")
    return clean


def newest_versions(versions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
    """Of ``(doc_key, version)`` pairs, the newest version of each doc_key.

    Among the gated versions of one document only the newest goes on to ranking and conflicts:
    an older version is superseded from its successor's ``published_at`` on (the gate already
    holds back a successor published after ``known_at``), and never conflicts with it.
    """
    newest: dict[str, int] = {}
    for doc_key, version in versions:
        if version > newest.get(doc_key, 0):
            newest[doc_key] = version
    return set(newest.items())


def conflicting(documents: Iterable[tuple[str, str, Mapping[str, Any]]]) -> frozenset[str]:
    """Ids of documents sharing a rule_key with another document of different requirements.

    Callers pass one version per document (the newest gated one), so a revision never conflicts
    with the version it replaces.
    """
    by_slot: dict[str, list[tuple[str, str]]] = {}
    for doc_id, rule_key, requirements in documents:
        if rule_key:
            by_slot.setdefault(rule_key, []).append((doc_id, canonical_json(requirements)))
    flagged: set[str] = set()
    for members in by_slot.values():
        if len({req for _, req in members}) > 1:
            flagged.update(doc_id for doc_id, _ in members)
    return frozenset(flagged)


# --- the gate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateFields:
    tenant: str
    brand: str
    stores: frozenset[str]
    campaign: str
    approved: bool
    revoked: bool
    valid_from: datetime
    valid_to: datetime | None
    published_at: datetime


@dataclass(frozen=True)
class Scope:
    tenant: str
    brand: str
    store: str
    campaign: str
    occurred_at: datetime
    known_at: datetime


def admits(doc: GateFields, scope: Scope) -> bool:
    """The search gate: scope, validity, publication and review. The database query mirrors it."""
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


# --- identity ------------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    return rfc8785.dumps(value).decode("utf-8")


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


@dataclass(frozen=True)
class Quote:
    kind: str
    title: str
    version: int
    conditions: Conditions
    conflict: bool = False
    extra: tuple[str, ...] = field(default=())

    def render(self) -> str:
        c = self.conditions
        gaps = []
        if c.mismatches:
            gaps.append("mismatch: " + ", ".join(c.mismatches))
        if c.unknown:
            gaps.append("unknown: " + ", ".join(c.unknown))
        if self.conflict:
            gaps.append("conflicts with another source of the same rule")
        body = f"[{self.kind}] {self.title} (v{self.version}); conditions: {c.status}"
        if gaps:
            body += " (" + "; ".join(gaps) + ")"
        if self.kind == "case":
            return f"{HISTORICAL_CASE_PREFIX}：{body}"
        return body
