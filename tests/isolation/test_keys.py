"""Caller-chosen ids resolved inside a tenant (issue 23, item 2): skills, revocation impact and
evidence links for two tenants with identical keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from experience.cases import services
from experience.cases.executor import run_skill
from experience.cases.models import Case, Skill
from experience.cases.schema import TicketContext, parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import ItemType
from experience.core.review import NO_SUCH_SKILL
from experience.runs import records as run_records
from experience.runs.models import Run
from knowledge.models import Document
from knowledge.services import document_revoke, documents_import
from reviewconsole import clock
from reviewconsole.errors import UnknownId
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.experience.conftest import NOW, SCOPE, approve_checked, case_data, skill_data
from tests.helpers import tenants_exist
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

A = settings.DEMO_TENANT
B = "riverside"
B_SCOPE = {**SCOPE, "tenant": B}
CONTEXT = TicketContext(
    occurred_at=datetime.fromisoformat("2026-09-18T14:00:00+08:00"),
    known_at=datetime.fromisoformat("2026-09-18T14:10:00+08:00"),
    facts={"channel": "miniapp"},
)
UNKNOWN_SKILL = "skill:" + "0" * 64


def client_for(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def people(db: None, frozen_clock: Any) -> dict[str, User]:
    frozen_clock(NOW)
    tenants_exist(B)
    return {
        "reviewer": user_set_role(username="rita", role=Role.REVIEWER),
        "second": user_set_role(username="ravi", role=Role.REVIEWER),
        "operator": user_set_role(username="olivia", role=Role.OPERATOR),
        "agent_b": user_set_role(username="agent-b", role=Role.AGENT, tenants=[B]),
        "agent_wide": user_set_role(username="agent-w", role=Role.AGENT),
        "reviewer_b": user_set_role(username="becky", role=Role.REVIEWER, tenants=[B]),
    }


def approved_case(people: dict[str, User], **changes: Any) -> Case:
    case, _ = services.case_submit(
        content=parse_case(case_data(**changes)), actor=people["reviewer"]
    )
    approve_checked(case, actor=people["second"])
    return case


@pytest.fixture
def a_skill(people: dict[str, User]) -> Skill:
    first = approved_case(people, incident="INC-1")
    second = approved_case(people, incident="INC-2", title="二号店水果茶券不可用：商品列表漏配")
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()),
        actor=people["reviewer"],
    )
    services.skill_approve(skill=skill, actor=people["second"], reason="two incidents")
    return skill


@pytest.mark.parametrize("agent", ["agent_b", "agent_wide"])
def test_running_another_tenants_skill_answers_as_an_unknown_id(
    people: dict[str, User], a_skill: Skill, agent: str
) -> None:
    actor = people[agent]
    refusals = []
    for skill_id, run_id in ((a_skill.id, "run-foreign"), (UNKNOWN_SKILL, "run-unknown")):
        with pytest.raises(UnknownId) as refused:
            run_skill(skill_id, B_SCOPE, CONTEXT, run_id, NOW, actor=actor)
        refusals.append((refused.value.field, refused.value.message))

    assert refusals[0] == refusals[1] == ("skill_id", NO_SUCH_SKILL)
    assert not Run.objects.filter(run_id__in=["run-foreign", "run-unknown"]).exists()


@pytest.fixture
def same_keys(people: dict[str, User]) -> dict[str, Document]:
    operator = people["operator"]
    documents_import(items=[document(doc_key="rule-a", text="甲方规则。")], actor=operator)
    documents_import(
        items=[document(doc_key="rule-a", tenant=B, text="乙方规则。")], actor=operator
    )
    return {d.tenant: d for d in Document.objects.all()}


def _run(tenant: str, run_id: str, actor: User) -> None:
    run_records.run_store(
        run_id=run_id,
        skill_id=UNKNOWN_SKILL,
        scope={**SCOPE, "tenant": tenant},
        context={},
        steps=[],
        observations=[],
        cases=[],
        status="fallback",
        reason="test",
        tool_calls=1,
        started_at=clock.now(),
        finished_at=clock.now(),
        cited_documents=["doc:rule-a@1"],
        actor=actor,
    )
    run_records.references_record(
        run_id=run_id, items=[("doc:rule-a@1", ItemType.DOCUMENT)], at=clock.now()
    )


def test_revoking_a_document_reaches_only_its_tenants_runs(
    people: dict[str, User], same_keys: dict[str, Document]
) -> None:
    _run(A, "run-of-a", people["agent_wide"])
    _run(B, "run-of-b", people["agent_b"])
    second_operator = user_set_role(username="otto", role=Role.OPERATOR)

    review = document_revoke(document=same_keys[A], actor=second_operator, reason="wrong")
    assert review.impact["runs"] == ["run-of-a"]


def test_a_b_cases_document_evidence_links_to_bs_document(
    people: dict[str, User], same_keys: dict[str, Document]
) -> None:
    client = client_for(people["reviewer_b"])
    page = client.get("/knowledge/rule-a/v1/")
    assert page.status_code == 200 and page.context["document"] == same_keys[B]
    assert "甲方规则" not in page.content.decode()
    assert same_keys[B].get_absolute_url() == f"/knowledge/{B}/rule-a/v1/"
