"""No reference crosses tenants: a new version supersedes only a case of its own tenant, and a
skill cites only cases of its own tenant, on every way in (import command, API, MCP, console).

An id of another tenant is answered exactly like an id that names nothing, so a caller learns
nothing about which ids exist elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.test import Client
from django.urls import reverse

from agentapi.services import token_create
from experience.cases import services
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.pages.selectors import case_version_chain
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.api.conftest import BearerClient
from tests.experience.conftest import (
    SCOPE,
    approve_checked,
    case_data,
    skill_data,
    without_verified,
)
from tests.helpers import run_json
from tests.mcp.test_server import call
from tests.mcp.test_server import refusal as tool_refusal

ACME = "acme"
ACME_SCOPE = {**SCOPE, "tenant": ACME}
UNKNOWN = "case:" + "0" * 64
SECRET_TITLE = "别家租户的机密案例：会员价规则"


@pytest.fixture
def acme_agent(db: None) -> User:
    return user_set_role(username="ta", role=Role.AGENT, tenants=[ACME])


@pytest.fixture
def acme_operator(db: None) -> User:
    return user_set_role(username="to", role=Role.OPERATOR, tenants=[ACME])


@pytest.fixture
def acme_reviewer(db: None) -> User:
    return user_set_role(username="tr", role=Role.REVIEWER, tenants=[ACME])


@pytest.fixture
def foreign(approved_case: Callable[..., Case]) -> Case:
    """An approved case of another tenant (``teahouse``)."""
    return approved_case(title=SECRET_TITLE, incident="INC-SECRET")


def masked(answer: Any, item_id: str) -> str:
    """The answer with the referenced id blanked, to compare two answers about two ids."""
    return json.dumps(answer, ensure_ascii=False, sort_keys=True).replace(item_id, "<id>")


def nothing_written() -> None:
    """No acme row, and no submission event but those of the rows that exist."""
    assert not Case.objects.filter(tenant=ACME).exists()
    assert not Skill.objects.filter(tenant=ACME).exists()
    submitted = Event.objects.filter(action__in=[Action.CASE_SUBMIT, Action.SKILL_SUBMIT])
    stored = {
        *Case.objects.values_list("pk", flat=True),
        *Skill.objects.values_list("pk", flat=True),
    }
    assert set(submitted.values_list("target", flat=True)) <= stored


def assert_foreign_untouched(case: Case) -> None:
    case.refresh_from_db()
    assert case.status == Status.APPROVED and case.superseded_by == ""
    assert not Event.objects.filter(action=Action.CASE_SUPERSEDE).exists()


# --- supersedes: the service -------------------------------------------------------------------


def refusal(data: dict[str, Any], actor: User) -> ValidationFailure:
    with pytest.raises(ValidationFailure) as refused:
        services.case_submit(content=parse_case(data), actor=actor)
    return refused.value


def test_a_new_version_never_supersedes_another_tenants_case(foreign: Case, reviewer: User) -> None:
    # Not even for a deployment-wide user: a version belongs to the tenant of the case it
    # corrects.
    cross = refusal(case_data(scope=dict(ACME_SCOPE), supersedes=foreign.id), reviewer)
    unknown = refusal(case_data(scope=dict(ACME_SCOPE), supersedes=UNKNOWN), reviewer)
    assert cross.field == unknown.field == "supersedes"
    assert cross.message == f"{foreign.id} {services.SUPERSEDES_UNKNOWN}"
    assert masked([cross.field, cross.message], foreign.id) == masked(
        [unknown.field, unknown.message], UNKNOWN
    )
    nothing_written()
    assert_foreign_untouched(foreign)


def test_a_new_version_of_a_case_of_the_same_tenant_is_accepted(
    approved_case: Callable[..., Case], submit_case: Callable[..., Case]
) -> None:
    old = approved_case(scope=dict(ACME_SCOPE))
    new = submit_case(case_data(scope=dict(ACME_SCOPE), supersedes=old.id, summary="更正"))
    assert new.supersedes == old.id and new.tenant == ACME


# --- supersedes: each way in ---------------------------------------------------------------------


def write_items(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_the_import_command_refuses_another_tenants_case_as_supersedes(
    foreign: Case, acme_operator: User, tmp_path: Path
) -> None:
    def attempt(target: str) -> tuple[int, dict[str, Any]]:
        item = without_verified(case_data(scope=dict(ACME_SCOPE), supersedes=target))
        return run_json(
            "import_cases", write_items(tmp_path, [item]), "--as", acme_operator.username
        )

    (status, cross), (unknown_status, unknown) = attempt(foreign.id), attempt(UNKNOWN)
    assert status == unknown_status == 1 and cross["field"] == "[0].supersedes"
    assert masked(cross, foreign.id) == masked(unknown, UNKNOWN)
    nothing_written()
    assert_foreign_untouched(foreign)


def test_the_api_refuses_another_tenants_case_as_supersedes(
    foreign: Case, acme_agent: User
) -> None:
    client = BearerClient(token_create(user=acme_agent, name="tests").text)

    def attempt(target: str) -> Any:
        body = case_data(scope=dict(ACME_SCOPE), supersedes=target)
        return client.post("/api/v1/cases", data=json.dumps(body), content_type="application/json")

    cross, unknown = attempt(foreign.id), attempt(UNKNOWN)
    assert cross.status_code == unknown.status_code == 422
    assert cross.json()["detail"][0]["loc"] == ["body", "supersedes"]
    assert masked(cross.json(), foreign.id) == masked(unknown.json(), UNKNOWN)
    nothing_written()
    assert_foreign_untouched(foreign)


def test_mcp_propose_case_refuses_another_tenants_case_as_supersedes(
    foreign: Case, acme_agent: User
) -> None:
    token = token_create(user=acme_agent, name="mcp").text

    def attempt(target: str) -> Any:
        result = call(token, "propose_case", case_data(scope=dict(ACME_SCOPE), supersedes=target))
        return tool_refusal(result)

    cross, unknown = attempt(foreign.id), attempt(UNKNOWN)
    assert cross["error"] == "invalid" and cross["loc"] == ["supersedes"]
    assert masked(cross, foreign.id) == masked(unknown, UNKNOWN)
    nothing_written()
    assert_foreign_untouched(foreign)


# --- supersedes: rows stored before the rule ------------------------------------------------------


def force_supersedes(case: Case, old_id: str) -> None:
    """Write ``supersedes`` past the model's guard on hashed content (an old row, or a bug)."""
    QuerySet.update(Case.objects.filter(pk=case.pk), supersedes=old_id)


@pytest.fixture
def stored_cross_version(foreign: Case, submit_case: Callable[..., Case]) -> Case:
    """An acme candidate that claims to supersede the other tenant's case, as a row written
    before submission refused that."""
    case = submit_case(case_data(scope=dict(ACME_SCOPE), incident="INC-ACME"))
    force_supersedes(case, foreign.id)
    case.refresh_from_db()
    return case


def test_approving_a_stored_cross_tenant_version_supersedes_nothing(
    stored_cross_version: Case, foreign: Case, acme_reviewer: User
) -> None:
    outcome = approve_checked(stored_cross_version, actor=acme_reviewer, reason="ok")
    assert outcome.status == Status.APPROVED
    assert_foreign_untouched(foreign)


def test_the_console_approval_of_a_stored_cross_tenant_version_supersedes_nothing(
    stored_cross_version: Case, foreign: Case, acme_reviewer: User
) -> None:
    client = Client()
    client.force_login(acme_reviewer)
    digest = stored_cross_version.id.split(":", 1)[1]
    client.post(reverse("experience:case-check", args=[digest]), {"key": "diagnosis/0", "note": ""})
    response = client.post(
        reverse("experience:case-review", args=[digest]),
        {"decision": "approve", "reason": "核对无误"},
    )
    assert response.status_code == 303
    stored_cross_version.refresh_from_db()
    assert stored_cross_version.status == Status.APPROVED
    assert_foreign_untouched(foreign)


def test_the_version_history_never_shows_another_tenants_case(
    stored_cross_version: Case, foreign: Case, acme_reviewer: User, submit_case: Callable[..., Case]
) -> None:
    # And the other way round: a case of the other tenant naming an acme case as its old version.
    later = submit_case(case_data(incident="INC-LATER", title="另一租户的后续版本"))
    force_supersedes(later, stored_cross_version.id)

    assert [c.id for c in case_version_chain(stored_cross_version)] == [stored_cross_version.id]
    assert [c.id for c in case_version_chain(foreign)] == [foreign.id]

    client = Client()
    client.force_login(acme_reviewer)
    digest = stored_cross_version.id.split(":", 1)[1]
    page = client.get(reverse("experience:case-detail", args=[digest]))
    assert page.status_code == 200
    assert page.context["versions"] == [] and page.context["diff"] is None
    html = page.content.decode()
    assert SECRET_TITLE not in html and foreign.id not in html
    assert "另一租户的后续版本" not in html and later.id not in html


# --- skills citing cases ---------------------------------------------------------------------------


def test_a_skill_never_cites_another_tenants_case(
    foreign: Case, approved_case: Callable[..., Case], reviewer: User
) -> None:
    own = approved_case(scope=dict(ACME_SCOPE), incident="INC-A1")

    def attempt(cited: str) -> ValidationFailure:
        with pytest.raises(ValidationFailure) as refused:
            services.skill_submit(
                content=parse_skill(
                    skill_data([own.id, cited], scope=dict(ACME_SCOPE)), tool_specs()
                ),
                actor=reviewer,
            )
        return refused.value

    cross, unknown = attempt(foreign.id), attempt(UNKNOWN)
    assert cross.field == "cases[1]"
    assert masked([cross.field, cross.message], foreign.id) == masked(
        [unknown.field, unknown.message], UNKNOWN
    )
    assert not Skill.objects.exists()


def test_the_import_command_refuses_a_skill_citing_another_tenants_case(
    foreign: Case, acme_operator: User, reviewer: User, tmp_path: Path
) -> None:
    own = without_verified(case_data(scope=dict(ACME_SCOPE), incident="INC-A1"))

    def attempt(cited: str) -> tuple[int, dict[str, Any]]:
        items = [own, skill_data(["#0", cited], scope=dict(ACME_SCOPE))]
        return run_json(
            "import_cases", write_items(tmp_path, items), "--as", acme_operator.username
        )

    status, cross = attempt(foreign.id)
    assert status == 1 and cross["field"] == "[1].cases[1]"
    assert masked(cross, foreign.id) == masked(attempt(UNKNOWN)[1], UNKNOWN)
    nothing_written()

    # A file reference (#N) to a case of the same file but of another tenant is refused too,
    # even for a deployment-wide importer.
    items = [
        case_data(incident="INC-T1"),
        case_data(scope=dict(ACME_SCOPE), incident="INC-A1"),
        skill_data(["#0", "#1"], scope=dict(ACME_SCOPE)),
    ]
    status, cross = run_json(
        "import_cases", write_items(tmp_path, items), "--as", reviewer.username
    )
    assert status == 1 and cross["field"] == "[2].cases[0]"
    assert not Skill.objects.exists()
    assert not Case.objects.filter(incident__in=["INC-T1", "INC-A1"]).exists()


def test_an_agent_proposes_a_new_version_of_a_case_of_its_own_tenant(
    acme_agent: User, at_now: datetime
) -> None:
    client = BearerClient(token_create(user=acme_agent, name="tests").text)
    first = client.post(
        "/api/v1/cases",
        data=json.dumps(case_data(scope=dict(ACME_SCOPE))),
        content_type="application/json",
    )
    assert first.status_code == 201
    second = client.post(
        "/api/v1/cases",
        data=json.dumps(
            case_data(scope=dict(ACME_SCOPE), supersedes=first.json()["id"], summary="更正")
        ),
        content_type="application/json",
    )
    assert second.status_code == 201
    assert Case.objects.get(pk=second.json()["id"]).supersedes == first.json()["id"]
