"""``retrieve_experience``: the retrieval pipeline (``experience.retrieval.pipeline``: gate,
candidates, ranking, the returned items with their confidence), then one Reference per read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from experience.core import domain
from experience.core.models import ItemType
from experience.retrieval import pipeline
from experience.retrieval.recall import Recallable
from experience.runs.claims import run_claim
from experience.runs.records import references_record, validate_run_id
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import USE_EXPERIENCE, require, require_scope

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OK = "ok"
FALLBACK = "fallback"
DEFAULT_LIMIT = 3
MAX_LIMIT = 20
MAX_QUERY = 2_000
USE_REFUSED = "retrieving experience needs the agent or reviewer role"
LIMIT_INVALID = f"must be an integer from 1 to {MAX_LIMIT}"


def _validate(query: object, limit: object, now: datetime) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailure("query", "must be a non-empty string")
    if len(query) > MAX_QUERY:
        raise ValidationFailure("query", f"must be at most {MAX_QUERY} characters")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationFailure("limit", LIMIT_INVALID)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValidationFailure("now", "must be timezone-aware")


def retrieve_experience(
    query: str,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: str,
    limit: int = DEFAULT_LIMIT,
    *,
    actor: User,
) -> dict[str, Any]:
    require(actor, USE_EXPERIENCE, message=USE_REFUSED)
    _validate(query, limit, now)
    run_id = validate_run_id(run_id)
    domain.given_scope_checked(scope)
    missing = domain.missing_scope(scope)
    if missing:
        return {"status": FALLBACK, "missing": missing, "items": []}
    exact = {name: str(scope[name]).strip() for name in domain.SCOPE_FIELDS}
    # The tenant is checked here, as the context block checks it, whoever calls.
    require_scope(actor, USE_EXPERIENCE, exact["tenant"], message=USE_REFUSED)

    items = pipeline.answered(
        query,
        exact,
        now,
        lambda ranked: pipeline.scored(ranked.head(limit), ranked, now),
        ahead=limit,
    )
    # Claimed whatever was found, so a refusal never depends on what the scope holds.
    with transaction.atomic():
        run_claim(run_id=run_id, actor=actor, tenant=exact["tenant"], at=clock.now())
        if items:
            references_record(
                run_id=run_id,
                items=[(item["id"], ItemType(item["type"])) for item in items],
                at=clock.now(),
            )
    return {"status": OK, "missing": [], "items": items}


def ranked_items(
    query: str, scope: Mapping[str, str], now: datetime, lessons: Mapping[str, Recallable]
) -> list[tuple[str, str, str]]:
    """``(id, kind, title)`` of every item of ``scope`` past the gate that shares a token with
    ``query``, ranked as ``experience.core.domain.rank_items`` ranks their texts: cases, skills
    whose cited cases are usable, and the recallable ``lessons``."""

    def every(ranked: pipeline.Ranked) -> list[tuple[str, str, str]]:
        return [(hit.item_id, hit.kind, hit.title) for hit in ranked.head(MAX_HEAD)]

    return pipeline.answered(query, scope, now, every, ahead=0, lessons=lessons)


# Deeper than any scope holds items: the whole ranking.
MAX_HEAD = 1 << 40
