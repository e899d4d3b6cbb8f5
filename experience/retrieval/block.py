"""``experience_context``: the prompt-ready block of reviewed experience for one exact scope.

Ranks the scope's approved cases, skills and lessons against the query as recall does (from
the retrieval index: only items sharing a token with the query are read), gives each its confidence, and hands them best first to the pure builder
(``experience.context``), which keeps only eligible items and cuts to the caller's token budget.
Every item the block includes is recorded as read under the run id (one ``Reference`` each), and
the caller is recorded as a reader of that run, which lets them report its outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.cases.selectors import gate_fields
from experience.core import domain
from experience.core.models import ItemType, Status
from experience.index import postings as experience_postings
from experience.lessons.models import Lesson
from experience.lessons.outcome_tallies import OutcomeBatch
from experience.retrieval import context
from experience.retrieval.recall import recallable_lessons, with_confidence
from experience.retrieval.service import MAX_QUERY, candidate_lessons, likely_returned, ranked_from
from experience.runs.claims import run_claim
from experience.runs.records import references_record, validate_run_id
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import USE_EXPERIENCE, require, require_scope

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


def _validate(query: object, budget: object, now: datetime) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailure("query", "must be a non-empty string")
    if len(query) > MAX_QUERY:
        raise ValidationFailure("query", f"must be at most {MAX_QUERY} characters")
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int)
        or not context.MIN_BUDGET <= budget <= context.MAX_BUDGET
    ):
        raise ValidationFailure("budget", BUDGET_INVALID)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValidationFailure("now", "must be timezone-aware")


# The columns the block and the gate read, by kind (the JSON content columns stay unread).
_GATE = ("status", *domain.SCOPE_FIELDS, "valid_from", "valid_to", "approved_at", "title")
_COLUMNS: dict[str, tuple[Any, tuple[str, ...]]] = {
    ItemType.CASE: (Case, (*_GATE, "summary", "search_text")),
    ItemType.SKILL: (Skill, (*_GATE, "when")),
    ItemType.LESSON: (Lesson, (*_GATE, "conclusion")),
}
# Ranked items are read and scored this many at a time, until the block is full.
CHUNK = 16


def _rows(ranked: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """``{id: (kind, item, title, text)}`` of the ranked items, read by kind."""
    read: dict[str, Any] = {}
    for kind, (model, columns) in _COLUMNS.items():
        ids = [item_id for item_id, item_kind, _title in ranked if item_kind == kind]
        if ids:
            read.update({item.pk: item for item in model.objects.filter(pk__in=ids).only(*columns)})
    rows: dict[str, Any] = {}
    for item_id, kind, _title in ranked:
        item = read[item_id]
        if kind == ItemType.CASE:
            rows[item_id] = (ItemType.CASE, item, item.title, item.summary or item.search_text)
        elif kind == ItemType.SKILL:
            rows[item_id] = (ItemType.SKILL, item, item.title, item.when)
        else:
            rows[item_id] = (ItemType.LESSON, item, item.title, item.conclusion)
    return rows


def _candidates(
    ranked: Sequence[tuple[str, str, str]],
    lessons: Mapping[str, Any],
    now: datetime,
    outcomes: OutcomeBatch,
) -> Iterator[context.Candidate]:
    """The ranked items as the builder's candidates, best first, read and scored a chunk at a
    time: the builder stops taking them when the budget is spent, and the rest is never read."""
    for start in range(0, len(ranked), CHUNK):
        chunk = ranked[start : start + CHUNK]
        rows = _rows(chunk)
        # The case rows just read hold what a case's confidence needs: no second read.
        read_cases = {
            i: (row[1].valid_from, row[1].valid_to, row[1].approved_at)
            for i, row in rows.items()
            if row[0] == ItemType.CASE and row[1].status == Status.APPROVED
        }
        scored = with_confidence(
            [{"id": i, "type": str(rows[i][0])} for i, _, _ in chunk],
            lessons,
            now,
            outcomes,
            read_cases,
        )
        for item in scored:
            _kind, read, title, text = rows[item["id"]]
            yield context.Candidate(
                id=item["id"],
                type=item["type"],
                title=title,
                text=text,
                gate=gate_fields(read),
                # The ranking kept only available items (a skill whose cited cases are usable,
                # a lesson with usable support); the builder checks the gate again.
                available=True,
                confidence=item["confidence"],
                conflict=bool(item.get("conflict")),
            )


def experience_context(
    query: str,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: str,
    budget: int,
    *,
    actor: User,
) -> dict[str, Any]:
    require(actor, USE_EXPERIENCE, message=USE_REFUSED)
    _validate(query, budget, now)
    run_id = validate_run_id(run_id)
    domain.given_scope_checked(scope)
    missing = domain.missing_scope(scope)
    if missing:
        empty = context.Block(text="", items=(), tokens=0, budget=budget).as_json()
        return {"status": FALLBACK, "missing": missing, **empty}
    exact = {name: str(scope[name]).strip() for name in domain.SCOPE_FIELDS}
    require_scope(actor, USE_EXPERIENCE, exact["tenant"], message=USE_REFUSED)

    found = experience_postings.candidates(exact, now, query)
    outcomes = OutcomeBatch(now, likely_returned(found, CHUNK))
    lessons = recallable_lessons(exact, now, outcomes, candidate_lessons(found))
    ranked = ranked_from(found, query, exact, now, lessons)
    candidates = _candidates(ranked, lessons, now, outcomes)
    block = context.build_block(
        candidates, scope=exact, now=now, budget=budget, threshold=context_threshold()
    )
    with transaction.atomic():
        run_claim(run_id=run_id, actor=actor, tenant=exact["tenant"], at=clock.now())
        if block.items:
            references_record(
                run_id=run_id,
                items=[(item.id, ItemType(item.type)) for item in block.items],
                at=clock.now(),
            )
    return {"status": OK, "missing": [], **block.as_json()}
