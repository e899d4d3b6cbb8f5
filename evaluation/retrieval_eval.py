"""``eval_retrieval``: a labelled query file asked of the retrievals agents use, scored.

Each query goes to the very service behind the API's route (``search_knowledge`` behind
``POST /knowledge/search``, ``retrieve_experience`` behind ``POST /experience/retrieve``), as the
acting account, twice: once with the vector branch off (``SEMANTIC_EMBEDDER=off`` for the calls
of that arm, in this process only) and once with the embedder the settings configure, over the
vectors ``reembed`` built (nothing is embedded here but the queries). Experience retrieval
records every read (it claims the run id and writes one reference per item returned), so every
query runs inside a transaction that is rolled back: the evaluation leaves no run, no read and
no tally behind. A knowledge search records nothing; it runs the same way.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from evaluation.retrieval_scores import (
    EXPERIENCE,
    LEXICAL,
    VECTOR,
    Query,
    Scored,
    arm_summary,
    line_field,
    scored,
)
from experience.retrieval.service import MAX_LIMIT as EXPERIENCE_MAX_LIMIT
from experience.retrieval.service import retrieve_experience
from knowledge.search import MAX_LIMIT as KNOWLEDGE_MAX_LIMIT
from knowledge.search import KnowledgeContext, search_knowledge
from reviewconsole.errors import PermissionRefused, ValidationFailure
from semantic import embedders
from semantic.branch import OFF, USED

if TYPE_CHECKING:
    from django.contrib.auth.models import User

DEFAULT_K = 3
DEFAULT_DEPTH = 10
MAX_DEPTH = min(KNOWLEDGE_MAX_LIMIT, EXPERIENCE_MAX_LIMIT)
# The fields of a returned item the report carries when the answer has them.
ITEM_FIELDS = ("found_by", "similarity", "relevance", "confidence")
NOT_INDEXED_REFUSAL = (
    "the vector branch did not search every item for {count} of {total} queries (semantic: "
    "{statuses}; first at line {line}): its figures would be lexical ones. Build the vectors with "
    "`manage.py reembed --wait`, or pass --allow-unindexed to report anyway"
)
EMBEDDER_OFF = (
    "the vector branch is off (SEMANTIC_EMBEDDER / CONSOLE_EMBEDDER=off): there is nothing to "
    "compare; pass --lexical-only for the lexical figures alone"
)


@contextmanager
def embedder_set(value: str) -> Iterator[None]:
    """``SEMANTIC_EMBEDDER`` is ``value`` for the calls inside (this process only), then
    restored: the switch ``semantic.embedders.enabled()`` reads."""
    missing = object()
    before = getattr(settings, "SEMANTIC_EMBEDDER", missing)
    settings.SEMANTIC_EMBEDDER = value
    try:
        yield
    finally:
        if before is missing:
            del settings.SEMANTIC_EMBEDDER
        else:
            settings.SEMANTIC_EMBEDDER = before


@dataclass(frozen=True)
class Answer:
    status: str
    semantic: str | None
    items: list[dict[str, Any]]

    @property
    def ids(self) -> list[str]:
        return [str(item["id"]) for item in self.items]


def asked(query: Query, actor: User, depth: int) -> Answer:
    """What the retrieval answers ``query`` as ``actor``, its records rolled back."""
    try:
        with transaction.atomic():
            if query.kind == EXPERIENCE:
                result = retrieve_experience(
                    query.text,
                    dict(query.scope),
                    query.times["now"],
                    f"eval-retrieval-{uuid.uuid4()}",
                    depth,
                    actor=actor,
                )
                items = result["items"]
            else:
                context = KnowledgeContext(
                    tenant=query.scope["tenant"],
                    brand=query.scope["brand"],
                    store=query.scope["store"],
                    campaign=query.scope["campaign"],
                    occurred_at=query.times["occurred_at"],
                    known_at=query.times["known_at"],
                    facts=dict(query.facts),
                    limit=depth,
                )
                result = search_knowledge(query.text, context, actor=actor)
                items = result["evidence"]
            # Nothing the read wrote (its run, its references) outlives it.
            transaction.set_rollback(True)
    except ValidationFailure as failure:
        raise ValidationFailure(line_field(query.line, failure.field), failure.message) from None
    except PermissionRefused as refusal:
        raise PermissionRefused(
            f"line {query.line}: {refusal.message}", unmet=refusal.unmet
        ) from None
    return Answer(str(result["status"]), result.get("semantic"), list(items))


def _item(item: dict[str, Any]) -> dict[str, Any]:
    return {"id": item["id"], **{name: item[name] for name in ITEM_FIELDS if name in item}}


@dataclass(frozen=True)
class ArmRun:
    name: str
    answers: list[Answer]
    scores: list[Scored]


def arm_run(name: str, queries: Sequence[Query], actor: User, *, k: int, depth: int) -> ArmRun:
    answers = [asked(query, actor, depth) for query in queries]
    return ArmRun(
        name, answers, [scored(q, a.ids, k) for q, a in zip(queries, answers, strict=True)]
    )


class NotIndexed(Exception):
    """The vector arm did not search every item of some query's scope."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def evaluation(
    queries: Sequence[Query],
    actor: User,
    *,
    k: int = DEFAULT_K,
    depth: int = DEFAULT_DEPTH,
    lexical_only: bool = False,
    allow_unindexed: bool = False,
) -> dict[str, Any]:
    """Both arms over ``queries`` and their scores (the ``--json`` shape of docs/contracts.md).

    Raises ``NotIndexed`` (its message says why) when the vector arm ran over a scope whose items
    are not all embedded with the configured model, unless ``allow_unindexed``: the report then
    carries the same sentence in ``warnings``."""
    configured = getattr(settings, "SEMANTIC_EMBEDDER", embedders.LOCAL)
    vector_on = embedders.enabled()
    if not lexical_only and not vector_on:
        raise NotIndexed(EMBEDDER_OFF)
    runs = []
    with embedder_set(embedders.OFF):
        runs.append(arm_run(LEXICAL, queries, actor, k=k, depth=depth))
    model = None
    warnings: list[str] = []
    if not lexical_only:
        with embedder_set(configured):
            try:
                embedder = embedders.configured()
            except embedders.EmbedderUnavailable as error:
                raise NotIndexed(f"the embedder is unavailable: {error}") from None
            model = embedder.name if embedder is not None else None
            runs.append(arm_run(VECTOR, queries, actor, k=k, depth=depth))
        vector = runs[-1]
        short = [
            (query, answer.semantic)
            for query, answer in zip(queries, vector.answers, strict=True)
            if answer.semantic not in (USED, None)
        ]
        if short:
            message = NOT_INDEXED_REFUSAL.format(
                count=len(short),
                total=len(queries),
                statuses=", ".join(
                    f"{status} {n}" for status, n in sorted(Counter(s for _, s in short).items())
                ),
                line=short[0][0].line,
            )
            if not allow_unindexed:
                raise NotIndexed(message)
            warnings.append(message)
    return {
        "ok": True,
        "k": k,
        "depth": depth,
        "queries": len(queries),
        "paraphrases": sum(1 for q in queries if not q.nothing),
        "nothing": sum(1 for q in queries if q.nothing),
        "arms": [run.name for run in runs],
        "embedder": model,
        "summary": {
            run.name: {
                **arm_summary(list(zip(queries, run.scores, strict=True))),
                "semantic": dict(sorted(Counter(a.semantic or OFF for a in run.answers).items())),
            }
            for run in runs
        },
        "results": [
            {
                "line": query.line,
                "id": query.id,
                "kind": query.kind,
                "query": query.text,
                "language": query.language,
                "answer_language": query.answer_language,
                "pair": query.pair,
                "expected": list(query.expected),
                **{
                    run.name: {
                        "status": run.answers[index].status,
                        "semantic": run.answers[index].semantic,
                        "returned": [_item(item) for item in run.answers[index].items],
                        "rank": run.scores[index].rank,
                        "found_at_k": run.scores[index].found_at_k,
                    }
                    for run in runs
                },
            }
            for index, query in enumerate(queries)
        ],
        "warnings": warnings,
    }
