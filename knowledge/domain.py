"""The knowledge base's pure core: tokens, ranking, conditions, conflicts and the gate.

No Django imports: every function here is a plain function over plain values, so it can be
tested exhaustively and reused by benchmarks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

import rfc8785

from reviewconsole.errors import ValidationFailure
from textsearch.domain import RRF_K as RRF_K
from textsearch.domain import Comparison, Term, gate_holds
from textsearch.domain import exact_order as exact_order
from textsearch.domain import expand as expand
from textsearch.domain import jaccard as jaccard
from textsearch.domain import rank_branch as rank_branch
from textsearch.domain import reciprocal_rank_fusion as reciprocal_rank_fusion
from textsearch.domain import rrf_fraction as rrf_fraction
from textsearch.domain import rrf_fractions as rrf_fractions
from textsearch.domain import tokenize as tokenize

HISTORICAL_CASE_PREFIX = "历史案例，仅作排查线索"

# The status of a knowledge search's answer (docs/contracts.md, Statuses): read by the search, the
# verifier of an investigation's answer, a skill's recipe steps and the replay's investigator.
RETRIEVED = "retrieved"
NEEDS_CONTEXT = "needs_context"
CONFLICTING_SOURCES = "conflicting_sources"
NO_MATCH = "no_match"


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
    for query, expanded in ((raw_query, False), (expanded_query, True)):
        scored = [
            (jaccard(query, d.expanded_tokens if expanded else d.raw_tokens), d.public_id)
            for d in documents
        ]
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


# A document version's gate, declared once as terms (``textsearch.domain.Term``): reviewed
# (approved, not revoked), in force when the ticket's event occurred (``occurred_at``; an open
# end never closes) and published by the time the ticket was known (``known_at``). ``admits``
# evaluates them over one version, ``knowledge.search.gated_rows`` as a database filter and the
# search over the index's packed columns (``INDEX_GATE``: the index holds reviewed versions
# only), so the three cannot drift apart.
OCCURRED, KNOWN = "occurred_at", "known_at"
REVIEWED_GATE = (
    Term("approved", Comparison.IS, value=True),
    Term("revoked", Comparison.IS, value=False),
)
INDEX_GATE = (
    Term("valid_from", Comparison.AT_OR_BEFORE_NOW, instant=OCCURRED),
    Term("valid_to", Comparison.AFTER_NOW, instant=OCCURRED, open_when_missing=True),
    Term("published_at", Comparison.AT_OR_BEFORE_NOW, instant=KNOWN),
)
DOCUMENT_GATE = (*REVIEWED_GATE, *INDEX_GATE)
# The scope fields a document names one value of (it lists its stores, any of which matches).
SCOPE_TERMS = ("tenant", "brand", "campaign")


@dataclass(frozen=True)
class DocumentGateFields:
    """What the gate reads of a document version (its scope lists stores)."""

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

    def instants(self) -> dict[str, datetime]:
        return {OCCURRED: self.occurred_at, KNOWN: self.known_at}


def admits(doc: DocumentGateFields, scope: Scope) -> bool:
    """The search gate: scope, then :data:`DOCUMENT_GATE` (review, validity, publication)."""
    return (
        all(getattr(doc, name) == getattr(scope, name) for name in SCOPE_TERMS)
        and scope.store in doc.stores
        and gate_holds(DOCUMENT_GATE, doc, scope.instants())
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
