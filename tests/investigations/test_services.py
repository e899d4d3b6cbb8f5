"""Investigations end to end: the five knowledge replays through the runner, storage, memory
references and revocation, permissions and tenants."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Skill
from experience.core.models import ItemType
from experience.review.documents import document_revoke
from experience.review.impact import revocation_impact
from experience.runs.models import Reference
from investigations.domain import (
    ANSWERED,
    NEEDS_CONTEXT,
    REFUSED_ANSWER,
    Transcript,
    Turn,
)
from investigations.models import Investigation
from investigations.providers import LIVE_NOT_CONFIGURED
from investigations.scripted import ScriptedProvider
from investigations.services import RUN_ID_TAKEN, investigation_run
from investigations.verification import CITED_ITEM_REVOKED
from knowledge.conclusions import (
    ASK_FOR_FACTS,
    CHECK_CAMPAIGN_CONFIGURATION,
    KNOWLEDGE_HAS_NO_ANSWER,
    LEAD_NEEDS_REVIEW,
    RULES_DO_NOT_EXPLAIN,
    RULES_EXCLUDE_PURCHASE,
)
from knowledge.domain import HISTORICAL_CASE_PREFIX
from knowledge.models import Document
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.tenancy import NOT_IN_TENANT
from tests.helpers import run_json
from tests.investigations.conftest import AT, FULL_FACTS, KNOWN, STORE_B, TICKET

pytestmark = pytest.mark.django_db

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
AT_TIME = datetime.fromisoformat(AT)
KNOWN_TIME = datetime.fromisoformat(KNOWN)
FACTS = {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200}


def investigate(*args: str, text: str = TICKET) -> dict[str, Any]:
    status, result = run_json("investigate", text, "--at", AT, "--known-at", KNOWN, *args)
    assert status == 0, result
    return result


def scope_flags(store: str, campaign: str) -> tuple[str, ...]:
    return (
        "--tenant", "teahouse", "--brand", "leaf-and-cup", "--store", store,
        "--campaign", campaign, "--deployment", "release-1",
    )  # fmt: skip


# --- the five replays of the knowledge article, through the runner ------------------------------

REPLAYS = [
    # (scope, facts, text, conclusion, status)
    (("store-001", "campaign-a"), FULL_FACTS, TICKET, RULES_EXCLUDE_PURCHASE, ANSWERED),
    (("store-002", "campaign-b"), FULL_FACTS, TICKET, RULES_DO_NOT_EXPLAIN, ANSWERED),
    (
        ("store-001", "campaign-a"),
        ("--channel", "miniapp", "--basket-cents", "3200"),
        TICKET,
        ASK_FOR_FACTS,
        NEEDS_CONTEXT,
    ),
    (("store-003", "campaign-c"), FULL_FACTS, TICKET, CHECK_CAMPAIGN_CONFIGURATION, ANSWERED),
    (
        ("store-001", "campaign-a"),
        FULL_FACTS,
        "the printer lost power",
        KNOWLEDGE_HAS_NO_ANSWER,
        ANSWERED,
    ),
]


@pytest.mark.parametrize(("where", "facts", "text", "conclusion", "status"), REPLAYS)
def test_each_knowledge_replay_ends_in_its_allowed_conclusion(
    knowledge_base: None,
    where: tuple[str, str],
    facts: tuple[str, ...],
    text: str,
    conclusion: str,
    status: str,
) -> None:
    result = investigate(*scope_flags(*where), *facts, text=text)

    assert result["status"] == status
    assert result["verification"] == {"ok": True, "reasons": [], "details": []}
    assert result["answer"]["conclusion_code"] == conclusion
    # The default account may use memory: retrieval first (nothing in this scope), then search.
    assert [step["tool"] for step in result["steps"]] == ["retrieve_experience", "search_knowledge"]
    assert result["tool_calls"] == 2
    step = result["steps"][-1]
    assert set(step["arguments"]) == {"query"}
    # The full result is there, so every quote can be checked against it by a reader.
    returned = json.dumps(step["result"], ensure_ascii=False)
    for citation in result["answer"]["citations"]:
        assert citation["quote"] in returned


def test_the_store_a_answer_keeps_the_historical_case_prefix(knowledge_base: None) -> None:
    result = investigate(*scope_flags("store-001", "campaign-a"), *FULL_FACTS)
    quotes = {c["id"]: c["quote"] for c in result["answer"]["citations"]}
    assert quotes["doc:case-a@1"].startswith(HISTORICAL_CASE_PREFIX)
    assert "doc:rule-a@2" in quotes


def test_research_prints_the_allowed_conclusion_of_each_item(knowledge_base: None) -> None:
    status, result = run_json(
        "research", TICKET, "--at", AT, "--known-at", KNOWN,
        "--store", "store-001", "--campaign", "campaign-a", *FULL_FACTS,
    )  # fmt: skip
    assert status == 0
    allowed = {item["id"]: item["allowed_conclusion"] for item in result["evidence"]}
    assert allowed == {"doc:rule-a@2": RULES_EXCLUDE_PURCHASE, "doc:case-a@1": LEAD_NEEDS_REVIEW}


# --- the stored run ----------------------------------------------------------------------------


def test_an_investigation_is_stored_with_its_audit_event_and_document_reads(
    knowledge_base: None,
) -> None:
    result = investigate(*STORE_B, *FULL_FACTS, "--run-id", "ticket-42")

    stored = Investigation.objects.get(run_id="ticket-42")
    assert stored.as_json() == result
    assert stored.status == ANSWERED and stored.actor is not None
    event = Event.objects.get(action=Action.INVESTIGATION_RUN)
    assert event.target == "ticket-42"
    assert event.details["status"] == ANSWERED
    read = set(
        Reference.objects.filter(run_id="ticket-42", item_type=ItemType.DOCUMENT).values_list(
            "item_id", flat=True
        )
    )
    assert read == {item["id"] for item in result["steps"][-1]["result"]["evidence"]}


def test_revoking_a_cited_document_reaches_the_investigation(
    knowledge_base: None, operator: User
) -> None:
    investigate(*STORE_B, *FULL_FACTS, "--run-id", "ticket-42")

    assert "ticket-42" in revocation_impact("doc:rule-b@1", tenant="teahouse").runs
    review = document_revoke(
        document=Document.objects.get(doc_key="rule-b", version=1), actor=operator, reason="wrong"
    )
    assert "ticket-42" in review.impact["runs"]


class RevokingProvider(ScriptedProvider):
    """The scripted strategy, but the cited rule is revoked after the search and before the answer."""

    def __init__(self, operator: User) -> None:
        self.operator = operator

    def next_turn(self, transcript: Transcript) -> Turn:
        turn = super().next_turn(transcript)
        if turn.answer is not None:
            document = Document.objects.get(doc_key="rule-b", version=1)
            document_revoke(document=document, actor=self.operator, reason="wrong rule")
        return turn


def test_a_revocation_during_the_investigation_refuses_the_answer(
    knowledge_base: None, operator: User, agent: User
) -> None:
    investigation = investigation_run(
        actor=agent,
        text=TICKET,
        scope=SCOPE,
        occurred_at=AT_TIME,
        known_at=KNOWN_TIME,
        facts=FACTS,
        run_id="during",
        provider_instance=RevokingProvider(operator),
    )
    assert investigation.status == REFUSED_ANSWER
    assert CITED_ITEM_REVOKED in investigation.verification["reasons"]
    # The reads were recorded as they happened, so the revocation already listed this run.
    assert "during" in revocation_impact("doc:rule-b@1", tenant="teahouse").runs


def test_a_run_id_names_one_investigation(knowledge_base: None) -> None:
    investigate(*STORE_B, *FULL_FACTS, "--run-id", "ticket-42")
    status, result = run_json(
        "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *STORE_B, "--run-id", "ticket-42"
    )
    assert status == 1
    assert result == {"ok": False, "error": RUN_ID_TAKEN, "field": "--run-id"}
    assert Investigation.objects.count() == 1


def test_a_missing_scope_field_is_needs_context_naming_it(knowledge_base: None) -> None:
    result = investigate("--store", "store-002", "--campaign", "campaign-b", *FULL_FACTS)
    assert result["status"] == NEEDS_CONTEXT
    assert result["missing"] == ["tenant", "brand", "deployment"]
    assert result["steps"] == [] and result["answer"] is None


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--at", "2026-09-18T14:00:00"), "--at"),
        (("--max-calls", "0"), "--max-calls"),
        (("--run-id", "has space"), "--run-id"),
        (("--fact", "nonsense"), "--fact"),
    ],
)
def test_bad_input_names_the_flag_and_writes_nothing(
    knowledge_base: None, args: tuple[str, ...], field: str
) -> None:
    status, result = run_json(
        "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *STORE_B, *args
    )
    assert status == 1
    assert result["ok"] is False and result["field"] == field
    assert not Investigation.objects.exists()
    assert not Event.objects.filter(action=Action.INVESTIGATION_RUN).exists()


def test_the_live_provider_without_configuration_is_refused(knowledge_base: None) -> None:
    status, result = run_json(
        "investigate", TICKET, "--at", AT, "--known-at", KNOWN, *STORE_B, "--provider", "live"
    )
    assert status == 1
    assert result == {"ok": False, "error": LIVE_NOT_CONFIGURED, "field": "--provider"}


# --- who may investigate -----------------------------------------------------------------------


def test_an_admin_without_search_permission_is_refused(
    knowledge_base: None, admin_user: User
) -> None:
    with pytest.raises(PermissionRefused):
        investigation_run(
            actor=admin_user, text=TICKET, scope=SCOPE, occurred_at=AT_TIME, known_at=KNOWN_TIME
        )
    assert not Investigation.objects.exists()


def test_a_user_of_another_tenant_is_refused(
    knowledge_base: None, make_user: Callable[[str, str], User]
) -> None:
    from reviewconsole.models import TenantMembership

    outsider = make_user("outsider", "reviewer")
    TenantMembership.objects.create(user=outsider, tenant="other-tenant")
    with pytest.raises(PermissionRefused) as refused:
        investigation_run(
            actor=outsider, text=TICKET, scope=SCOPE, occurred_at=AT_TIME, known_at=KNOWN_TIME
        )
    assert refused.value.unmet == NOT_IN_TENANT


def test_a_naive_time_is_refused(knowledge_base: None, agent: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        investigation_run(
            actor=agent,
            text=TICKET,
            scope=SCOPE,
            occurred_at=datetime(2026, 9, 18, 14),
            known_at=KNOWN_TIME,
        )
    assert refused.value.field == "occurred_at"


# --- memory ------------------------------------------------------------------------------------


def test_with_memory_the_skill_runs_and_its_reads_are_recorded(memory: Skill, agent: User) -> None:
    investigation = investigation_run(
        actor=agent,
        text="小程序优惠券无法使用，核对活动适用条件",
        scope=SCOPE,
        occurred_at=AT_TIME,
        known_at=KNOWN_TIME,
        facts=FACTS,
        run_id="with-memory",
    )
    tools = [step["tool"] for step in investigation.steps]
    assert tools == ["retrieve_experience", "run_skill", "search_knowledge"]
    assert investigation.steps[1]["result"]["status"] == "needs_review"
    assert investigation.status == ANSWERED, investigation.verification
    assert investigation.answer is not None
    assert investigation.answer["conclusion_code"] == RULES_DO_NOT_EXPLAIN
    read = set(Reference.objects.filter(run_id="with-memory").values_list("item_id", flat=True))
    assert memory.id in read
    assert "with-memory" in revocation_impact(memory.id).runs


def test_an_operator_is_offered_no_memory_tools(memory: Skill, operator: User) -> None:
    investigation = investigation_run(
        actor=operator,
        text="小程序优惠券无法使用，核对活动适用条件",
        scope=SCOPE,
        occurred_at=AT_TIME,
        known_at=KNOWN_TIME,
        facts=FACTS,
    )
    assert [step["tool"] for step in investigation.steps] == ["search_knowledge"]
    assert not Reference.objects.filter(item_id=memory.id).exists()


class Recording:
    """Answers like the scripted provider and keeps the instructions it was given."""

    name = "recording"

    def __init__(self, *, calls_tools: bool = True) -> None:
        self.scripted = ScriptedProvider()
        self.calls_tools = calls_tools
        self.instructions: list[str] = []

    def next_turn(self, transcript: Transcript) -> Turn:
        self.instructions.append(transcript.instructions)
        if not self.calls_tools:  # answers at once: whatever it read, it read from the block
            return Turn(answer="{}")
        return self.scripted.next_turn(transcript)


def test_the_instructions_carry_the_context_block_and_its_reads_are_recorded(
    memory: Skill, agent: User
) -> None:
    from experience.retrieval.context import HEADER
    from investigations.domain import CONTEXT_INTRODUCTION, INSTRUCTIONS

    provider = Recording(calls_tools=False)
    investigation_run(
        actor=agent,
        text="小程序优惠券无法使用，核对活动适用条件",
        scope=SCOPE,
        occurred_at=AT_TIME,
        known_at=KNOWN_TIME,
        facts=FACTS,
        run_id="with-block",
        provider_instance=provider,
    )
    instructions = provider.instructions[0]
    assert instructions.startswith(INSTRUCTIONS)
    assert CONTEXT_INTRODUCTION in instructions and HEADER in instructions
    # The block names the approved skill of the scope, with its confidence.
    line = next(line for line in instructions.splitlines() if memory.id in line)
    assert line.split()[1] == "skill" and line.split()[3].startswith("confidence=")
    # Every item of the block is recorded as read under the run id; no tool was called.
    read = set(Reference.objects.filter(run_id="with-block").values_list("item_id", flat=True))
    in_block = {line.split()[2] for line in instructions.splitlines() if line.startswith("[")}
    assert memory.id in in_block and read == in_block


def test_a_caller_without_memory_gets_the_plain_instructions(memory: Skill, operator: User) -> None:
    from investigations.domain import INSTRUCTIONS

    provider = Recording()
    investigation_run(
        actor=operator,
        text="小程序优惠券无法使用，核对活动适用条件",
        scope=SCOPE,
        occurred_at=AT_TIME,
        known_at=KNOWN_TIME,
        facts=FACTS,
        provider_instance=provider,
    )
    assert provider.instructions[0] == INSTRUCTIONS
    assert not Reference.objects.filter(item_id=memory.id).exists()
