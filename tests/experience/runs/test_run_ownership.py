"""A run is keyed by tenant, account and the run id its caller chose (issue 23, item 4; issue 37,
item 8).

The same id chosen by another account, or by the same account in another tenant, opens another
run: nothing is refused, so no answer tells that an id is taken, and no one can squat on another
tenant's ids. Outcomes come from the run's owner or a reviewer of its tenant; another account's
run answers as an unknown one; a revocation's impact lists only runs of the revoked item's tenant.
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

from experience.cases.executor import run_skill
from experience.cases.models import Case, Skill
from experience.cases.schema import TicketContext
from experience.retrieval.service import retrieve_experience
from experience.review import impact as impacts
from experience.review import revocation
from experience.review.outcomes import NO_READS, run_outcome_report
from experience.runs import records as run_records
from experience.runs.claims import run_named
from experience.runs.models import Reference, Run, RunOutcome, RunOwner
from reviewconsole.errors import ValidationFailure
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


def claims(name: str) -> list[tuple[int | None, str, str]]:
    """(owner, tenant, stored id) of every run opened under ``name``, first opened first."""
    return list(
        RunOwner.objects.filter(name=name).order_by("id").values_list("owner", "tenant", "run_id")
    )


def stored_id(name: str, actor: User, tenant: str = SCOPE["tenant"]) -> str:
    return RunOwner.objects.get(name=name, owner=actor, tenant=tenant).run_id


def read_ids(stored: str) -> set[str]:
    return set(Reference.objects.filter(run_id=stored).values_list("item_id", flat=True))


def test_another_account_reading_under_a_run_id_opens_a_run_of_its_own(
    memory: Skill, owner: User, stranger: User
) -> None:
    first = recall("run-y", owner)["items"]
    owners_reads = Reference.objects.filter(run_id="run-y").count()

    again = recall("run-y", stranger)
    assert [i["id"] for i in again["items"]] == [i["id"] for i in first]
    result = run_skill(memory.id, SCOPE, CONTEXT, "run-y", NOW, actor=stranger)
    assert result.run_id == "run-y"

    (owner_id, _, owners), (stranger_id, _, strangers) = claims("run-y")
    assert (owner_id, owners, stranger_id) == (owner.pk, "run-y", stranger.pk)
    assert strangers != owners and strangers.startswith("run-y~")
    # The owner's run holds the owner's reads only; the stranger's reads and run are its own.
    assert Reference.objects.filter(run_id=owners).count() == owners_reads
    assert read_ids(strangers) >= {i["id"] for i in first}
    assert Run.objects.get(run_id=strangers).actor_id == stranger.pk
    assert not Run.objects.filter(run_id=owners).exists()


def test_another_accounts_run_answers_its_outcome_as_an_unknown_one(
    memory: Skill, owner: User, stranger: User
) -> None:
    recall("run-y", owner)
    run_outcome_report(run_id="run-y", outcome="resolved_by_lead", actor=owner)
    answers = []
    for run_id in ("run-y", "run-nobody-opened"):
        with pytest.raises(ValidationFailure) as refused:
            run_outcome_report(run_id=run_id, outcome="lead_was_wrong", actor=stranger)
        answers.append((refused.value.field, refused.value.message))
    assert answers == [("run_id", NO_READS)] * 2
    # The stranger's own run of the same id is the stranger's to report on, and only it.
    recall("run-y", stranger)
    mine = run_outcome_report(run_id="run-y", outcome="lead_was_wrong", actor=stranger).as_json()
    assert (mine["run_id"], mine["previous"]) == ("run-y", None)
    kept = RunOutcome.objects.get(run_id="run-y")
    assert (kept.outcome, kept.reported_by_id) == ("resolved_by_lead", owner.pk)
    strangers = RunOutcome.objects.get(run_id=stored_id("run-y", stranger))
    assert (strangers.outcome, strangers.reported_by_id) == ("lead_was_wrong", stranger.pk)


def test_the_same_run_id_in_two_tenants_is_two_runs(
    memory: Skill, owner: User, outsider: User
) -> None:
    recall("run-a", owner)
    theirs = recall("run-a", outsider, OTHER_SCOPE)
    assert [i["id"] for i in theirs["items"]] == [other_case().id]
    a_result = run_outcome_report(run_id="run-a", outcome="resolved_by_lead", actor=owner).as_json()
    b_result = run_outcome_report(
        run_id="run-a", outcome="lead_was_wrong", actor=outsider
    ).as_json()
    # Each outcome moves its own tenant's items.
    assert other_case().id not in {item["id"] for item in a_result["items"]}
    assert [item["id"] for item in b_result["items"]] == [other_case().id]
    assert read_ids(stored_id("run-a", outsider, OTHER)) == {other_case().id}
    assert other_case().id not in read_ids("run-a")


def test_an_id_taken_first_in_another_tenant_is_no_squat(
    memory: Skill, owner: User, outsider: User, reviewer: User
) -> None:
    # Tenant B's agent takes a predictable id before tenant A's agent uses it.
    recall("2026-10-01-001", outsider, OTHER_SCOPE)
    assert recall("2026-10-01-001", owner)["items"]
    result = run_outcome_report(
        run_id="2026-10-01-001", outcome="resolved_by_lead", actor=owner
    ).as_json()
    assert result["items"] and other_case().id not in {i["id"] for i in result["items"]}
    # Tenant A's reviewer finds A's run by the id its agent gave, and by its stored id.
    reviewer = limited(reviewer, SCOPE["tenant"])
    owners = stored_id("2026-10-01-001", owner)
    for run_id in ("2026-10-01-001", owners):
        named = run_named(reviewer, run_id)
        assert named is not None and named.run_id == owners


def test_the_owner_under_another_tenant_opens_another_run(memory: Skill, agent: User) -> None:
    # A deployment-wide agent opens a run in tenant A; the same id in tenant B is another run.
    recall("run-wide", agent)
    assert [i["id"] for i in recall("run-wide", agent, OTHER_SCOPE)["items"]] == [other_case().id]
    assert [tenant for _, tenant, _ in claims("run-wide")] == [SCOPE["tenant"], OTHER]
    assert other_case().id not in read_ids("run-wide")


def test_a_reviewer_of_the_runs_tenant_reports_its_outcome(
    memory: Skill, owner: User, reviewer: User
) -> None:
    recall("run-a", owner)
    reviewer = limited(reviewer, SCOPE["tenant"])
    result = run_outcome_report(run_id="run-a", outcome="lead_was_wrong", actor=reviewer).as_json()
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
    recall("run-b", outsider, OTHER_SCOPE)
    # A read of B's case under A's run, as runs recorded before runs had owners may hold.
    run_records.references_record(run_id="run-a", items=[(other_case().id, "case")], at=NOW)
    assert impacts.revocation_impact(other_case().id).runs == ["run-b"]
    outcome = revocation.case_revoke(case=other_case(), actor=second_reviewer, reason="wrong")
    assert outcome.impact is not None
    assert outcome.impact.runs == ["run-b"]


# --- commands ---------------------------------------------------------------------------------

SCOPE_FLAGS = [flag for name, value in SCOPE.items() for flag in (f"--{name}", value)]


def command(*args: str) -> tuple[dict[str, Any], bool]:
    out = StringIO()
    try:
        call_command(*args, "--json", stdout=out)
    except CommandError:
        return json.loads(out.getvalue()), False
    return json.loads(out.getvalue()), True


def test_commands_under_another_accounts_run_id_open_the_callers_own_run(
    memory: Skill, owner: User, stranger: User
) -> None:
    recall("run-y", owner)
    run_outcome_report(run_id="run-y", outcome="resolved_by_lead", actor=owner)
    # Another account's run and an unknown one are answered alike.
    foreign = command("run_outcome", "run-y", "--outcome", "lead_was_wrong", "--as", "agent-x")
    unknown = command("run_outcome", "run-nobody", "--outcome", "lead_was_wrong", "--as", "agent-x")
    assert foreign == ({**unknown[0]}, False) and unknown[1] is False
    recalled, ok = command("recall", QUERY, *SCOPE_FLAGS, "--run-id", "run-y", "--as", "agent-x")
    assert ok and recalled["items"]
    flags = ["--at", "2026-09-18T14:00:00+08:00", "--known-at", "2026-09-18T14:10:00+08:00"]
    ran, ok = command(
        "run_skill", memory.id, *SCOPE_FLAGS, *flags, "--run-id", "run-y", "--as", "agent-x"
    )
    assert ok and ran["run_id"] == "run-y"
    reported, ok = command("run_outcome", "run-y", "--outcome", "lead_was_wrong", "--as", "agent-x")
    assert ok and reported["previous"] is None
    assert RunOutcome.objects.get(run_id="run-y").outcome == "resolved_by_lead"
