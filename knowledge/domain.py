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
from typing import Any

import rfc8785

from reviewconsole.errors import ValidationFailure

RRF_K = 60
HISTORICAL_CASE_PREFIX = "历史案例，仅作排查线索"

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


def rank_branch(
    query: frozenset[str], documents: Iterable[tuple[str, Collection[str]]]
) -> list[str]:
    """Ids of documents with a positive Jaccard score, best first, ties by id.

    Each document's tokens must be distinct (stored token sets are). Scores are compared as
    floats: i/u for token counts far below 2**26 is exact enough that equal ratios give equal
    floats and different ratios keep their order, and it is several times cheaper than Fraction.
    """
    if not query:
        return []
    size = len(query)
    scored = []
    for doc_id, tokens in documents:
        inter = len(query.intersection(tokens))
        if inter:
            scored.append((-inter / (size + len(tokens) - inter), doc_id))
    scored.sort()
    return [doc_id for _, doc_id in scored]


# Above this many ranked documents the float shortcut below could merge distinct scores.
_EXACT_FLOAT_RANKS = 10_000


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Fuse ranked id lists: score = Σ 1/(k + rank), rank from 1; ties by id.

    For up to two rankings the sum is formed exactly as one integer fraction and divided once,
    so equal sums give equal floats and unequal ones keep their order; otherwise Fraction.
    """
    denominators: dict[str, list[int]] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            denominators.setdefault(doc_id, []).append(k + rank)
    if len(rankings) <= 2 and max(map(len, rankings), default=0) <= _EXACT_FLOAT_RANKS:

        def score(parts: list[int]) -> float:
            if len(parts) == 1:
                return 1 / parts[0]
            a, b = parts
            return (a + b) / (a * b)
    else:

        def score(parts: list[int]) -> float:
            return float(sum((Fraction(1, d) for d in parts), Fraction(0)))

    return sorted(denominators, key=lambda doc_id: (-score(denominators[doc_id]), doc_id))


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
    """The gate of §2.2 step 2. The database query mirrors this predicate."""
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
