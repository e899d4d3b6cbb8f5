"""Replaying a ticket set against the database's memory, leaving that database as it was.

Every arm of every ticket runs inside a savepoint that is rolled back: the References, Runs and
audit events the real tools write while the investigator uses them never outlive the arm. So
the with-memory arm cannot see what the without-memory arm did, one ticket cannot see another,
and revocation impact lists keep naming real investigations only.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from evaluation.domain import (
    CALL_BUDGET,
    CURRENT,
    WITH,
    WITHOUT,
    BranchPair,
    Investigation,
    Score,
    Ticket,
    TicketSet,
    branch_comparison,
    paired_calls_to_cause,
    parse_ticket_set,
    score,
    ticket_as_json,
    totals,
    wrong_causes_from_memory,
)
from evaluation.investigator import investigate
from evaluation.retrieval_eval import embedder_set
from evaluation.selectors import heldout_check
from experience.cases.executor import run_skill
from experience.cases.models import Case
from experience.cases.schema import TicketContext
from experience.retrieval.block import experience_context
from experience.retrieval.request import MAX_QUERY
from experience.retrieval.service import retrieve_experience
from investigations.domain import CONTEXT_BUDGET, Provider
from knowledge.search import KnowledgeContext, search_knowledge
from reviewconsole.cli import read_json_file
from reviewconsole.errors import ValidationFailure
from reviewconsole.services import system_agent
from semantic import embedders

VECTOR_BRANCH_OFF = (
    "the vector branch is off (SEMANTIC_EMBEDDER / CONSOLE_EMBEDDER=off): there is no branch to "
    "compare the lexical search with"
)


def load_ticket_set(path: str) -> TicketSet:
    """Read and validate a ticket-set file; errors name ``FILE`` or the JSON path."""
    return parse_ticket_set(read_json_file(path))


class DatabaseTools:
    """The investigator's tools bound to the real services, under one replay run id."""

    def __init__(self, run_id: str, semantic: Counter[str] | None = None) -> None:
        self.run_id = run_id
        self.actor = system_agent()
        # What the vector branch did in each search and context block (its ``semantic``
        # status), when the caller counts it.
        self.semantic = semantic

    def _searched(self, answer: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.semantic is not None:
            self.semantic[str(answer.get("semantic") or embedders.OFF)] += 1
        return answer

    def experience_context(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]:
        return self._searched(
            experience_context(
                query[:MAX_QUERY], scope, now, self.run_id, CONTEXT_BUDGET, actor=self.actor
            )
        )

    def retrieve_experience(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]:
        return retrieve_experience(query, scope, now, self.run_id, actor=self.actor)

    def run_skill(
        self,
        skill_id: str,
        scope: Mapping[str, str],
        *,
        occurred_at: datetime,
        known_at: datetime,
        facts: Mapping[str, object],
        now: datetime,
    ) -> Mapping[str, Any]:
        context = TicketContext(occurred_at=occurred_at, known_at=known_at, facts=dict(facts))
        return run_skill(skill_id, scope, context, self.run_id, now, actor=self.actor).as_json()

    def read_case(self, case_id: str) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = (
            Case.objects.filter(pk=case_id)
            .values("id", "title", "diagnosis", "counterevidence")
            .first()
        )
        return found

    def search_knowledge(
        self,
        query: str,
        scope: Mapping[str, str],
        *,
        occurred_at: datetime,
        known_at: datetime,
        facts: Mapping[str, object],
    ) -> Mapping[str, Any]:
        return self._searched(
            search_knowledge(
                query,
                KnowledgeContext(
                    tenant=scope["tenant"],
                    brand=scope["brand"],
                    store=scope["store"],
                    campaign=scope["campaign"],
                    occurred_at=occurred_at,
                    known_at=known_at,
                    facts=dict(facts),
                ),
                actor=self.actor,
            )
        )


@dataclass(frozen=True)
class MemoryEvent:
    """A change to the memory at a point of the replay's timeline (e.g. a revocation)."""

    at: datetime
    description: str
    apply: Callable[[], None]


@dataclass(frozen=True)
class TicketResult:
    ticket: Ticket
    with_memory: Investigation
    without_memory: Investigation
    # The arm with memory again with the vector branch off, when the replay compares branches,
    # and what the vector branch did in the searches of the arm with memory (``semantic``).
    lexical_memory: Investigation | None = None
    semantic: Mapping[str, int] = field(default_factory=dict)

    @property
    def scores(self) -> tuple[Score, Score]:
        truth = self.ticket.truth
        return score(self.with_memory, truth), score(self.without_memory, truth)


def _arm(
    ticket: Ticket,
    index: int,
    *,
    with_memory: bool,
    provider: Provider | None = None,
    semantic: Counter[str] | None = None,
) -> Investigation:
    # A run of its own, whatever another account or tenant names its runs
    # (experience.runs.claims); the arm's writes, its claim included, are rolled back.
    arm = "with" if with_memory else "without"
    run_id = f"replay-{index:04d}-{arm}-{uuid.uuid4().hex[:16]}"
    with transaction.atomic():
        investigation = investigate(
            ticket, DatabaseTools(run_id, semantic), with_memory=with_memory, provider=provider
        )
        transaction.set_rollback(True)
    return investigation


def replay_tickets(
    ticket_set: TicketSet,
    *,
    timeline: Sequence[MemoryEvent] = (),
    provider: Provider | None = None,
    compare_branches: bool = False,
) -> list[TicketResult]:
    """Both arms of every ticket, in the order the tickets became known.

    A timeline event applies before the first ticket known at or after its time; events are
    the only writes that stay, and only as long as the caller's transaction does. With
    ``compare_branches``, the arm with memory runs a third time, with the vector branch off
    (``SEMANTIC_EMBEDDER=off`` in this process for that arm only), over the same memory, and
    what the vector branch did in each search of the arm with memory is counted.
    """
    pending = sorted(timeline, key=lambda event: event.at)
    order = sorted(range(len(ticket_set.tickets)), key=lambda i: ticket_set.tickets[i].known_at)
    results: dict[int, TicketResult] = {}
    for index in order:
        ticket = ticket_set.tickets[index]
        while pending and pending[0].at <= ticket.known_at:
            pending.pop(0).apply()
        lexical, semantic = None, Counter[str]()
        if compare_branches:
            with embedder_set(embedders.OFF):
                lexical = _arm(ticket, index, with_memory=True, provider=provider)
        results[index] = TicketResult(
            ticket=ticket,
            with_memory=_arm(
                ticket,
                index,
                with_memory=True,
                provider=provider,
                semantic=semantic if compare_branches else None,
            ),
            without_memory=_arm(ticket, index, with_memory=False, provider=provider),
            lexical_memory=lexical,
            semantic=dict(semantic),
        )
    return [results[index] for index in range(len(ticket_set.tickets))]


def _arm_json(investigation: Investigation, one: Score) -> dict[str, Any]:
    return {
        "counts": one.counts(),
        "missed_checks": list(one.missed_checks),
        "necessary_followups": list(one.necessary_followups),
        "unnecessary_followups": list(one.unnecessary_followups),
        "claim": investigation.claim,
        "outcome": investigation.outcome,
        "checks": list(investigation.checks),
        "questions": list(investigation.questions),
        "calls": dict(investigation.calls),
        "calls_to_cause": one.calls_to_cause,
        "steps": [step.as_json() for step in investigation.steps],
    }


def results_json(
    ticket_set: TicketSet,
    results: Sequence[TicketResult],
    *,
    memory: str,
    memory_notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The report of a replay: totals, totals per situation, and every ticket's two arms; when
    the replay compared branches, ``branches`` too (``branches_json``)."""
    tickets = []
    situations: dict[str, dict[str, Any]] = {}
    all_with: list[Score] = []
    all_without: list[Score] = []
    both: list[tuple[Score, Score]] = []
    for result in results:
        with_score, without_score = result.scores
        all_with.append(with_score)
        all_without.append(without_score)
        both.append((with_score, without_score))
        group = situations.setdefault(result.ticket.situation, {WITH: [], WITHOUT: []})
        group[WITH].append(with_score)
        group[WITHOUT].append(without_score)
        tickets.append(
            {
                **ticket_as_json(result.ticket),
                WITH: _arm_json(result.with_memory, with_score),
                WITHOUT: _arm_json(result.without_memory, without_score),
            }
        )
    report: dict[str, Any] = {
        "set": {
            "name": ticket_set.name,
            "description": ticket_set.description,
            "hash": ticket_set.content_hash,
            "tickets": len(ticket_set.tickets),
        },
        "memory": memory,
        "memory_notes": list(memory_notes),
        "totals": {WITH: totals(all_with), WITHOUT: totals(all_without)},
        "calls_to_cause": {
            "unfound_counts_as": CALL_BUDGET,
            "paired": paired_calls_to_cause(both),
        },
        "wrong_causes_from_memory": wrong_causes_from_memory(both),
        "situations": [
            {
                "situation": name,
                "tickets": len(group[WITH]),
                WITH: totals(group[WITH]),
                WITHOUT: totals(group[WITHOUT]),
                # Like for like: over the situation's tickets whose cause both arms established.
                "calls_to_cause_paired": paired_calls_to_cause(
                    zip(group[WITH], group[WITHOUT], strict=True)
                ),
            }
            for name, group in situations.items()
        ],
        "tickets": tickets,
    }
    if any(result.lexical_memory is not None for result in results):
        report["branches"] = branches_json(results)
    return report


def branches_json(results: Sequence[TicketResult]) -> dict[str, Any]:
    """The arm with memory lexical only against with the vector branch (``branch_comparison``),
    with the embedder compared and what its branch did in the searches of the vector arm, over
    all and per ticket (a search whose scope has no vector, ``not_indexed``, compared nothing)."""
    compared = [result for result in results if result.lexical_memory is not None]
    pairs = [
        BranchPair(result.ticket, result.lexical_memory, result.with_memory)
        for result in compared
        if result.lexical_memory is not None
    ]
    semantic: Counter[str] = Counter()
    for result in compared:
        semantic.update(result.semantic)
    comparison = branch_comparison(pairs)
    for entry, result in zip(comparison["tickets"], compared, strict=True):
        entry["semantic"] = dict(sorted(result.semantic.items()))
    return {
        "embedder": str(getattr(settings, "SEMANTIC_EMBEDDER", embedders.LOCAL)),
        "semantic": dict(sorted(semantic.items())),
        **comparison,
    }


def vector_branch_required() -> None:
    """Refuse a comparison of branches when the vector branch is off: there is none to compare."""
    if not embedders.enabled():
        raise ValidationFailure("--compare-branches", VECTOR_BRANCH_OFF)


def event_note(event: MemoryEvent) -> str:
    return f"{event.at.isoformat()}: {event.description}"


def replay_current(
    ticket_set: TicketSet, *, provider: Provider | None = None, compare_branches: bool = False
) -> dict[str, Any]:
    """Replay against this database's memory; everything the replay wrote is rolled back.

    With a provider, each arm goes through the investigation runner (``evaluation.investigator``).
    With ``compare_branches``, the arm with memory also runs lexical only (``replay_tickets``).
    """
    with transaction.atomic():
        heldout_check(ticket_set)
        results = replay_tickets(ticket_set, provider=provider, compare_branches=compare_branches)
        transaction.set_rollback(True)
    return results_json(
        ticket_set,
        results,
        memory=CURRENT,
        memory_notes=["this database's memory as it is now, rolled back after the replay"],
    )
