"""Console test data made through the services, as users would make it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User

from experience.cases.models import Case, Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.services import (
    case_approve,
    case_submit,
    evidence_check,
    skill_approve,
    skill_submit,
)
from experience.cases.tools import tool_specs
from experience.runs.models import Run
from experience.runs.records import references_record, run_store
from reviewconsole import clock
from reviewconsole.services import system_agent
from reviewconsole.timeparse import to_utc_iso

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}


def _validity() -> dict[str, str | None]:
    now = clock.now()
    return {
        "valid_from": to_utc_iso(now - timedelta(days=30)),
        "valid_to": to_utc_iso(now + timedelta(days=365)),
    }


def case_data(
    *, incident: str = "INC-UI-1", observations: int = 1, **changes: Any
) -> dict[str, Any]:
    """An approvable case once a reviewer checks ``diagnosis/0``."""
    data: dict[str, Any] = {
        "type": "case",
        "scope": dict(SCOPE),
        "incident": incident,
        "title": f"Store 002 coupon refused: store missing from campaign B ({incident})",
        "summary": "A customer's coupon was refused in the mini-app at store 002.",
        "observations": [
            {
                "source_id": f"thread:{incident}#m{i + 1}",
                "excerpt": f"Customer: the coupon is refused ({i + 1}).",
            }
            for i in range(observations)
        ],
        "diagnosis": {
            "statement": "Campaign B's store list does not include store 002.",
            "evidence": [
                {
                    "source_id": f"thread:{incident}#m7",
                    "excerpt": "Ops: store-002 is missing from the store list.",
                }
            ],
        },
        "counterevidence": [
            {
                "hypothesis": "Stale coupon cache",
                "statement": "Refreshing did not help.",
                "refutes": "client refresh only; server-side caches not excluded",
                "evidence": [
                    {
                        "source_id": f"thread:{incident}#m5",
                        "excerpt": "Customer: refreshed, still refused.",
                    }
                ],
            }
        ],
        "outcome": {
            "statement": "Adding the store fixed it.",
            "evidence": [
                {"source_id": f"thread:{incident}#m9", "excerpt": "Customer: works now, thanks."}
            ],
        },
        **_validity(),
    }
    data.update(changes)
    return data


def submit_case(actor: User, **kwargs: Any) -> Case:
    case, _ = case_submit(content=parse_case(case_data(**kwargs)), actor=actor)
    return case


def approved_case(*, submitter: User, reviewer: User, **kwargs: Any) -> Case:
    case = submit_case(submitter, **kwargs)
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    case_approve(case=case, actor=reviewer, reason="diagnosis evidence checked against the thread")
    case.refresh_from_db()
    return case


def skill_data(case_ids: list[str], **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "skill",
        "scope": dict(SCOPE),
        "title": "Coupon refused: check the campaign's current rule first",
        "when": "A coupon is refused in the mini-app during a campaign.",
        "recipe": [{"tool": "search_knowledge", "arguments": {"query": "coupon conditions"}}],
        "cases": case_ids,
        **_validity(),
    }
    data.update(changes)
    return data


def submit_skill(actor: User, case_ids: list[str], **changes: Any) -> Skill:
    skill, _ = skill_submit(
        content=parse_skill(skill_data(case_ids, **changes), tool_specs()), actor=actor
    )
    return skill


def approved_skill(*, submitter: User, reviewer: User, case_ids: list[str]) -> Skill:
    skill = submit_skill(submitter, case_ids)
    skill_approve(skill=skill, actor=reviewer, reason="two incidents, read-only recipe")
    skill.refresh_from_db()
    return skill


def record_run(run_id: str, skill: Skill, case_ids: list[str]) -> Run:
    """A run that read ``skill`` and its cases, as the executor records one."""
    now = clock.now()
    references_record(
        run_id=run_id,
        items=[(skill.id, "skill"), *((case_id, "case") for case_id in case_ids)],
        at=now,
    )
    return run_store(
        run_id=run_id,
        skill_id=skill.id,
        scope=SCOPE,
        context={
            "occurred_at": to_utc_iso(now),
            "known_at": to_utc_iso(now),
            "facts": {"channel": "miniapp"},
        },
        steps=[
            {
                "index": 0,
                "tool": "search_knowledge",
                "arguments": {"query": "coupon conditions"},
                "status": "passed",
            }
        ],
        observations=[
            {
                "step": 0,
                "tool": "search_knowledge",
                "status": "retrieved",
                "missing": [],
                "evidence": [
                    {
                        "id": "doc:rule-b@1",
                        "kind": "rule",
                        "title": "Campaign B coupon rule",
                        "quote": "[rule] Campaign B coupon rule (v1); conditions: match",
                        "conditions": {"status": "match", "mismatches": [], "unknown": []},
                        "conflict": False,
                    }
                ],
            }
        ],
        cases=case_ids,
        status="needs_review",
        reason="all_steps_passed: every step found current evidence that matches",
        tool_calls=1,
        started_at=now,
        finished_at=now,
        cited_documents=["doc:rule-b@1"],
        actor=system_agent(),
    )
