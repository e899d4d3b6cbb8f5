"""``experience_context``: the prompt-ready block of reviewed experience for one exact scope.

Runs the retrieval pipeline (``experience.retrieval.pipeline``: gate, candidates, ranking) as
``retrieve_experience`` does, then takes the items best first by their fused score
(``experience.retrieval.order``: relevance, confidence, scene match) a chunk at a time, reads
their texts and hands them to the pure builder (``experience.retrieval.context``), which keeps
only eligible items and cuts to the caller's token budget; ranking goes no deeper than the
chunks it takes need.
Every item the block includes is recorded as read under the run id (one ``Reference`` each), and
the caller is recorded as a reader of that run, which lets them report its outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from experience.core import domain
from experience.core.models import ItemType, Status
from experience.index import postings
from experience.retrieval import context, pipeline, ranking
from experience.retrieval.order import BestFirst
from experience.retrieval.request import Size, read_request_open, read_request_record
from textsearch.domain import GateFields

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OK = "ok"
FALLBACK = "fallback"
USE_REFUSED = "the context block needs the agent or reviewer role"
BUDGET_INVALID = f"must be an integer from {context.MIN_BUDGET} to {context.MAX_BUDGET}"
# A fresh case of one reviewed incident with nothing against it scores 0.5 (the Wilson lower
# bound of 1 of 1 at z = 1); 0.3 keeps it for about four months of the half-life decay unless a
# run outcome confirms or refutes it.
DEFAULT_THRESHOLD = 0.3


def context_threshold() -> float:
    return float(getattr(settings, "CONTEXT_CONFIDENCE_THRESHOLD", DEFAULT_THRESHOLD))


# Ranked items are read and scored a chunk at a time, until the block is full: as many as the
# budget holds at a short line (an item's head alone, its id and confidence, is about 25
# tokens), from MIN_CHUNK to MAX_CHUNK. Reading fewer costs a statement more per chunk; more,
# items ranked, read and scored for nothing.
SHORT_LINE_TOKENS = 64
MIN_CHUNK = 4
MAX_CHUNK = 32


def chunk_size(budget: int) -> int:
    return max(MIN_CHUNK, min(MAX_CHUNK, budget // SHORT_LINE_TOKENS))


@dataclass(frozen=True)
class _Item:
    gate: GateFields
    title: str
    text: str


def _items(hits: Sequence[pipeline.Hit], scope: Mapping[str, str]) -> dict[str, _Item]:
    """The gate fields, title and text of each hit: from the index entry that ranked it (an
    indexed item is approved, of the scope's index, with the entry's gate times), else read from
    the items (one statement per kind)."""
    read: dict[str, _Item] = {}
    for hit in hits:
        if hit.entry is not None:
            valid_from, valid_to, approved_at = hit.entry.gate_times()
            # Every index hit is of the caller's exact scope: they share its mapping, which
            # the builder's scope check then finds at once (``domain.same_scope``).
            gate = GateFields(Status.APPROVED, scope, valid_from, valid_to, approved_at)
            read[hit.item_id] = _Item(gate, hit.entry.title, hit.entry.block_text)
    for kind in postings.KINDS.values():
        ids = [hit.item_id for hit in hits if hit.kind == kind.name and hit.item_id not in read]
        if not ids:
            continue
        columns = ("status", *domain.SCOPE_FIELDS, "valid_from", "valid_to", "approved_at")
        rows = kind.model().objects.filter(pk__in=ids)
        for item_id, status, *rest in rows.values_list(
            "pk", *columns, "title", *kind.brief_columns
        ):
            scope_row = rest[: len(domain.SCOPE_FIELDS)]
            valid_from, valid_to, approved_at, title = rest[len(scope_row) : len(scope_row) + 4]
            gate = GateFields(
                status,
                dict(zip(domain.SCOPE_FIELDS, scope_row, strict=True)),
                valid_from,
                valid_to,
                approved_at,
            )
            read[item_id] = _Item(gate, title, kind.brief_of(rest[len(scope_row) + 4 :]))
    return read


def _candidates(
    best: BestFirst, scope: Mapping[str, str], chunk_of: int
) -> Iterator[context.Candidate]:
    """The items best first as the builder's candidates, read a chunk at a time: the builder
    stops taking them when the budget is spent, and the rest is never read (nor ranked further
    than the chunks taken need)."""
    taken = 0
    while True:
        chunk = best.head(taken + chunk_of)[taken:]
        if not chunk:
            return
        taken += len(chunk)
        read = _items([one.hit for one in chunk], scope)
        for one in chunk:
            row = read[one.hit.item_id]
            yield context.Candidate(
                id=one.item["id"],
                type=one.item["type"],
                title=row.title,
                text=row.text,
                gate=row.gate,
                # The ranking kept only available items (a skill whose cited cases are usable,
                # a lesson with usable support); the builder checks the gate again.
                available=True,
                confidence=one.item["confidence"],
                conflict=bool(one.item.get("conflict")),
                relevance=one.hit.relevance,
                found_by=one.hit.found_by,
            )
        if len(chunk) < chunk_of:
            return


def experience_context(
    query: str,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: str,
    budget: int,
    *,
    actor: User,
) -> dict[str, Any]:
    request = read_request_open(
        actor=actor,
        query=query,
        scope=scope,
        now=now,
        run_id=run_id,
        size=Size("budget", budget, context.MIN_BUDGET, context.MAX_BUDGET, BUDGET_INVALID),
        refused=USE_REFUSED,
    )
    if not request.complete:
        empty = context.Block(text="", items=(), tokens=0, budget=request.size).as_json()
        return {"status": FALLBACK, "missing": list(request.missing), **empty}
    exact = dict(request.scope)

    threshold = context_threshold()
    chunk_of = chunk_size(request.size)
    parsed = request.parsed
    assert parsed is not None  # a complete request is parsed
    block, semantic = pipeline.answered(
        parsed,
        exact,
        now,
        lambda ranked: (
            context.build_block(
                _candidates(BestFirst(ranked, now, parsed, explain=False), exact, chunk_of),
                scope=exact,
                now=now,
                budget=request.size,
                threshold=threshold,
            ),
            ranked.semantic,
        ),
        ahead=ranking.first_depth(chunk_of) + 1,
    )
    read_request_record(
        request, [(item.id, ItemType(item.type)) for item in block.items], in_block=True
    )
    return {"status": OK, "missing": [], **block.as_json(), **pipeline.semantic_note(semantic)}
