"""``retrieve_experience``: the retrieval pipeline (``experience.retrieval.pipeline``: gate,
candidates, ranking), the returned items with their confidence in the order of their fused score
(``experience.retrieval.order``), then one Reference per read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from experience.core.models import ItemType
from experience.index.postings import query_parsed
from experience.retrieval import pipeline, ranking
from experience.retrieval.order import BestFirst
from experience.retrieval.recall import Recallable
from experience.retrieval.request import Size, read_request_open, read_request_record
from reviewconsole.metrics import search_timed

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OK = "ok"
FALLBACK = "fallback"
DEFAULT_LIMIT = 3
MAX_LIMIT = 20
USE_REFUSED = "retrieving experience needs the agent or reviewer role"
LIMIT_INVALID = f"must be an integer from 1 to {MAX_LIMIT}"


@search_timed("experience")
def retrieve_experience(
    query: str,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: str,
    limit: int = DEFAULT_LIMIT,
    *,
    actor: User,
) -> dict[str, Any]:
    request = read_request_open(
        actor=actor,
        query=query,
        scope=scope,
        now=now,
        run_id=run_id,
        size=Size("limit", limit, 1, MAX_LIMIT, LIMIT_INVALID),
        refused=USE_REFUSED,
    )
    if not request.complete:
        return {"status": FALLBACK, "missing": list(request.missing), "items": []}
    exact = dict(request.scope)
    parsed = request.parsed
    assert parsed is not None  # a complete request is parsed

    def answer(ranked: pipeline.Ranked) -> tuple[list[dict[str, Any]], str]:
        best = BestFirst(ranked, now, parsed, explain=True).head(request.size)
        return [one.item for one in best], ranked.semantic

    items, semantic = pipeline.answered(
        parsed, exact, now, answer, ahead=ranking.first_depth(request.size) + 1
    )
    # Claimed whatever was found, so a refusal never depends on what the scope holds.
    read_request_record(request, [(item["id"], ItemType(item["type"])) for item in items])
    return {"status": OK, "missing": [], "items": items, **pipeline.semantic_note(semantic)}


def ranked_items(
    query: str, scope: Mapping[str, str], now: datetime, lessons: Mapping[str, Recallable]
) -> list[tuple[str, str, str]]:
    """``(id, kind, title)`` of every item of ``scope`` past the gate that shares a token with
    ``query``, ranked as ``experience.core.domain.rank_items`` ranks their texts: cases, skills
    whose cited cases are usable, and the recallable ``lessons``."""

    def every(ranked: pipeline.Ranked) -> list[tuple[str, str, str]]:
        return [(hit.item_id, hit.kind, hit.title) for hit in ranked.head(MAX_HEAD)]

    parsed = query_parsed(query)
    return pipeline.answered(parsed, scope, now, every, ahead=0, lessons=lessons)


# Deeper than any scope holds items: the whole ranking.
MAX_HEAD = 1 << 40
