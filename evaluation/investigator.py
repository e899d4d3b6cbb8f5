"""The scripted investigator: one fixed, deterministic policy replayed with and without memory.

Pure (no Django imports): the tools come in through ``Tools``, the customer and the live
configuration through the ticket's ``answers``. It never reads the ticket's ground truth.

The policy is honest. It claims a cause only when evidence supports one: a rule mismatch
supports "the rules do not cover this purchase" (docs/contracts.md, Statuses), and a fault
read in the live configuration supports the cause that fault names. When the rules leave the
failure unexplained, the check their answer names comes first: the live campaign read against
the rule the search returned. Memory is consulted only when that check finds nothing, in one
call for the context block (``experience_context``): its case lines are leads that change which
further configuration is read and in what order, never a cause. Leads are checked in order of
their record (``by_record``): higher confidence first (the Wilson lower bound over the lead's
distinct incidents and the outcomes reported for it, all of this exact scope), the block's order
among equals. "It works after a refresh" resolves a ticket but explains nothing, so it is never
claimed as a cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from evaluation.domain import (
    AWAITING_CUSTOMER,
    CALL_BUDGET,
    CALL_KINDS,
    CAMPAIGN_RULES_CHECK,
    CLAIMED,
    CLIENT_RETRY,
    CONFIG,
    CONFIRM,
    ESCALATED,
    RESOLVED_UNEXPLAINED,
    RULES_EXCLUDE_PURCHASE,
    WORKS_NOW,
    Investigation,
    Step,
    Ticket,
    check_kind,
)
from experience.cases.schema import TicketContext
from experience.retrieval.context import CONFLICT_MARK
from investigations.declarations import (
    RETRIEVE_EXPERIENCE,
    RUN_SKILL,
    SEARCH_DECLARATION,
    SEARCH_KNOWLEDGE,
)
from investigations.domain import ANSWERED, Budget, Handler, Outcome, Provider, run_ticket
from investigations.domain import (
    NEEDS_CONTEXT as RUN_NEEDS_CONTEXT,
)
from investigations.domain import Ticket as RunnerTicket
from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
)
from knowledge.conclusions import (
    RULES_EXCLUDE_PURCHASE as CONCLUDES_RULES_EXCLUDE,
)
from knowledge.domain import CONFLICTING_SOURCES, NEEDS_CONTEXT, NO_MATCH, RETRIEVED

# Result words of the tools this policy reads (docs/contracts.md, Statuses); the search's own
# (RETRIEVED, NEEDS_CONTEXT, CONFLICTING_SOURCES, NO_MATCH) are knowledge.domain's.
NEEDS_REVIEW = "needs_review"
MEMORY_OK = "ok"
DECIDED = frozenset({RETRIEVED, CONFLICTING_SOURCES, NO_MATCH})

# Re-searching after the customer answered; more rounds than this means the rules keep asking
# for facts the ticket cannot give.
MAX_SEARCHES = 3

CAMPAIGN_CONFIG = "config:campaign-rules"
# Where a historical diagnosis points, read from its words. A case carries no conclusion for
# the current ticket; these only decide which configuration to read first.
LEAD_TERMS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("适用门店", "门店范围", "门店列表", "store list", "store scope"), "config:store-scope"),
    (("商品列表", "商品编码", "活动商品", "product list", "sku"), "config:product-list"),
    (("门槛", "threshold"), CAMPAIGN_CONFIG),
    (("发布版本", "版本发布", "release", "deployment"), "config:release"),
)
# A refuted hypothesis about client-side caches: asking the customer to refresh comes last.
CLIENT_CACHE_TERMS = ("缓存", "刷新", "cache", "refresh")


class Tools(Protocol):
    def experience_context(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]: ...

    def retrieve_experience(
        self, query: str, scope: Mapping[str, str], now: datetime
    ) -> Mapping[str, Any]: ...

    def run_skill(
        self,
        skill_id: str,
        scope: Mapping[str, str],
        *,
        occurred_at: datetime,
        known_at: datetime,
        facts: Mapping[str, object],
        now: datetime,
    ) -> Mapping[str, Any]: ...

    def read_case(self, case_id: str) -> Mapping[str, Any] | None: ...

    def search_knowledge(
        self,
        query: str,
        scope: Mapping[str, str],
        *,
        occurred_at: datetime,
        known_at: datetime,
        facts: Mapping[str, object],
    ) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Lead:
    """A historical case as a lead: the configuration it points at, what it refuted, and its
    record (the confidence memory gave it; None when memory gave none)."""

    case_id: str
    checks: tuple[str, ...]
    defers_client_retry: bool
    confidence: float | None = None


def lead_from_case(case: Mapping[str, Any]) -> Lead:
    diagnosis = str((case.get("diagnosis") or {}).get("statement", "")).lower()
    checks = tuple(check for terms, check in LEAD_TERMS if any(term in diagnosis for term in terms))
    refuted = " ".join(
        f"{entry.get('hypothesis', '')} {entry.get('statement', '')}".lower()
        for entry in case.get("counterevidence") or []
        if entry.get("evidence")
    )
    return Lead(
        case_id=str(case.get("id", "")),
        checks=checks,
        defers_client_retry=any(term in refuted for term in CLIENT_CACHE_TERMS),
    )


def lead_from_line(case_id: str, line: str, confidence: float | None = None) -> Lead:
    """A case of the context block as a lead, read from its line (title and summary): the
    configuration its words point at, and whether it tells of a cache suspicion that was set
    aside (the block carries only reviewed cases, so a cache it mentions was not the cause)."""
    text = line.lower()
    return Lead(
        case_id=case_id,
        checks=tuple(check for terms, check in LEAD_TERMS if any(term in text for term in terms)),
        defers_client_retry=any(term in text for term in CLIENT_CACHE_TERMS),
        confidence=confidence,
    )


def _confidence(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def block_leads(block: Mapping[str, Any]) -> list[Lead]:
    """The case items of a context block as leads, in order of their record (``by_record``);
    skills and lessons are not read for configuration, and a case in an unresolved conflict is
    no lead."""
    lines = str(block.get("block") or "").splitlines()
    leads = []
    for item in block.get("items") or []:
        case_id = str(item.get("id", ""))
        if item.get("type") != "case" or not case_id:
            continue
        line = next((line for line in lines if f" {case_id} " in f"{line} "), "")
        if line and CONFLICT_MARK not in line.split(case_id, 1)[1].split()[1:2]:
            leads.append(lead_from_line(case_id, line, _confidence(item.get("confidence"))))
    return by_record(leads)


def by_record(leads: Sequence[Lead]) -> list[Lead]:
    """``leads`` in the order they are checked: higher confidence first (a case's confidence is
    the Wilson lower bound over its distinct incidents and the run outcomes reported for it,
    decayed since last confirmed: its record in its exact scope, which is the ticket's); a lead
    without a confidence after those with one; among equals, the order given (the block's,
    best first)."""
    ranked = sorted(
        enumerate(leads),
        key=lambda pair: (
            pair[1].confidence is None,
            -(pair[1].confidence or 0.0),
            pair[0],
        ),
    )
    return [lead for _, lead in ranked]


def evidence_checks(status: str) -> list[str]:
    """The checks the knowledge base's answer itself names when its rules leave the failure
    unexplained: the live campaign read against the rule it returned ("check the real
    configuration"; with conflicting rules, the live campaign decides which is in force). With
    memory these come before memory is consulted: a lead reorders what the current evidence
    leaves open, never what it names (docs/contracts.md, Statuses)."""
    return [CAMPAIGN_CONFIG] if status in (RETRIEVED, CONFLICTING_SOURCES) else []


def plan_checks(status: str, leads: Sequence[Lead]) -> list[str]:
    """The order in which the rest of an unexplained failure is checked.

    Without memory: when the rules match, ask the customer to retry first (the cheapest move),
    then compare the live campaign with its rule; when the rules conflict, the live campaign
    decides which rule is in force, so it comes first. Memory puts the configuration its leads
    point at in front, and moves the retry to the end when a lead had refuted it.
    """
    ordinary = (
        [CAMPAIGN_CONFIG, CLIENT_RETRY]
        if status == CONFLICTING_SOURCES
        else [CLIENT_RETRY, CAMPAIGN_CONFIG]
    )
    plan = list(dict.fromkeys(check for lead in leads for check in lead.checks))
    plan += [check for check in ordinary if check not in plan]
    if any(lead.defers_client_retry for lead in leads):
        plan = [check for check in plan if check != CLIENT_RETRY] + [CLIENT_RETRY]
    return plan


def rule_mismatches(result: Mapping[str, Any]) -> list[str]:
    """``doc:…: field, field`` for every rule whose conditions this purchase does not meet."""
    found = []
    for item in result.get("evidence") or []:
        conditions = item.get("conditions") or {}
        if item.get("kind") == "rule" and conditions.get("status") == "mismatch":
            found.append(f"{item.get('id')}: {', '.join(conditions.get('mismatches') or [])}")
    return found


@dataclass
class _Record:
    checks: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CALL_KINDS, 0))

    def check(self, name: str) -> None:
        if name not in self.checks:
            self.checks.append(name)

    def step(self, kind: str, name: str, result: str, detail: str = "") -> None:
        self.steps.append(Step(kind, name, result, detail))

    def finish(self, outcome: str, claim: str | None = None) -> Investigation:
        return Investigation(
            checks=tuple(self.checks),
            questions=tuple(self.questions),
            claim=claim,
            outcome=outcome,
            calls=dict(self.calls),
            steps=tuple(self.steps),
        )


def investigate(
    ticket: Ticket, tools: Tools, *, with_memory: bool, provider: Provider | None = None
) -> Investigation:
    """One arm of a replay: the fixed policy, or, given a provider, the investigation runner."""
    if provider is not None:
        return _through_runner(ticket, tools, with_memory=with_memory, provider=provider)
    record = _Record()
    facts = dict(ticket.facts)
    result = _search(ticket, tools, record, facts)
    if result is None:
        return record.finish(AWAITING_CUSTOMER)
    status = str(result.get("status"))
    mismatches = rule_mismatches(result) if status == RETRIEVED else []
    if mismatches:
        record.step("claim", RULES_EXCLUDE_PURCHASE, "supported", "; ".join(mismatches))
        return record.finish(CLAIMED, RULES_EXCLUDE_PURCHASE)
    if status not in (RETRIEVED, CONFLICTING_SOURCES):
        # Nothing in the knowledge base speaks to this ticket: hand it on, claim nothing.
        return record.finish(ESCALATED)
    return _unexplained(ticket, tools, record, status, with_memory=with_memory)


def _unexplained(
    ticket: Ticket, tools: Tools, record: _Record, status: str, *, with_memory: bool
) -> Investigation:
    """The rules leave the failure unexplained. Without memory: the ordinary plan. With memory:
    first the check the knowledge base's answer names; only when it finds nothing is memory
    worth its call, and the context block's leads, by their record, order the checks that
    follow (the question to retry last: memory may have set a cache suspicion aside)."""
    if not with_memory:
        settled = _settled_by(ticket, record, plan_checks(status, []))
        return settled or record.finish(ESCALATED)
    first = evidence_checks(status)
    settled = _settled_by(ticket, record, first)
    if settled is not None:
        return settled
    leads = _consult_memory(ticket, tools, record)
    rest = [check for check in plan_checks(status, leads) if check not in first]
    return _settled_by(ticket, record, rest) or record.finish(ESCALATED)


def _settled_by(ticket: Ticket, record: _Record, checks: Sequence[str]) -> Investigation | None:
    """Make ``checks`` in order until one settles the ticket (a cause claimed, or resolved by a
    retry); None when none does."""
    for check in checks:
        if check == CLIENT_RETRY:
            record.questions.append(check)
            reply = ticket.answers.client_retry
            record.step("question", check, reply or "no_reply")
            if reply == WORKS_NOW:
                return record.finish(RESOLVED_UNEXPLAINED)
        elif check_kind(check) == CONFIG:
            record.calls["config"] += 1
            record.check(check)
            finding = ticket.answers.checks.get(check)
            if finding is None:
                record.step("config", check, "no_fault")
                continue
            record.step("config", check, "fault", finding.fault)
            record.step("claim", finding.cause, "supported", f"{check}: {finding.fault}")
            return record.finish(CLAIMED, finding.cause)
    return None


def _consult_memory(ticket: Ticket, tools: Tools, record: _Record) -> list[Lead]:
    block = tools.experience_context(ticket.text, ticket.scope, ticket.known_at)
    record.calls["memory"] += 1
    items = list(block.get("items") or [])
    record.step(
        "memory",
        "experience_context",
        str(block.get("status")),
        ", ".join(str(item.get("id")) for item in items),
    )
    if block.get("status") != MEMORY_OK:
        return []
    leads = block_leads(block)
    for lead in leads:
        record.step("lead", lead.case_id, "read", ", ".join(lead.checks))
    return leads


def _search(
    ticket: Ticket, tools: Tools, record: _Record, facts: dict[str, object]
) -> Mapping[str, Any] | None:
    """Search the knowledge base, asking the customer for facts the rules need; None = waiting."""
    for _ in range(MAX_SEARCHES):
        result = tools.search_knowledge(
            ticket.text,
            ticket.scope,
            occurred_at=ticket.occurred_at,
            known_at=ticket.known_at,
            facts=facts,
        )
        record.calls["knowledge"] += 1
        status = str(result.get("status"))
        missing = [str(name) for name in result.get("missing") or [] if name not in facts]
        record.step("knowledge", "search_knowledge", status, ", ".join(missing))
        if status in DECIDED:
            record.check(CAMPAIGN_RULES_CHECK)
            return result
        if status != NEEDS_CONTEXT or not missing or not _ask(ticket, record, missing, facts):
            return None
    return None


# --- the same replay through the investigation runner ------------------------------------------

# Enough for memory, one skill run and a few searches; a model that needs more is out of budget.
RUNNER_MAX_CALLS = CALL_BUDGET


def _handlers(ticket: Ticket, tools: Tools, facts: Mapping[str, object]) -> dict[str, Handler]:
    """The runner's tools bound to this ticket's scope, times and facts (never the model's)."""

    def search(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        return tools.search_knowledge(
            arguments["query"],
            ticket.scope,
            occurred_at=ticket.occurred_at,
            known_at=ticket.known_at,
            facts=facts,
        )

    def retrieve(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        return tools.retrieve_experience(arguments["query"], ticket.scope, ticket.known_at)

    def skill(arguments: Mapping[str, str]) -> Mapping[str, Any]:
        return tools.run_skill(
            arguments["skill_id"],
            ticket.scope,
            occurred_at=ticket.occurred_at,
            known_at=ticket.known_at,
            facts=facts,
            now=ticket.known_at,
        )

    return {SEARCH_KNOWLEDGE: search, RETRIEVE_EXPERIENCE: retrieve, RUN_SKILL: skill}


def _record_steps(outcome: Outcome, record: _Record) -> tuple[list[str], Mapping[str, Any] | None]:
    """Count and trace the runner's tool calls; return the lead case ids and the last search."""
    lead_ids: list[str] = []
    search: Mapping[str, Any] | None = None
    for step in outcome.steps:
        tool, result = str(step["tool"]), step.get("result")
        if step.get("outcome") != "ok" or not isinstance(result, Mapping):
            record.step("runner", tool, str(step.get("outcome")), str(step.get("error") or ""))
            continue
        status = str(result.get("status"))
        if tool == RETRIEVE_EXPERIENCE:
            record.calls["memory"] += 1
            items = list(result.get("items") or [])
            record.step("memory", tool, status, ", ".join(str(i.get("id")) for i in items))
            lead_ids += [str(i["id"]) for i in items if i.get("type") == "case"]
        elif tool == RUN_SKILL:
            record.calls["skill"] += int(result.get("tool_calls") or 0)
            record.step("skill", str(result.get("skill")), status, str(result.get("reason", "")))
            if status == NEEDS_REVIEW:
                observed = result.get("observations") or []
                if any(obs.get("status") in DECIDED for obs in observed):
                    record.check(CAMPAIGN_RULES_CHECK)
                lead_ids += [str(case_id) for case_id in result.get("cases") or []]
        elif tool == SEARCH_KNOWLEDGE:
            record.calls["knowledge"] += 1
            record.step("knowledge", tool, status, ", ".join(result.get("missing") or []))
            if status in DECIDED:
                record.check(CAMPAIGN_RULES_CHECK)
            search = result
    answer = outcome.answer or {}
    verdict = "verified" if outcome.verification.ok else ", ".join(outcome.verification.reasons)
    record.step("answer", str(answer.get("conclusion_code") or outcome.status), verdict)
    return lead_ids, search


def _through_runner(
    ticket: Ticket, tools: Tools, *, with_memory: bool, provider: Provider
) -> Investigation:
    """The runner gathers the evidence and answers; only a verified answer is acted on.

    A refused answer, an exhausted budget or a provider error claim nothing (escalated). A
    verified ``ask_for_facts`` asks the customer and runs again with the answers. A verified rule
    mismatch is claimed; anything the rules leave unexplained goes on, as in the fixed policy, to
    the check the answer names, the context block (with memory: one call) and the configuration
    checks of ``plan_checks``.
    """
    record = _Record()
    facts = dict(ticket.facts)
    for _ in range(MAX_SEARCHES):
        outcome = run_ticket(
            RunnerTicket(
                ticket.text, ticket.scope, TicketContext(ticket.occurred_at, ticket.known_at, facts)
            ),
            provider,
            tools=[SEARCH_DECLARATION],
            handlers=_handlers(ticket, tools, facts),
            budget=Budget(max_calls=RUNNER_MAX_CALLS),
        )
        _lead_ids, search = _record_steps(outcome, record)
        if outcome.status not in (ANSWERED, RUN_NEEDS_CONTEXT) or outcome.answer is None:
            return record.finish(ESCALATED)
        code = outcome.answer["conclusion_code"]
        if code == ASK_FOR_FACTS:
            missing = [str(n) for n in (search or {}).get("missing") or [] if n not in facts]
            if not missing or not _ask(ticket, record, missing, facts):
                return record.finish(AWAITING_CUSTOMER)
            continue
        if code == CONCLUDES_RULES_EXCLUDE:
            detail = "; ".join(rule_mismatches(search or {}))
            record.step("claim", RULES_EXCLUDE_PURCHASE, "supported", detail)
            return record.finish(CLAIMED, RULES_EXCLUDE_PURCHASE)
        if search is None or str(search.get("status")) not in (RETRIEVED, CONFLICTING_SOURCES):
            return record.finish(ESCALATED)
        status = CONFLICTING_SOURCES if code == CHECK_CAMPAIGN_CONFIGURATION else RETRIEVED
        return _unexplained(ticket, tools, record, status, with_memory=with_memory)
    return record.finish(AWAITING_CUSTOMER)


def _ask(ticket: Ticket, record: _Record, missing: Sequence[str], facts: dict[str, object]) -> bool:
    """Ask the customer for each missing fact; True when every one was answered."""
    answered = True
    for name in missing:
        question = f"{CONFIRM}:{name}"
        record.questions.append(question)
        answer = ticket.answers.facts.get(name)
        record.step("question", question, "answered" if answer is not None else "no_reply")
        if answer is None:
            answered = False
        else:
            facts[name] = answer
    return answered
