"""Held-out replay evaluation, the pure part: the ticket-set format, citations and the counting.

No Django imports. A ticket set is validated into frozen values with every error naming its JSON
path; an investigation (what one arm of the replay did) is scored against the ticket's ground
truth by plain functions, so the counts can be tested on hand-made tickets with known answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from experience.core.domain import validate_scope
from knowledge.domain import sha256_hex
from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import json_path, reject_unknown_fields
from reviewconsole.runids import validate_run_id
from reviewconsole.timeparse import parse_aware_datetime, to_utc_iso

FORMAT = "heldout-tickets/1"

# Memory a set is replayed against: the shipped demo memory on a temporary database, or the
# memory of the configured database.
DEMO = "demo"
CURRENT = "current"
MEMORIES = (DEMO, CURRENT)

# Check names: what kind of check, then what it looks at.
KNOWLEDGE = "knowledge"
CONFIRM = "confirm"
CONFIG = "config"
CHECK_NAME = re.compile(r"(knowledge|confirm|config):[a-z0-9][a-z0-9_-]{0,63}")
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
FACT_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

# The one check and the one cause the knowledge base itself can support: a rule mismatch means
# the rules do not cover the purchase (docs/contracts.md, Statuses).
CAMPAIGN_RULES_CHECK = "knowledge:campaign-rules"
RULES_EXCLUDE_PURCHASE = "rules-exclude-purchase"
# The follow-up that asks the customer to refresh, sign in again and retry.
CLIENT_RETRY = "confirm:client-retry"
WORKS_NOW = "works_now"
STILL_FAILING = "still_failing"
CLIENT_RETRY_REPLIES = (WORKS_NOW, STILL_FAILING)

MAX_TICKETS = 1_000
MAX_TEXT = 2_000
MAX_TICKET_ID = 200
MAX_RUN_IDS = 20
MAX_NAME = 64
MAX_DESCRIPTION = 2_000
MAX_FAULT = 500
# Integers beyond this lose precision in JSON readers (and in canonical JSON).
MAX_FACT_INT = 2**53 - 1

SET_FIELDS = frozenset({"format", "name", "description", "memory", "tickets"})
TICKET_FIELDS = frozenset(
    {"id", "run_ids", "situation", "text", "scope", "context", "answers", "truth"}
)
CONTEXT_FIELDS = frozenset({"occurred_at", "known_at", "facts"})
ANSWER_FIELDS = frozenset({"facts", "client_retry", "checks"})
FINDING_FIELDS = frozenset({"fault", "cause"})
TRUTH_FIELDS = frozenset({"required_checks", "cause", "followups"})

NOT_A_FIELD = "is not a field here"
REQUIRED = "is required"
NOT_AN_OBJECT = "must be a JSON object"
NOT_A_LIST = "must be a JSON array"
WRONG_FORMAT = f'must be "{FORMAT}"'
BAD_MEMORY = "must be " + " or ".join(f'"{m}"' for m in MEMORIES)
BAD_SLUG = "must be 1-64 lower-case letters, digits or - starting with a letter or digit"
BAD_CHECK = "must look like knowledge:NAME, confirm:NAME or config:NAME (lower-case)"
BAD_TICKET_ID = "must be 1-200 characters without spaces or control characters"
BAD_FACT_NAME = "fact names are lower-case identifiers"
BAD_FACT_VALUE = "must be a string or an integer"
DUPLICATE = "repeats"
KNOWN_BEFORE_OCCURRED = "must not be before occurred_at"
FOLLOWUP_NOT_QUESTION = "must be a confirm:NAME question"
FOLLOWUP_NOT_REQUIRED = "a necessary follow-up question must also be listed in required_checks"
FINDING_NOT_CONFIG = "only config:NAME checks read configuration"
EMPTY_SET = "must hold at least one ticket"


# --- the ticket-set format -------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """What reading one piece of live configuration shows: a fault, and the cause it supports."""

    fault: str
    cause: str


@dataclass(frozen=True)
class Answers:
    """The world the investigator talks to: the customer's replies and the live configuration.

    The investigator learns these only by asking or by reading a configuration; it never sees
    the ground truth.
    """

    facts: Mapping[str, object] = field(default_factory=dict)
    client_retry: str | None = None
    checks: Mapping[str, Finding] = field(default_factory=dict)


@dataclass(frozen=True)
class Truth:
    required_checks: tuple[str, ...]
    cause: str | None
    followups: tuple[str, ...]


@dataclass(frozen=True)
class Ticket:
    id: str
    run_ids: tuple[str, ...]
    situation: str
    text: str
    scope: Mapping[str, str]
    occurred_at: datetime
    known_at: datetime
    facts: Mapping[str, object]
    answers: Answers
    truth: Truth


@dataclass(frozen=True)
class TicketSet:
    name: str
    description: str
    memory: str
    tickets: tuple[Ticket, ...]
    content_hash: str

    @property
    def ticket_ids(self) -> tuple[str, ...]:
        return tuple(ticket.id for ticket in self.tickets)

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(run_id for ticket in self.tickets for run_id in ticket.run_ids)

    @property
    def tenant(self) -> str:
        """The tenant the set (its tickets, and its reports) belongs to."""
        return set_tenant(ticket.scope["tenant"] for ticket in self.tickets)


def set_tenant(tenants: Iterable[str]) -> str:
    """The one tenant of a set's tickets; empty when they span tenants (or there are none): such
    a set and its reports are for deployment-wide users only."""
    distinct = set(tenants)
    return distinct.pop() if len(distinct) == 1 else ""


def _object(value: object, path: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValidationFailure(path, NOT_AN_OBJECT)
    reject_unknown_fields(value, allowed, path, NOT_A_FIELD)
    return value


def _required(obj: Mapping[str, Any], name: str, path: str) -> Any:
    if name not in obj:
        raise ValidationFailure(json_path(path, name), REQUIRED)
    return obj[name]


def _text(value: object, path: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailure(path, "must be a non-empty string")
    if len(value) > limit:
        raise ValidationFailure(path, f"must be at most {limit} characters (got {len(value)})")
    return value.strip()


def _slug(value: object, path: str) -> str:
    if not isinstance(value, str) or not SLUG.fullmatch(value):
        raise ValidationFailure(path, BAD_SLUG)
    return value


def _list(value: object, path: str, *, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationFailure(path, NOT_A_LIST)
    if len(value) > limit:
        raise ValidationFailure(path, f"must have at most {limit} items")
    return value


def check_name(value: object, path: str) -> str:
    if not isinstance(value, str) or not CHECK_NAME.fullmatch(value):
        raise ValidationFailure(path, BAD_CHECK)
    return value


def check_kind(name: str) -> str:
    return name.partition(":")[0]


def _unique(values: Sequence[str], path: str) -> None:
    seen: dict[str, int] = {}
    for i, value in enumerate(values):
        if value in seen:
            raise ValidationFailure(f"{path}[{i}]", f"{DUPLICATE} {path}[{seen[value]}]")
        seen[value] = i


def _facts(value: object, path: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ValidationFailure(path, NOT_AN_OBJECT)
    clean: dict[str, object] = {}
    for name, fact in value.items():
        if not isinstance(name, str) or not FACT_NAME.fullmatch(name):
            raise ValidationFailure(json_path(path, str(name)), BAD_FACT_NAME)
        if isinstance(fact, bool) or not isinstance(fact, (str, int)):
            raise ValidationFailure(json_path(path, name), BAD_FACT_VALUE)
        if isinstance(fact, int) and abs(fact) > MAX_FACT_INT:
            raise ValidationFailure(json_path(path, name), f"must be within ±{MAX_FACT_INT}")
        if isinstance(fact, str) and not fact.strip():
            raise ValidationFailure(json_path(path, name), "must not be empty")
        clean[name] = fact
    return clean


def _ticket_id(value: object, path: str) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_TICKET_ID
        or any(ch.isspace() or ord(ch) < 32 for ch in value)
    ):
        raise ValidationFailure(path, BAD_TICKET_ID)
    return value


def _run_ids(value: object, path: str) -> tuple[str, ...]:
    items = _list(value, path, limit=MAX_RUN_IDS)
    if not items:
        raise ValidationFailure(path, "must name at least one run of this ticket")
    for i, run_id in enumerate(items):
        validate_run_id(run_id, field=f"{path}[{i}]")
    _unique(items, path)
    return tuple(items)


def _answers(value: object, path: str) -> Answers:
    obj = _object(value, path, ANSWER_FIELDS)
    facts = _facts(obj.get("facts", {}), json_path(path, "facts"))
    retry = obj.get("client_retry")
    if retry is not None and retry not in CLIENT_RETRY_REPLIES:
        raise ValidationFailure(
            json_path(path, "client_retry"), " or ".join(f'"{r}"' for r in CLIENT_RETRY_REPLIES)
        )
    checks_path = json_path(path, "checks")
    raw_checks = obj.get("checks", {})
    if not isinstance(raw_checks, dict):
        raise ValidationFailure(checks_path, NOT_AN_OBJECT)
    checks: dict[str, Finding] = {}
    for name, finding in raw_checks.items():
        finding_path = json_path(checks_path, str(name))
        check_name(name, finding_path)
        if check_kind(name) != CONFIG:
            raise ValidationFailure(finding_path, FINDING_NOT_CONFIG)
        found = _object(finding, finding_path, FINDING_FIELDS)
        checks[name] = Finding(
            fault=_text(
                _required(found, "fault", finding_path), f"{finding_path}.fault", MAX_FAULT
            ),
            cause=_slug(_required(found, "cause", finding_path), f"{finding_path}.cause"),
        )
    return Answers(facts=facts, client_retry=retry, checks=checks)


def _truth(value: object, path: str) -> Truth:
    obj = _object(value, path, TRUTH_FIELDS)
    required_path = json_path(path, "required_checks")
    required = _list(_required(obj, "required_checks", path), required_path, limit=50)
    for i, name in enumerate(required):
        check_name(name, f"{required_path}[{i}]")
    _unique(required, required_path)
    cause = _required(obj, "cause", path)
    if cause is not None:
        cause = _slug(cause, json_path(path, "cause"))
    followups_path = json_path(path, "followups")
    followups = _list(_required(obj, "followups", path), followups_path, limit=50)
    for i, name in enumerate(followups):
        check_name(name, f"{followups_path}[{i}]")
        if check_kind(name) != CONFIRM:
            raise ValidationFailure(f"{followups_path}[{i}]", FOLLOWUP_NOT_QUESTION)
        if name not in required:
            raise ValidationFailure(f"{followups_path}[{i}]", FOLLOWUP_NOT_REQUIRED)
    _unique(followups, followups_path)
    return Truth(required_checks=tuple(required), cause=cause, followups=tuple(followups))


def _ticket(value: object, path: str) -> Ticket:
    obj = _object(value, path, TICKET_FIELDS)
    context_path = json_path(path, "context")
    context = _object(_required(obj, "context", path), context_path, CONTEXT_FIELDS)
    occurred_at = parse_aware_datetime(
        _required(context, "occurred_at", context_path), field=f"{context_path}.occurred_at"
    )
    known_at = parse_aware_datetime(
        _required(context, "known_at", context_path), field=f"{context_path}.known_at"
    )
    if known_at < occurred_at:
        raise ValidationFailure(f"{context_path}.known_at", KNOWN_BEFORE_OCCURRED)
    return Ticket(
        id=_ticket_id(_required(obj, "id", path), json_path(path, "id")),
        run_ids=_run_ids(_required(obj, "run_ids", path), json_path(path, "run_ids")),
        situation=_slug(_required(obj, "situation", path), json_path(path, "situation")),
        text=_text(_required(obj, "text", path), json_path(path, "text"), MAX_TEXT),
        scope=validate_scope(_required(obj, "scope", path), field=json_path(path, "scope")),
        occurred_at=occurred_at,
        known_at=known_at,
        facts=_facts(context.get("facts", {}), f"{context_path}.facts"),
        answers=_answers(obj.get("answers", {}), json_path(path, "answers")),
        truth=_truth(_required(obj, "truth", path), json_path(path, "truth")),
    )


def parse_ticket_set(value: object) -> TicketSet:
    """Validate a held-out ticket set; a failure names the JSON path of the first problem."""
    if not isinstance(value, dict):
        raise ValidationFailure("$", NOT_AN_OBJECT)
    obj = _object(value, "", SET_FIELDS)
    if _required(obj, "format", "") != FORMAT:
        raise ValidationFailure("format", WRONG_FORMAT)
    name = _slug(_required(obj, "name", ""), "name")
    description = (
        _text(obj["description"], "description", MAX_DESCRIPTION) if "description" in obj else ""
    )
    memory = obj.get("memory", CURRENT)
    if memory not in MEMORIES:
        raise ValidationFailure("memory", BAD_MEMORY)
    raw = _list(_required(obj, "tickets", ""), "tickets", limit=MAX_TICKETS)
    if not raw:
        raise ValidationFailure("tickets", EMPTY_SET)
    tickets = tuple(_ticket(item, f"tickets[{i}]") for i, item in enumerate(raw))

    first_id: dict[str, int] = {}
    first_run: dict[str, tuple[int, int]] = {}
    for i, ticket in enumerate(tickets):
        if ticket.id in first_id:
            raise ValidationFailure(
                f"tickets[{i}].id", f"{DUPLICATE} tickets[{first_id[ticket.id]}].id"
            )
        first_id[ticket.id] = i
        for j, run_id in enumerate(ticket.run_ids):
            if run_id in first_run:
                at, at_j = first_run[run_id]
                raise ValidationFailure(
                    f"tickets[{i}].run_ids[{j}]", f"{DUPLICATE} tickets[{at}].run_ids[{at_j}]"
                )
            first_run[run_id] = (i, j)
    return TicketSet(
        name=name,
        description=description,
        memory=memory,
        tickets=tickets,
        # The file as written, canonicalised (RFC 8785): equal sets give equal hashes.
        content_hash=sha256_hex(value),
    )


def ticket_as_json(ticket: Ticket) -> dict[str, Any]:
    return {
        "id": ticket.id,
        "run_ids": list(ticket.run_ids),
        "situation": ticket.situation,
        "text": ticket.text,
        "scope": dict(ticket.scope),
        "occurred_at": to_utc_iso(ticket.occurred_at),
        "known_at": to_utc_iso(ticket.known_at),
        "facts": dict(ticket.facts),
        "truth": {
            "required_checks": list(ticket.truth.required_checks),
            "cause": ticket.truth.cause,
            "followups": list(ticket.truth.followups),
        },
    }


# --- citations -------------------------------------------------------------------------------

# A source id cites a ticket when it is the ticket's id or goes on from it after one of these:
# ``thread://t-7#m3`` (a message), ``thread://t-7/attachments/2``, ``thread://t-7?part=2``.
CITATION_SEPARATORS = ("#", "/", "?")


def cites(source_id: str, target: str) -> bool:
    """Whether ``source_id`` points at ``target`` or at a part of it."""
    return source_id == target or any(
        source_id.startswith(target + separator) for separator in CITATION_SEPARATORS
    )


def citation_targets(source_id: str) -> frozenset[str]:
    """Every id that ``source_id`` cites: itself and each prefix ending before a separator.

    ``cites(s, t)`` holds exactly when ``t in citation_targets(s)``, which lets a database find
    the held-out tickets a case cites with one ``IN`` query.
    """
    targets = {source_id}
    for i, ch in enumerate(source_id):
        if ch in CITATION_SEPARATORS and i > 0:
            targets.add(source_id[:i])
    return frozenset(targets)


# --- scoring ---------------------------------------------------------------------------------

# How an investigation ended.
CLAIMED = "claimed"
RESOLVED_UNEXPLAINED = "resolved_unexplained"
AWAITING_CUSTOMER = "awaiting_customer"
ESCALATED = "escalated"

# The two arms of a replay.
WITH = "with_memory"
WITHOUT = "without_memory"

# Kinds of tool call, counted separately so memory's own cost stays visible.
CALL_KINDS = ("memory", "skill", "knowledge", "config")
# The tool calls one investigation of a ticket may make (the runner's budget in a replay). Calls
# to the true cause are counted up to the call that established it; an arm that never
# establishes it is counted at this budget, as if it had spent every call without finding it.
CALL_BUDGET = 8


@dataclass(frozen=True)
class Step:
    kind: str
    name: str
    result: str
    detail: str = ""

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "result": self.result, "detail": self.detail}


@dataclass(frozen=True)
class Investigation:
    """What one arm of the replay did with one ticket."""

    checks: tuple[str, ...]
    questions: tuple[str, ...]
    claim: str | None
    outcome: str
    calls: Mapping[str, int]
    steps: tuple[Step, ...] = ()

    @property
    def tool_calls(self) -> int:
        return sum(self.calls.values())


@dataclass(frozen=True)
class Score:
    missed_checks: tuple[str, ...]
    wrong_cause: bool
    correct_cause: bool
    necessary_followups: tuple[str, ...]
    unnecessary_followups: tuple[str, ...]
    tool_calls: int
    # Tool calls until the true cause was established (the claim is the investigation's last
    # act, so every call it made); None when it never was.
    calls_to_cause: int | None = None

    def counts(self) -> dict[str, int]:
        return {
            "missed_checks": len(self.missed_checks),
            "wrong_causes": int(self.wrong_cause),
            "correct_causes": int(self.correct_cause),
            "necessary_followups": len(self.necessary_followups),
            "unnecessary_followups": len(self.unnecessary_followups),
            "tool_calls": self.tool_calls,
            "calls_to_cause": CALL_BUDGET if self.calls_to_cause is None else self.calls_to_cause,
        }


METRICS = (
    "missed_checks",
    "wrong_causes",
    "correct_causes",
    "necessary_followups",
    "unnecessary_followups",
    "tool_calls",
    "calls_to_cause",
)


def score(investigation: Investigation, truth: Truth) -> Score:
    """Compare what was done and claimed with the ground truth.

    A claim that names a cause other than the true one is a wrong-cause claim; making no claim
    is never wrong (it is what an honest investigator does without supporting evidence). A
    question is necessary when the ground truth lists it, and unnecessary otherwise.
    """
    done = set(investigation.checks) | set(investigation.questions)
    asked = list(dict.fromkeys(investigation.questions))
    claim = investigation.claim
    return Score(
        missed_checks=tuple(name for name in truth.required_checks if name not in done),
        wrong_cause=claim is not None and claim != truth.cause,
        correct_cause=claim is not None and claim == truth.cause,
        necessary_followups=tuple(q for q in asked if q in truth.followups),
        unnecessary_followups=tuple(q for q in asked if q not in truth.followups),
        tool_calls=investigation.tool_calls,
        calls_to_cause=investigation.tool_calls
        if claim is not None and claim == truth.cause
        else None,
    )


def paired_calls_to_cause(pairs: Iterable[tuple[Score, Score]]) -> dict[str, int]:
    """Calls to the true cause over the tickets whose cause both arms established: the
    like-for-like comparison, free of the budget that counts a cause never found."""
    found = [
        (a, b) for a, b in pairs if a.calls_to_cause is not None and b.calls_to_cause is not None
    ]
    return {
        "tickets": len(found),
        WITH: sum(a.calls_to_cause or 0 for a, _ in found),
        WITHOUT: sum(b.calls_to_cause or 0 for _, b in found),
    }


def wrong_causes_from_memory(pairs: Iterable[tuple[Score, Score]]) -> int:
    """Tickets where the arm with memory claimed a wrong cause and the arm without did not."""
    return sum(1 for a, b in pairs if a.wrong_cause and not b.wrong_cause)


def totals(scores: Iterable[Score]) -> dict[str, int]:
    summed = dict.fromkeys(METRICS, 0)
    for one in scores:
        for name, value in one.counts().items():
            summed[name] += value
    return summed


# --- memory's lexical and vector branches compared ---------------------------------------------

# The arm with memory run twice: with the vector branch off (lexical search only) and as the
# deployment configures it (the vector branch on).
LEXICAL = "lexical"
VECTOR = "vector"
BRANCHES = (LEXICAL, VECTOR)
# The situation a ticket set gives a ticket that nothing in memory answers (the shipped set's
# printer ticket): any case memory offers it is a guess, so a lead taken on it is one too much.
NO_MATCH = "no-match"
# The step an investigation records for each case of the context block it reads as a lead.
LEAD = "lead"


def is_no_match(ticket: Ticket) -> bool:
    """Whether nothing in memory answers ``ticket``: its set says so by its situation."""
    return ticket.situation == NO_MATCH


def lead_ids(investigation: Investigation) -> list[str]:
    """The cases ``investigation`` took as leads, in the order it read them."""
    return [step.name for step in investigation.steps if step.kind == LEAD]


@dataclass(frozen=True)
class BranchPair:
    """One ticket's arm with memory, lexical only and with the vector branch."""

    ticket: Ticket
    lexical: Investigation
    vector: Investigation


def _branch_counts(pairs: Sequence[BranchPair]) -> dict[str, Any]:
    wrong = {
        branch: sum(
            int(score(getattr(pair, branch), pair.ticket.truth).wrong_cause) for pair in pairs
        )
        for branch in BRANCHES
    }
    leads = {
        branch: sum(len(lead_ids(getattr(pair, branch))) for pair in pairs) for branch in BRANCHES
    }
    no_match_leads = {
        branch: sum(
            len(lead_ids(getattr(pair, branch))) for pair in pairs if is_no_match(pair.ticket)
        )
        for branch in BRANCHES
    }
    return {
        "tickets": len(pairs),
        "no_match_tickets": sum(1 for pair in pairs if is_no_match(pair.ticket)),
        "wrong_causes": wrong,
        "no_match_leads": no_match_leads,
        "leads": leads,
        # The vector branch holds when it makes no more wrong-cause claims and takes no more
        # leads on tickets nothing answers than the lexical search alone.
        "holds": wrong[VECTOR] <= wrong[LEXICAL]
        and no_match_leads[VECTOR] <= no_match_leads[LEXICAL],
    }


def _branch_arm(investigation: Investigation, truth: Truth) -> dict[str, Any]:
    return {
        "claim": investigation.claim,
        "outcome": investigation.outcome,
        "wrong_cause": score(investigation, truth).wrong_cause,
        "leads": lead_ids(investigation),
    }


def branch_comparison(pairs: Sequence[BranchPair]) -> dict[str, Any]:
    """The arm with memory, lexical only against with the vector branch: wrong-cause claims and
    leads taken on tickets nothing answers (``NO_MATCH``), per situation and over all, and
    whether the vector branch holds (no more of either than lexical) in each."""
    situations: dict[str, list[BranchPair]] = {}
    for pair in pairs:
        situations.setdefault(pair.ticket.situation, []).append(pair)
    groups = [{"situation": name, **_branch_counts(group)} for name, group in situations.items()]
    return {
        "no_match_situation": NO_MATCH,
        # Situation by situation: a branch that trades a wrong claim in one for one in another
        # does not hold.
        "holds": all(group["holds"] for group in groups),
        "totals": _branch_counts(pairs),
        "situations": groups,
        "tickets": [
            {
                "id": pair.ticket.id,
                "situation": pair.ticket.situation,
                "no_match": is_no_match(pair.ticket),
                LEXICAL: _branch_arm(pair.lexical, pair.ticket.truth),
                VECTOR: _branch_arm(pair.vector, pair.ticket.truth),
            }
            for pair in pairs
        ],
    }
