"""Demo data for the experience memory and the four demo replays (``experience_demo``).

``load_demo_experience`` imports ``fixtures/experience.json`` and approves what a reviewer would
approve, leaving the rest in the review queue. ``replays`` runs the four demo replays against
whatever database is current; the ``experience_demo`` command runs them on a temporary one.

Every loader takes the moment it writes at (``now``) and hands it to each service it calls, so
a demo is dated as its caller chooses without touching the clock.
"""

from __future__ import annotations

import copy
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from experience.cases import selectors, services
from experience.cases.executor import SkillRunResult, run_skill
from experience.cases.models import Case
from experience.cases.schema import TicketContext, evidence_objects
from experience.core.models import Status
from experience.review import imports as review_imports
from experience.review import revocation
from knowledge.services import documents_import
from reviewconsole.cli import read_json_file
from reviewconsole.permissions import VERIFY_EVIDENCE, holds
from reviewconsole.timeparse import parse_aware_datetime

if TYPE_CHECKING:
    from django.contrib.auth.models import User

FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "experience.json"
KNOWLEDGE_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "knowledge.json"

DEMO_SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
OTHER_DEPLOYMENT = "release-2"
OCCURRED_AT = "2026-09-18T14:00:00+08:00"
KNOWN_AT = "2026-09-18T14:10:00+08:00"
DEMO_FACTS: dict[str, object] = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}

# Items of the fixture a reviewer approves: the two cases from distinct incidents, then the
# skill citing them. The second summary, the recovery-only case and the case whose excerpt
# tries to instruct the agent stay in the queue.
APPROVE = (0, 1, 5)
APPROVAL_REASON = "诊断证据已核对，反证记录完整，适用范围与本门店本版本一致"
SKILL_APPROVAL_REASON = "引用两个不同事故的已批准案例，配方只读且只有一步"
DIAGNOSIS_CHECK_NOTE = "demo: diagnosis excerpt compared with the thread before approving"


def _without_verified_flags(items: list[Any]) -> list[Any]:
    stripped = copy.deepcopy(items)
    for item in stripped:
        for evidence in evidence_objects(item):
            evidence.pop("verified", None)
    return stripped


def _verified_keys(item: dict[str, Any]) -> list[str]:
    keys = [
        f"observations/{i}"
        for i, e in enumerate(item.get("observations") or [])
        if e.get("verified")
    ]
    for section in ("diagnosis", "outcome"):
        evidence = (item.get(section) or {}).get("evidence") or []
        keys += [f"{section}/{i}" for i, e in enumerate(evidence) if e.get("verified")]
    for n, entry in enumerate(item.get("counterevidence") or []):
        keys += [
            f"counterevidence/{n}/{i}"
            for i, e in enumerate(entry.get("evidence") or [])
            if e.get("verified")
        ]
    return keys


def case_check_and_approve(
    case: Case, *, reviewer: User, reason: str, note: str, now: datetime | None = None
) -> None:
    """``reviewer`` checks the case's diagnosis evidence, then approves it, if still a candidate.

    What a reviewer does before approving: the submitter's own checks (an import's
    ``verified: true``) do not count toward approval (``domain.check_counts``), so the approver
    checks the diagnosis evidence themselves. An item they already checked is not checked again.
    """
    if case.status != Status.CANDIDATE:
        return
    for item in case.evidence_items.filter(section="diagnosis").order_by("position"):
        if not item.checks.filter(checked_by=reviewer).exists():
            services.evidence_check(case=case, key=item.key, actor=reviewer, note=note, now=now)
    services.case_approve(case=case, actor=reviewer, reason=reason, now=now)


def load_demo_experience(
    *, operator: User, reviewer: User, path: Path | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """Import the demo cases and skill as ``operator``; ``reviewer`` checks and approves.

    Four eyes hold either way: the operator submits, the reviewer checks the diagnosis evidence
    and approves. When the operator may not verify evidence, the ``verified`` marks are recorded
    as the reviewer's own checks instead of being claimed by the import; when the operator may,
    the import records them as the operator's checks, which do not count toward approval, and
    the reviewer checks the diagnosis evidence too. Safe to call again: nothing is duplicated.
    """
    raw = read_json_file(str(path or FIXTURE))
    can_verify = holds(operator, VERIFY_EVIDENCE)
    submitted = review_imports.items_import(
        items=raw if can_verify else _without_verified_flags(raw), actor=operator, now=now
    )
    if not can_verify:
        for item, result in zip(raw, submitted, strict=True):
            keys = _verified_keys(item) if result.type == "case" else []
            case = selectors.case_get(result.id) if keys else None
            for key in keys:
                assert case is not None
                already = case.evidence_items.filter(key=key, checks__checked_by=reviewer).exists()
                if not already:
                    services.evidence_check(
                        case=case,
                        key=key,
                        actor=reviewer,
                        note="demo: excerpt compared with the thread",
                        now=now,
                    )
    approved = []
    for index in APPROVE:
        result = submitted[index]
        if result.type == "case":
            case_check_and_approve(
                selectors.case_get(result.id),
                reviewer=reviewer,
                reason=APPROVAL_REASON,
                note=DIAGNOSIS_CHECK_NOTE,
                now=now,
            )
        else:
            skill = selectors.skill_get(result.id)
            if skill.status == Status.CANDIDATE:
                services.skill_approve(
                    skill=skill, actor=reviewer, reason=SKILL_APPROVAL_REASON, now=now
                )
        approved.append(result.id)
    return {
        "items": [
            {"index": i, "id": r.id, "type": r.type, "created": r.created}
            for i, r in enumerate(submitted)
        ],
        "approved": approved,
        "candidates": [r.id for i, r in enumerate(submitted) if i not in APPROVE],
        "cases": [submitted[i].id for i in APPROVE if submitted[i].type == "case"],
        "skill": next(submitted[i].id for i in APPROVE if submitted[i].type == "skill"),
    }


def load_demo_knowledge(*, operator: User, now: datetime | None = None) -> dict[str, Any]:
    result = documents_import(items=read_json_file(str(KNOWLEDGE_FIXTURE)), actor=operator, now=now)
    return {"created": result.created, "unchanged": result.unchanged}


def demo_context(*, facts: dict[str, object] | None = None) -> TicketContext:
    return TicketContext(
        occurred_at=parse_aware_datetime(OCCURRED_AT, field="occurred_at"),
        known_at=parse_aware_datetime(KNOWN_AT, field="known_at"),
        facts=dict(DEMO_FACTS if facts is None else facts),
    )


REPLAYS = (
    ("same scope, channel and product given", "needs_review", True),
    ("deployment changed to another release", "fallback", False),
    ("same scope, channel and product missing", "fallback", True),
    ("a cited case revoked", "fallback", False),
)


def replays(
    *,
    skill_id: str,
    revoke_case_id: str,
    reviewer: User,
    agent: User,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The four demo replays, run by ``agent``, in order. The last one revokes ``revoke_case_id``.

    ``now`` is the moment they all happen at (memory read as of it, runs and the revocation
    stored at it); without it each reads the clock."""
    partial_facts = {k: v for k, v in DEMO_FACTS.items() if k not in ("channel", "product")}
    other_release = {**DEMO_SCOPE, "deployment": OTHER_DEPLOYMENT}

    def replay(scope: dict[str, str], context: TicketContext, run_id: str) -> SkillRunResult:
        return run_skill(skill_id, scope, context, run_id, now, actor=agent, at=now)

    results = [
        replay(DEMO_SCOPE, demo_context(), "demo-replay-1"),
        replay(other_release, demo_context(), "demo-replay-2"),
        replay(DEMO_SCOPE, demo_context(facts=partial_facts), "demo-replay-3"),
    ]
    revoked = revocation.case_revoke(
        case=selectors.case_get(revoke_case_id),
        actor=reviewer,
        reason="演示：诊断后来被发现证据不足，撤销以停止复用",
        now=now,
    )
    results.append(replay(DEMO_SCOPE, demo_context(), "demo-replay-4"))
    rows = []
    for (label, expected_status, expected_search), result in zip(REPLAYS, results, strict=True):
        searched = result.tool_calls > 0
        rows.append(
            {
                "replay": label,
                "status": result.status,
                "knowledge_search_executed": searched,
                "tool_calls": result.tool_calls,
                "reason": result.reason,
                "run_id": result.run_id,
                "expected_status": expected_status,
                "expected_search": expected_search,
                "as_expected": result.status == expected_status and searched == expected_search,
            }
        )
    rows[-1]["revocation_impact"] = revoked.impact.as_json()
    return rows
