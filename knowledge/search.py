"""``search_knowledge``: scope check, database gate, lexical ranking, conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q

from knowledge.domain import (
    MATCH,
    UNKNOWN,
    Conditions,
    Quote,
    compare_conditions,
    conflicting,
    expand,
    newest_versions,
    rank_branch,
    reciprocal_rank_fusion,
    tokenize,
)
from knowledge.models import Document, DocumentStore
from knowledge.selectors import current_lexicon
from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import to_utc_iso

RETRIEVED = "retrieved"
NEEDS_CONTEXT = "needs_context"
CONFLICTING_SOURCES = "conflicting_sources"
NO_MATCH = "no_match"

DEFAULT_LIMIT = 4
MAX_LIMIT = 50
MAX_QUERY_LENGTH = 2_000
SCOPE_FIELDS = ("tenant", "brand", "store", "campaign")


@dataclass(frozen=True)
class KnowledgeContext:
    tenant: str | None
    brand: str | None
    store: str | None
    campaign: str | None
    occurred_at: datetime | None
    known_at: datetime | None
    facts: Mapping[str, object] = field(default_factory=dict)
    limit: int = DEFAULT_LIMIT


def _result(
    status: str,
    *,
    missing: list[str] | None = None,
    truncated: bool = False,
    evidence: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "missing": missing or [],
        "truncated": truncated,
        "evidence": evidence or [],
    }


def gated_rows(context: KnowledgeContext) -> Any:
    """The gate of step 2, entirely in the database: scope, approval, validity, knowledge time."""
    return DocumentStore.objects.filter(
        Q(document__valid_to__isnull=True) | Q(document__valid_to__gt=context.occurred_at),
        tenant=context.tenant,
        brand=context.brand,
        campaign=context.campaign,
        store=context.store,
        document__approved=True,
        document__revoked=False,
        document__valid_from__lte=context.occurred_at,
        document__published_at__lte=context.known_at,
    )


def _validate(query: str, context: KnowledgeContext) -> None:
    if not isinstance(query, str):
        raise ValidationFailure("query", "must be a string")
    if len(query) > MAX_QUERY_LENGTH:
        raise ValidationFailure("query", f"must be at most {MAX_QUERY_LENGTH} characters")
    if (
        isinstance(context.limit, bool)
        or not isinstance(context.limit, int)
        or not (1 <= context.limit <= MAX_LIMIT)
    ):
        raise ValidationFailure("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    for name in ("occurred_at", "known_at"):
        value = getattr(context, name)
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise ValidationFailure(name, "must be timezone-aware")


def search_knowledge(query: str, context: KnowledgeContext) -> dict[str, Any]:
    _validate(query, context)
    missing = [name for name in SCOPE_FIELDS if not getattr(context, name)]
    missing += [name for name in ("occurred_at", "known_at") if getattr(context, name) is None]
    if missing:
        # Never widen: without the full scope nothing is searched.
        return _result(NEEDS_CONTEXT, missing=missing)

    gated = list(
        gated_rows(context).values_list(
            "document_id",
            "document__doc_key",
            "document__version",
            "document__rule_key",
            "document__requirements",
            "document__raw_tokens",
            "document__expanded_tokens",
        )
    )
    newest = newest_versions((row[1], row[2]) for row in gated)
    gated = [row for row in gated if (row[1], row[2]) in newest]
    if not gated:
        return _result(NO_MATCH)

    public_ids = {row[0]: f"doc:{row[1]}@{row[2]}" for row in gated}
    raw_query = tokenize(query)
    expanded_query = tokenize(expand(query, current_lexicon()))
    raw_rank = rank_branch(raw_query, ((public_ids[r[0]], r[5].split()) for r in gated))
    expanded_rank = rank_branch(expanded_query, ((public_ids[r[0]], r[6].split()) for r in gated))
    fused = reciprocal_rank_fusion([raw_rank, expanded_rank])
    if not fused:
        return _result(NO_MATCH)

    in_conflict = conflicting((public_ids[r[0]], r[3], r[4]) for r in gated)
    chosen = fused[: context.limit]
    # Text only for the chosen few: decoding every gated row's text costs more than a round trip.
    by_public_id = {public_ids[r[0]]: r[0] for r in gated}
    documents = Document.objects.defer("raw_tokens", "expanded_tokens").in_bulk(
        [by_public_id[pid] for pid in chosen]
    )
    facts = {k: v for k, v in context.facts.items() if v is not None and v != ""}

    evidence = []
    for pid in chosen:
        document = documents[by_public_id[pid]]
        conditions = compare_conditions(document.requirements, facts)
        evidence.append(_evidence_item(document, conditions, conflict=pid in in_conflict))

    if any(item["conflict"] for item in evidence):
        status = CONFLICTING_SOURCES
        missing = []
    else:
        undecided = [item for item in evidence if item["conditions"]["status"] == UNKNOWN]
        missing = sorted({name for item in undecided for name in item["conditions"]["unknown"]})
        status = NEEDS_CONTEXT if undecided else RETRIEVED
    return _result(status, missing=missing, truncated=len(fused) > context.limit, evidence=evidence)


def _evidence_item(document: Document, conditions: Conditions, *, conflict: bool) -> dict[str, Any]:
    quote = Quote(
        kind=document.kind,
        title=document.title,
        version=document.version,
        conditions=conditions,
        conflict=conflict,
    )
    return {
        "id": document.public_id,
        "source": document.source,
        "kind": document.kind,
        "title": document.title,
        "version": document.version,
        "rule_key": document.rule_key or None,
        "quote": quote.render(),
        "conditions": conditions.as_json(),
        "conflict": conflict,
        "text": document.text,
        "valid_from": to_utc_iso(document.valid_from),
        "valid_to": to_utc_iso(document.valid_to),
        "published_at": to_utc_iso(document.published_at),
        "content_hash": document.content_hash,
    }


def evidence_supports(evidence: list[dict[str, Any]]) -> bool:
    """True when every item matched and none conflicts (what a skill step needs to pass)."""
    return bool(evidence) and all(
        item["conditions"]["status"] == MATCH and not item["conflict"] for item in evidence
    )
