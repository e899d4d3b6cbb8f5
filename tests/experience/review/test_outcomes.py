"""Run outcomes: who may report them, the audit, and how they move confidence."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from experience.cases.models import Case
from experience.retrieval.block import experience_context
from experience.retrieval.service import retrieve_experience
from experience.review.outcomes import NO_READS, OUTCOME_INVALID, run_outcome_report
from experience.runs.models import RunOutcome
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from tests.experience.conftest import NOW, QUERY, SCOPE

pytestmark = pytest.mark.django_db


def confidence_of(case: Case, agent: User, run_id: str) -> float:
    result = retrieve_experience(QUERY, SCOPE, NOW, run_id, actor=agent)
    (item,) = [item for item in result["items"] if item["id"] == case.id]
    return float(item["confidence"])


def test_owner_reports_and_it_is_audited(approved_case: Callable[..., Case], agent: User) -> None:
    case = approved_case()
    experience_context(QUERY, SCOPE, NOW, "run-o", 200, actor=agent)
    result = run_outcome_report(
        run_id="run-o", outcome="resolved_by_lead", note="ok", actor=agent
    ).as_json()
    assert (result["outcome"], result["previous"], result["items"]) == (
        "resolved_by_lead",
        None,
        [{"id": case.id, "type": "case"}],
    )
    event = Event.objects.get(action=Action.RUN_OUTCOME)
    assert (event.target, event.actor_id, event.details["outcome"]) == (
        "run-o",
        agent.pk,
        "resolved_by_lead",
    )
    again = run_outcome_report(run_id="run-o", outcome="lead_was_wrong", actor=agent).as_json()
    assert again["previous"] == "resolved_by_lead"
    assert RunOutcome.objects.get().outcome == "lead_was_wrong"  # the latest report counts


def test_an_id_with_no_reads_is_refused_naming_run_id(agent: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_outcome_report(run_id="never-read", outcome="unresolved", actor=agent)
    assert (refused.value.field, refused.value.message) == ("run_id", NO_READS)
    assert not Event.objects.filter(action=Action.RUN_OUTCOME).exists()


def test_bad_outcome_is_refused_naming_outcome(agent: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        run_outcome_report(run_id="r", outcome="fixed", actor=agent)
    assert (refused.value.field, refused.value.message) == ("outcome", OUTCOME_INVALID)


def test_another_agents_run_is_unknown_to_an_agent_but_a_reviewer_reports_it(
    approved_case: Callable[..., Case],
    agent: User,
    make_user: Callable[[str, str], User],
    reviewer: User,
) -> None:
    approved_case()
    experience_context(QUERY, SCOPE, NOW, "run-p", 200, actor=agent)
    stranger = make_user("other-agent", Role.AGENT)
    with pytest.raises(ValidationFailure) as refused:
        run_outcome_report(run_id="run-p", outcome="unresolved", actor=stranger)
    assert (refused.value.field, refused.value.message) == ("run_id", NO_READS)
    assert run_outcome_report(run_id="run-p", outcome="unresolved", actor=reviewer)


def test_outcomes_move_the_confidence_of_what_the_run_read(
    approved_case: Callable[..., Case], agent: User, reviewer: User
) -> None:
    case = approved_case()
    before = confidence_of(case, agent, "probe-0")
    experience_context(QUERY, SCOPE, NOW, "run-good", 200, actor=agent)
    # The agent's confirmation waits for a reviewer (tests/experience/lessons/test_confidence_rule.py).
    run_outcome_report(run_id="run-good", outcome="resolved_by_lead", actor=agent)
    assert confidence_of(case, agent, "probe-1") == before
    run_outcome_report(run_id="run-good", outcome="resolved_by_lead", actor=reviewer)
    confirmed = confidence_of(case, agent, "probe-2")
    assert confirmed > before  # 2 successes of 2 against 1 of 1
    retrieve_experience(QUERY, SCOPE, NOW, "run-bad", actor=agent)
    # A refutation too counts from a reviewer only (tests/experience/review/test_agent_refutations.py).
    run_outcome_report(run_id="run-bad", outcome="lead_was_wrong", actor=agent)
    assert confidence_of(case, agent, "probe-3a") == confirmed
    run_outcome_report(run_id="run-bad", outcome="lead_was_wrong", actor=reviewer)
    assert confidence_of(case, agent, "probe-3") < confirmed
    # Unresolved says nothing either way.
    retrieve_experience(QUERY, SCOPE, NOW, "run-open", actor=agent)
    settled = confidence_of(case, agent, "probe-4")
    run_outcome_report(run_id="run-open", outcome="unresolved", actor=agent)
    assert confidence_of(case, agent, "probe-5") == settled


def test_run_outcome_command(approved_case: Callable[..., Case], agent: User) -> None:
    approved_case()
    experience_context(QUERY, SCOPE, NOW, "run-cmd", 200, actor=agent)
    out = StringIO()
    call_command(
        "run_outcome", "run-cmd", "--outcome", "resolved_by_lead", "--as", agent.username,
        "--note", "the store list was it", "--json", stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue())["outcome"] == "resolved_by_lead"
    out = StringIO()
    with pytest.raises(CommandError):
        call_command(
            "run_outcome", "nothing-read", "--outcome", "unresolved", "--as", agent.username,
            "--json", stdout=out,
        )  # fmt: skip
    payload: dict[str, Any] = json.loads(out.getvalue())
    assert (payload["ok"], payload["field"]) == (False, "run_id")
