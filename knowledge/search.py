"""``search_knowledge``: scope check, database gate, lexical ranking, conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q

from knowledge import postings
from knowledge.domain import (
    MATCH,
    RRF_K,
    UNKNOWN,
    Conditions,
    Quote,
    compare_conditions,
    exact_order,
    expand,
    rrf_fraction,
    tokenize,
)
from knowledge.models import Document, DocumentStore, SearchEntry, SearchScope
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

    ranked = ranked_top(query, context)
    if not ranked.chosen:
        return _result(NO_MATCH)

    in_conflict = _conflicting(ranked.scope_id, ranked.contested, context)
    documents = Document.objects.defer("raw_tokens", "expanded_tokens").in_bulk(
        [document_id for document_id, _ in ranked.chosen]
    )
    facts = {k: v for k, v in context.facts.items() if v is not None and v != ""}

    evidence = []
    for document_id, public_id in ranked.chosen:
        document = documents[document_id]
        conditions = compare_conditions(document.requirements, facts)
        evidence.append(_evidence_item(document, conditions, conflict=public_id in in_conflict))

    if any(item["conflict"] for item in evidence):
        status = CONFLICTING_SOURCES
        missing = []
    else:
        undecided = [item for item in evidence if item["conditions"]["status"] == UNKNOWN]
        missing = sorted({name for item in undecided for name in item["conditions"]["unknown"]})
        status = NEEDS_CONTEXT if undecided else RETRIEVED
    truncated = ranked.matched > context.limit
    return _result(status, missing=missing, truncated=truncated, evidence=evidence)


# --- ranking over the postings -----------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """The first ``limit`` fused documents as ``(document id, public id)``, how many matched,
    and the rule_keys of the chosen ones whose group in this scope may disagree."""

    scope_id: int | None
    chosen: list[tuple[int, str]]
    matched: int
    contested: frozenset[str]


_GATE = (
    "{e}.valid_from <= %s AND ({e}.valid_to IS NULL OR {e}.valid_to > %s) "
    "AND {e}.published_at <= %s"
)

# One statement: the lexicon stamp, the postings of the query's tokens counted per entry (the
# intersections), the gate and the newest-version rule on those entries only, each branch's
# ranks (Jaccard as a float: exact for token counts below 2**26), and the fused order as a
# float; the caller re-orders the fetched head exactly. The stamp comes first so that a search
# whose lexicon went stale meanwhile sees it and runs again.
_RANKED_SQL = """
WITH hits AS (
    SELECT p.entry_id AS entry_id,
           SUM(CASE WHEN p.in_raw AND p.token IN ({raw}) THEN 1 ELSE 0 END) AS ri,
           SUM(CASE WHEN p.in_expanded AND p.token IN ({expanded}) THEN 1 ELSE 0 END) AS xi
    FROM knowledge_posting p
    WHERE p.scope_id = %s AND p.token IN ({every})
    GROUP BY p.entry_id
),
gated AS MATERIALIZED (
    SELECT e.id, e.document_id, e.public_id, e.rule_key, e.rule_contested,
           h.ri, h.xi, e.raw_size, e.expanded_size
    FROM hits h JOIN knowledge_searchentry e ON e.id = h.entry_id
    WHERE {gate_e} AND NOT (e.has_newer AND EXISTS (
        SELECT 1 FROM knowledge_searchentry n
        WHERE n.scope_id = e.scope_id AND n.doc_key = e.doc_key AND n.version > e.version
          AND {gate_n}))
),
raw_rank AS (
    SELECT id, ROW_NUMBER() OVER (
        ORDER BY CAST(ri AS DOUBLE PRECISION) / (%s + raw_size - ri) DESC, public_id{collate}
    ) AS r
    FROM gated WHERE ri > 0
),
expanded_rank AS (
    SELECT id, ROW_NUMBER() OVER (
        ORDER BY CAST(xi AS DOUBLE PRECISION) / (%s + expanded_size - xi) DESC, public_id{collate}
    ) AS r
    FROM gated WHERE xi > 0
),
fused AS (
    SELECT g.document_id, g.public_id, g.rule_key, g.rule_contested, rr.r AS r1, xr.r AS r2
    FROM gated g
    LEFT JOIN raw_rank rr ON rr.id = g.id
    LEFT JOIN expanded_rank xr ON xr.id = g.id
    WHERE rr.r IS NOT NULL OR xr.r IS NOT NULL
)
SELECT st.stamp, f.document_id, f.public_id, f.rule_key, f.rule_contested, f.r1, f.r2,
       COUNT(f.document_id) OVER () AS matched
FROM (SELECT 1 AS one) one_row
LEFT JOIN knowledge_lexiconstate st ON st.id = 1
LEFT JOIN fused f ON 1 = 1
ORDER BY CASE
    WHEN f.r1 IS NULL THEN CAST(1 AS DOUBLE PRECISION) / ({k} + f.r2)
    WHEN f.r2 IS NULL THEN CAST(1 AS DOUBLE PRECISION) / ({k} + f.r1)
    ELSE CAST(2 * {k} + f.r1 + f.r2 AS DOUBLE PRECISION) / (({k} + f.r1) * ({k} + f.r2))
END DESC, f.public_id{collate}
LIMIT %s
"""


def _scope_id(context: KnowledgeContext) -> int | None:
    return (
        SearchScope.objects.filter(
            tenant=context.tenant,
            brand=context.brand,
            campaign=context.campaign,
            store=context.store,
        )
        .values_list("id", flat=True)
        .first()
    )


def _placeholders(values: list[str]) -> str:
    # An empty IN () is not SQL; a space is never part of a token, so it matches nothing.
    return ", ".join(["%s"] * len(values)) if values else "%s"


def _fused_value(r1: int | None, r2: int | None) -> tuple[int, int]:
    return rrf_fraction([r for r in (r1, r2) if r is not None])


def ranked_top(query: str, context: KnowledgeContext) -> Ranked:
    """The head of the fused ranking, exactly as the definition orders it."""
    scope_id = _scope_id(context)
    if scope_id is None:
        return Ranked(None, [], 0, frozenset())
    raw_query = tokenize(query)
    stamp = postings.last_known_stamp()
    for _attempt in range(5):
        stamp, lexicon = postings.lexicon_for(stamp)
        expanded_query = tokenize(expand(query, lexicon))
        if not raw_query and not expanded_query:
            return Ranked(scope_id, [], 0, frozenset())
        fetch: int | None = context.limit + 16
        while True:
            rows, db_stamp = _ranked_rows(raw_query, expanded_query, scope_id, context, fetch)
            if db_stamp != stamp:
                break
            head = _exact_head(rows, context.limit, fetch)
            if head is not None:
                return Ranked(scope_id, *head)
            fetch = None if fetch is None or fetch > 4096 else fetch * 8
        # The lexicon changed since it was read: expand the query again with the new one.
        stamp = db_stamp
    raise RuntimeError("the lexicon kept changing during one search")


def _ranked_rows(
    raw_query: frozenset[str],
    expanded_query: frozenset[str],
    scope_id: int,
    context: KnowledgeContext,
    fetch: int | None,
) -> tuple[list[tuple[Any, ...]], str | None]:
    raw = sorted({postings.token_key(t) for t in raw_query})
    expanded = sorted({postings.token_key(t) for t in expanded_query})
    every = sorted(set(raw) | set(expanded))
    postgres = connection.vendor == "postgresql"
    sql = _RANKED_SQL.format(
        raw=_placeholders(raw),
        expanded=_placeholders(expanded),
        every=_placeholders(every),
        gate_e=_GATE.format(e="e"),
        gate_n=_GATE.format(e="n"),
        collate=' COLLATE "C"' if postgres else "",
        k=RRF_K,
    )
    at = connection.ops.adapt_datetimefield_value(context.occurred_at)
    known = connection.ops.adapt_datetimefield_value(context.known_at)
    params: list[Any] = [
        *(raw or [" "]),
        *(expanded or [" "]),
        scope_id,
        *(every or [" "]),
        at,
        at,
        known,
        at,
        at,
        known,
        len(raw_query),
        len(expanded_query),
        fetch if fetch is not None else -1 if not postgres else None,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    stamp = rows[0][0] if rows else None
    return [row[1:] for row in rows if row[1] is not None], stamp


def _exact_head(
    rows: list[tuple[Any, ...]], limit: int, fetch: int | None
) -> tuple[list[tuple[int, str]], int, frozenset[str]] | None:
    """The first ``limit`` rows in exact order, or None when the fetched head may not hold them.

    Rows come ordered by the float of their fused score. Float rounding is monotone, so a row
    not fetched (float at most the last fetched one's) can only outrank a chosen row when the
    last fetched float equals the smallest chosen float; then the caller fetches more.
    """
    if not rows:
        return [], 0, frozenset()
    matched = rows[0][-1]
    by_id = {row[1]: row for row in rows}
    values = {row[1]: _fused_value(row[4], row[5]) for row in rows}
    order = exact_order((*values[pid], pid) for pid in by_id)
    chosen = order[:limit]
    if fetch is not None and matched > len(rows):
        last = rows[-1]
        last_float = values[last[1]][0] / values[last[1]][1]
        lowest = min(values[pid][0] / values[pid][1] for pid in chosen)
        if not last_float < lowest:
            return None
    contested = frozenset(by_id[pid][2] for pid in chosen if by_id[pid][3] and by_id[pid][2])
    return [(by_id[pid][0], pid) for pid in chosen], matched, contested


def _gate_q(context: KnowledgeContext) -> Q:
    return Q(
        Q(valid_to__isnull=True) | Q(valid_to__gt=context.occurred_at),
        valid_from__lte=context.occurred_at,
        published_at__lte=context.known_at,
    )


def _conflicting(
    scope_id: int | None, rule_keys: frozenset[str], context: KnowledgeContext
) -> frozenset[str]:
    """Public ids in conflict among the gated members of the given (contested) rule groups.

    A member is the newest gated version of its doc_key (whatever rule_key a newer version has).
    """
    if scope_id is None or not rule_keys:
        return frozenset()
    newer = SearchEntry.objects.filter(
        _gate_q(context),
        scope_id=OuterRef("scope_id"),
        doc_key=OuterRef("doc_key"),
        version__gt=OuterRef("version"),
    )
    members = (
        SearchEntry.objects.filter(_gate_q(context), scope_id=scope_id, rule_key__in=rule_keys)
        .filter(Q(has_newer=False) | ~Exists(newer))
        .values_list("public_id", "rule_key", "requirements_hash")
    )
    by_group: dict[str, list[tuple[str, str]]] = {}
    for public_id, rule_key, requirements_hash in members:
        by_group.setdefault(rule_key, []).append((public_id, requirements_hash))
    flagged: set[str] = set()
    for group in by_group.values():
        if len({h for _, h in group}) > 1:
            flagged.update(pid for pid, _ in group)
    return frozenset(flagged)


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
