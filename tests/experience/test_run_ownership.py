"""Issue 23, item 4: a run id belongs to the account and tenant that opened it.

Another account's read under it, or its owner's under another tenant, is refused naming
``run_id`` before anything is written; outcomes come from the owner or a reviewer of the run's
tenant; a revocation's impact lists only runs of the revoked item's tenant.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from experience.cases.executor import TicketContext, run_skill
from experience.cases.models import Case, Skill
from experience.retrieval.service import retrieve_experience
from experience.review import impact as impacts
from experience.review import revocation
from experience.review.outcomes import NO_READS, NOT_OWNER, run_outcome_report
from experience.runs import records as run_records
from experience.runs.claims import RUN_TAKEN, run_owner
from experience.runs.models import Reference, Run, RunOutcome
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Event, TenantMembership
from reviewconsole.roles import Role
from tests.experience.conftest import NOW, QUERY, SCOPE

pytestmark = pytest.mark.django_db

OTHER = "other-tenant"
OTHER_SCOPE = {**SCOPE, "tenant": OTHER}
CONTEXT = TicketContext(
    occurred_at=datetime.fromisoformat("2026-09-18T14:00:00+08:00"),
    known_at=datetime.fromisoformat("2026-09-18T14:10:00+08:00"),
    facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
)


def limited(user: User, tenant: str) -> User:
    TenantMembership.objects.create(user=user, tenant=tenant)
    return User.objects.get(pk=user.pk)


@pytest.fixture
def owner(agent: User) -> User:
    """Agent Y of tenant A (teahouse), who opens the runs."""
    return limited(agent, SCOPE["tenant"])


@pytest.fixture
def stranger(make_user: Callable[[str, str], User]) -> User:
    """Agent X of the same tenant, another account."""
    return limited(make_user("agent-x", Role.AGENT), SCOPE["tenant"])


@pytest.fixture
def outsider(make_user: Callable[[str, str], User]) -> User:
    """An agent of tenant B."""
    return limited(make_user("agent-b", Role.AGENT), OTHER)


@pytest.fixture
def memory(approved_skill: Callable[..., Skill], approved_case: Callable[..., Case]) -> Skill:
    """Tenant A's skill and cases, and one case of tenant B (same titles)."""
    approved_case(scope=OTHER_SCOPE, incident="INC-B")
    return approved_skill()


def other_case() -> Case:
    return Case.objects.get(tenant=OTHER)


def recall(run_id: str, actor: User, scope: dict[str, str] = SCOPE) -> dict[str, Any]:
    return retrieve_experience(QUERY, scope, NOW, run_id, actor=actor)


def written() -> tuple[int, int, int]:
    return Reference.objects.count(), Run.objects.count(), Event.objects.count()


def test_another_account_reading_under_a_run_id_is_refused_and_writes_nothing(
    memory: Skill, owner: User, stranger: User
) -> None:
    assert recall("run-y", owner)["items"]
    before = written()
    with pytest.raises(ValidationFailure) as refused:
        recall("run-y", stranger)
    assert (refused.value.field, refused.value.message) == ("run_id", RUN_TAKEN)
    with pytest.raises(ValidationFailure) as refused_run:
        run_skill(memory.id, SCOPE, CONTEXT, "run-y", NOW, actor=stranger)
    assert refused_run.value.field == "run_id"
    assert written() == before
    claim = run_owner("run-y")
    assert claim is not None
    assert (claim.owner_id, claim.tenant) == (owner.pk, SCOPE["tenant"])


def test_a_refused_reader_cannot_report_or_replace_the_owners_outcome(
    memory: Skill, owner: User, stranger: User
) -> None:
    recall("run-y", owner)
    run_outcome_report(run_id="run-y", outcome="resolved_by_lead", actor=owner)
    with pytest.raises(ValidationFailure):
        recall("run-y", stranger)
    with pytest.raises(PermissionRefused) as refused:
        run_outcome_report(run_id="run-y", outcome="lead_was_wrong", actor=stranger)
    assert refused.value.message == NOT_OWNER
    kept = RunOutcome.objects.get(run_id="run-y")
    assert (kept.outcome, kept.reported_by_id) == ("resolved_by_lead", owner.pk)


def test_an_agent_of_another_tenant_is_refused_and_the_owner_still_reports(
    memory: Skill, owner: User, outsider: User
) -> None:
    recall("run-a", owner)
    before = written()
    with pytest.raises(ValidationFailure) as refused:
        recall("run-a", outsider, OTHER_SCOPE)
    assert (refused.value.field, refused.value.message) == ("run_id", RUN_TAKEN)
    assert written() == before
    result = run_outcome_report(run_id="run-a", outcome="resolved_by_lead", actor=owner)
    # The outcome moves tenant A's items only.
    assert other_case().id not in {item["id"] for item in result["items"]}


def test_the_owner_under_another_tenant_is_refused(memory: Skill, agent: User) -> None:
    # A deployment-wide agent opens a run in tenant A; the same id in tenant B is another run.
    recall("run-wide", agent)
    with pytest.raises(ValidationFailure) as refused:
        recall("run-wide", agent, OTHER_SCOPE)
    assert refused.value.field == "run_id"
    assert not Reference.objects.filter(run_id="run-wide", item_id=other_case().id).exists()


def test_a_reviewer_of_the_runs_tenant_reports_its_outcome(
    memory: Skill, owner: User, reviewer: User
) -> None:
    recall("run-a", owner)
    reviewer = limited(reviewer, SCOPE["tenant"])
    result = run_outcome_report(run_id="run-a", outcome="lead_was_wrong", actor=reviewer)
    assert result["reported_by"] == reviewer.username


def test_a_reviewer_of_another_tenant_is_answered_as_for_an_unknown_run(
    memory: Skill, owner: User, second_reviewer: User
) -> None:
    recall("run-a", owner)
    reviewer = limited(second_reviewer, OTHER)
    answers = []
    for run_id in ("run-a", "run-nobody-opened"):
        with pytest.raises(ValidationFailure) as refused:
            run_outcome_report(run_id=run_id, outcome="resolved_by_lead", actor=reviewer)
        answers.append((refused.value.field, refused.value.message))
    assert answers == [("run_id", NO_READS)] * 2


def test_revocation_impact_lists_only_runs_of_the_items_tenant(
    memory: Skill, owner: User, outsider: User, second_reviewer: User
) -> None:
    recall("run-a", owner)
    with pytest.raises(ValidationFailure):
        recall("run-a", outsider, OTHER_SCOPE)
    recall("run-b", outsider, OTHER_SCOPE)
    # A read of B's case under A's run, as runs recorded before runs had owners may hold.
    run_records.references_record(run_id="run-a", items=[(other_case().id, "case")], at=NOW)
    assert impacts.revocation_impact(other_case().id).runs == ["run-b"]
    outcome = revocation.case_revoke(case=other_case(), actor=second_reviewer, reason="wrong")
    assert outcome.impact is not None
    assert outcome.impact.runs == ["run-b"]


# --- commands: the refusal JSON -----------------------------------------------------------------

SCOPE_FLAGS = [flag for name, value in SCOPE.items() for flag in (f"--{name}", value)]


def command(*args: str) -> tuple[dict[str, Any], bool]:
    out = StringIO()
    try:
        call_command(*args, "--json", stdout=out)
    except CommandError:
        return json.loads(out.getvalue()), False
    return json.loads(out.getvalue()), True


def test_recall_and_run_skill_under_another_accounts_run_id_are_refused(
    memory: Skill, owner: User, stranger: User
) -> None:
    recall("run-y", owner)
    before = written()
    refusal = {"ok": False, "error": RUN_TAKEN, "field": "run_id"}
    assert command("recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-y", "--as", "agent-x") == (
        refusal,
        False,
    )
    flags = ["--at", "2026-09-18T14:00:00+08:00", "--known-at", "2026-09-18T14:10:00+08:00"]
    answer = command(
        "run_skill", memory.id, *SCOPE_FLAGS, *flags, "--run-id", "run-y", "--as", "agent-x"
    )
    assert answer == (refusal, False)
    assert written() == before
