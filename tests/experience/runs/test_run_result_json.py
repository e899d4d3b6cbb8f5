"""``run_skill``'s JSON, byte for byte, in every scenario of ``test_executor``.

``data/run_skill_results.json`` holds ``json.dumps`` of each scenario's result as the executor
returned it before runs had a typed result (recorded then, not written by hand); ``as_json``
must print the same bytes, key order included, because the ``run_skill`` command, the API and
MCP hand it out as it is (docs/contracts.md, Result shapes). The stored run keeps the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.executor import SkillRunResult, run_skill
from experience.cases.models import Skill
from experience.cases.schema import TicketContext
from experience.cases.tools import CallContext, search_knowledge_handler
from experience.review import revocation
from experience.runs.models import Run
from tests.experience.cases.test_executor import (  # noqa: F401 - fixtures used by name
    CONTEXT,
    KNOWN,
    OCCURRED,
    ToolClock,
    knowledge,
    late_tool,
    registry,
    tool_clock,
)
from tests.experience.conftest import NOW, SCOPE

pytestmark = pytest.mark.django_db

EXPECTED = json.loads(
    (Path(__file__).parent.parent / "data" / "run_skill_results.json").read_text(encoding="utf-8")
)
STEP = {"tool": "search_knowledge", "arguments": {"query": "优惠券无法使用的适用条件"}}
MISMATCH = {"id": "doc:x@1", "conditions": {"status": "mismatch"}, "conflict": False}
CONFLICT = {"id": "doc:y@1", "conditions": {"status": "match"}, "conflict": True}


class Scenario:
    """The world a scenario runs in: an approved skill (made on first use), a reviewer who may
    revoke, the agent who runs it, and the clock the executor times tool calls on."""

    def __init__(
        self, make: Callable[..., Skill], reviewer: User, agent: User, clock: ToolClock
    ) -> None:
        self.make, self.reviewer, self.agent, self.clock = make, reviewer, agent, clock

    @cached_property
    def skill(self) -> Skill:
        return self.make()

    def run(self, run_id: str, **changes: Any) -> SkillRunResult:
        tools = changes.pop("tools", None)
        timeout = changes.pop("timeout", 10.0)
        skill_id = changes.pop("skill_id", None) or self.skill.id
        return run_skill(
            skill_id,
            changes.get("scope", SCOPE),
            changes.get("context", CONTEXT),
            run_id,
            NOW,
            actor=self.agent,
            tools=tools,
            timeout=timeout,
        )

    def revoke_first_case(self) -> None:
        case = self.skill.cases.order_by("incident").first()
        assert case is not None
        revocation.case_revoke(case=case, actor=self.reviewer, reason="诊断有误")

    def answering(self, result: object) -> dict[str, Any]:
        return registry(lambda arguments, context: result)  # type: ignore[arg-type,return-value]


def _revoking(world: Scenario) -> SkillRunResult:
    def revoking(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        result = search_knowledge_handler(arguments, context)
        world.revoke_first_case()
        return result

    return world.run("run-r", tools=registry(revoking))


def _revoking_before_second_step(world: Scenario) -> SkillRunResult:
    two_steps = world.make(recipe=[STEP, {**STEP, "arguments": {"query": "活动B参与门店"}}])

    def revoking_first(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        revocation.skill_revoke(skill=two_steps, actor=world.reviewer, reason="停用")
        return search_knowledge_handler(arguments, context)

    return world.run("run-2s", skill_id=two_steps.id, tools=registry(revoking_first))


def _revoked_before(world: Scenario) -> SkillRunResult:
    world.revoke_first_case()
    return world.run("run-4")


def _raising(error: Exception) -> Callable[[Mapping[str, str], CallContext], dict[str, Any]]:
    def handler(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
        raise error

    return handler


SCENARIOS: dict[str, Callable[[Scenario], SkillRunResult]] = {
    "passed": lambda w: w.run("run-1"),
    "deployment_changed": lambda w: w.run("run-2", scope={**SCOPE, "deployment": "release-2"}),
    "channel_and_product_missing": lambda w: w.run(
        "run-3", context=TicketContext(OCCURRED, KNOWN, {"basket_cents": 3200})
    ),
    "cited_case_revoked": _revoked_before,
    "scope_field_missing": lambda w: w.run("run-m", scope={**SCOPE, "store": None}),
    "ticket_time_missing": lambda w: w.run("run-t", context=TicketContext(None, KNOWN, {})),
    # An unknown skill id is refused before anything runs (tests/experience/test_command_inputs.py).
    "revoked_during_step": _revoking,
    "revoked_before_next_step": _revoking_before_second_step,
    "tool_error": lambda w: w.run("run-e", tools=registry(_raising(RuntimeError("down")))),
    "tool_timeout": lambda w: w.run("run-to", tools=registry(_raising(TimeoutError()))),
    "tool_late": lambda w: w.run("run-late", tools=registry(late_tool(w.clock)), timeout=0.01),
    "tool_not_registered": lambda w: w.run("run-nr", tools={}),
    "no_result_object": lambda w: w.run("run-no", tools=w.answering(["not", "a", "mapping"])),
    "no_evidence_list": lambda w: w.run("run-nl", tools=w.answering({"status": "retrieved"})),
    "no_match": lambda w: w.run(
        "run-x1", tools=w.answering({"status": "no_match", "missing": [], "evidence": []})
    ),
    "no_evidence": lambda w: w.run(
        "run-x2", tools=w.answering({"status": "retrieved", "missing": [], "evidence": []})
    ),
    "evidence_mismatch": lambda w: w.run(
        "run-x3", tools=w.answering({"status": "retrieved", "missing": [], "evidence": [MISMATCH]})
    ),
    "conflicting_sources": lambda w: w.run(
        "run-x4",
        tools=w.answering({"status": "conflicting_sources", "missing": [], "evidence": [CONFLICT]}),
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_result_json_is_unchanged(
    name: str,
    knowledge: None,  # noqa: F811 - the fixture imported above
    approved_skill: Callable[..., Skill],
    second_reviewer: User,
    agent: User,
    tool_clock: ToolClock,  # noqa: F811 - the fixture imported above
) -> None:
    world = Scenario(approved_skill, second_reviewer, agent, tool_clock)
    result = SCENARIOS[name](world).as_json()
    assert json.dumps(result, ensure_ascii=False) == EXPECTED[name]
    stored = Run.objects.get(run_id=result["run_id"])
    assert (stored.status, stored.reason, stored.tool_calls) == (
        result["status"],
        result["reason"],
        result["tool_calls"],
    )
    assert (stored.steps, stored.observations, stored.cases) == (
        result["steps"],
        result["observations"],
        result["cases"],
    )


def test_every_scenario_has_its_expected_json() -> None:
    assert sorted(EXPECTED) == sorted(SCENARIOS)
