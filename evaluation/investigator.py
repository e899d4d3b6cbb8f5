"""The scripted investigator: one fixed, deterministic policy replayed with and without memory.

Pure (no Django imports): the tools come in through ``Tools``, the customer and the live
configuration through the ticket's ``answers``. It never reads the ticket's ground truth.

The policy is honest. It claims a cause only when evidence supports one: a rule mismatch
supports "the rules do not cover this purchase" (docs/contracts.md, Statuses), and a fault
read in the live configuration supports the cause that fault names. Memory changes which configuration it reads
and in what order; a skill's ``needs_review`` is a lead, never a cause, and a ``fallback``
leaves the ordinary path to decide. "It works after a refresh" resolves a ticket but explains
nothing, so it is never claimed as a cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from evaluation.domain import (
    AWAITING_CUSTOMER,
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

# Result words of the tools this policy reads (docs/contracts.md, Statuses).
RETRIEVED = "retrieved"
NEEDS_CONTEXT = "needs_context"
CONFLICTING_SOURCES = "conflicting_sources"
NO_MATCH = "no_match"
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
    """A historical case as a lead: the configuration it points at, and what it refuted."""

    case_id: str
    checks: tuple[str, ...]
    defers_client_retry: bool


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


def investigate(ticket: Ticket, tools: Tools, *, with_memory: bool) -> Investigation:
    record = _Record()
    leads = _consult_memory(ticket, tools, record) if with_memory else []
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
    for check in plan_checks(status, leads):
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
    return record.finish(ESCALATED)


def _consult_memory(ticket: Ticket, tools: Tools, record: _Record) -> list[Lead]:
    retrieved = tools.retrieve_experience(ticket.text, ticket.scope, ticket.known_at)
    record.calls["memory"] += 1
    items = list(retrieved.get("items") or [])
    record.step(
        "memory",
        "retrieve_experience",
        str(retrieved.get("status")),
        ", ".join(str(item.get("id")) for item in items),
    )
    if retrieved.get("status") != MEMORY_OK:
        return []
    lead_ids: list[str] = []
    skill_run = False
    for item in items:
        if item.get("type") == "case":
            lead_ids.append(str(item["id"]))
        elif item.get("type") == "skill" and not skill_run:
            skill_run = True
            lead_ids += _run_top_skill(ticket, tools, record, str(item["id"]))
    leads = []
    for case_id in dict.fromkeys(lead_ids):
        case = tools.read_case(case_id)
        record.calls["memory"] += 1
        if case is not None:
            lead = lead_from_case(case)
            leads.append(lead)
            record.step("lead", case_id, "read", ", ".join(lead.checks))
    return leads


def _run_top_skill(ticket: Ticket, tools: Tools, record: _Record, skill_id: str) -> list[str]:
    result = tools.run_skill(
        skill_id,
        ticket.scope,
        occurred_at=ticket.occurred_at,
        known_at=ticket.known_at,
        facts=ticket.facts,
        now=ticket.known_at,
    )
    record.calls["skill"] += int(result.get("tool_calls") or 0)
    status = str(result.get("status"))
    record.step("skill", skill_id, status, str(result.get("reason", "")))
    if status != NEEDS_REVIEW:
        return []
    if any(obs.get("status") in DECIDED for obs in result.get("observations") or []):
        record.check(CAMPAIGN_RULES_CHECK)
    return [str(case_id) for case_id in result.get("cases") or []]


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
        if status != NEEDS_CONTEXT or not missing:
            return None
        unanswered = False
        for name in missing:
            question = f"{CONFIRM}:{name}"
            record.questions.append(question)
            answer = ticket.answers.facts.get(name)
            record.step("question", question, "answered" if answer is not None else "no_reply")
            if answer is None:
                unanswered = True
            else:
                facts[name] = answer
        if unanswered:
            return None
    return None
