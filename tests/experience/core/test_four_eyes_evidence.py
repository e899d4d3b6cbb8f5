"""Four eyes on evidence (issue 24.1): a check counts toward approval only when someone other than
the submitter made it; the approver's own check counts, and so does a third reviewer's.

Skills and lessons cite cases, not evidence items, so the rule is the cases' (docs/contracts.md,
Unmet conditions). ``domain.check_counts`` is read as an attribute inside each test, so on code
without it each test fails on its own assertion rather than the module failing to import.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases import selectors, services
from experience.cases.models import Case, EvidenceCheck
from experience.cases.schema import parse_case
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.review import decisions
from reviewconsole import clock
from reviewconsole.roles import Role
from tests.experience.conftest import case_data

pytestmark = pytest.mark.django_db

UNMET = domain.NO_CHECKED_DIAGNOSIS_EVIDENCE
NOT_COUNTING = "the submitter’s own check: does not count toward approval"


def run(*args: str) -> tuple[dict[str, Any], bool]:
    """The one JSON object a command printed, and whether it exited successfully."""
    out = StringIO()
    try:
        call_command(*args, "--json", stdout=out, stderr=StringIO())
    except CommandError:
        ok = False
    else:
        ok = True
    return json.loads(out.getvalue()), ok


@pytest.fixture
def rita_s_case(reviewer: User, at_now: datetime) -> Case:
    """rita submits a case with ``verified: true`` on its diagnosis evidence: her own check."""
    case, _ = services.case_submit(content=parse_case(case_data()), actor=reviewer)
    assert [check.checked_by for check in EvidenceCheck.objects.all()] == [reviewer]
    return case


def refused(case: Case, actor: User) -> list[str]:
    with pytest.raises(ReviewRefused) as refusal:
        decisions.case_approve(case=case, actor=actor, reason="evidence read")
    assert selectors.case_get(case.id).status == Status.CANDIDATE
    return refusal.value.unmet


# --- the scenario, through the commands -----------------------------------------------


def test_the_submitters_own_check_does_not_satisfy_the_approver_through_the_commands(
    tmp_path: Path, reviewer: User, second_reviewer: User, at_now: datetime
) -> None:
    items = tmp_path / "cases.json"
    items.write_text(json.dumps([case_data()], ensure_ascii=False), encoding="utf-8")
    imported, ok = run("import_cases", str(items), "--as", "rita")
    assert ok
    case_id = imported["items"][0]["id"]

    refusal, ok = run("review", "approve", case_id, "--as", "ravi", "--reason", "looks right")
    assert not ok
    assert refusal == {
        "ok": False,
        "id": case_id,
        "status": "candidate",
        "unmet": [UNMET],
        "impact": {"skills": [], "runs": []},
    }

    verified, ok = run("review", "verify", case_id, "--evidence", "diagnosis/0", "--as", "ravi")
    assert ok and verified["evidence"] == "diagnosis/0"
    approved, ok = run("review", "approve", case_id, "--as", "ravi", "--reason", "looks right")
    assert ok and (approved["status"], approved["unmet"]) == ("approved", [])
    assert selectors.case_get(case_id).approved_by == second_reviewer


# --- the service --------------------------------------------------------------------------------


def test_the_submitters_checks_never_count(
    rita_s_case: Case, reviewer: User, second_reviewer: User
) -> None:
    assert refused(rita_s_case, second_reviewer) == [UNMET]
    # Checking again, or another diagnosis item, changes nothing while it is the submitter.
    services.evidence_check(case=rita_s_case, key="diagnosis/0", actor=reviewer, note="again")
    assert refused(rita_s_case, second_reviewer) == [UNMET]
    assert selectors.case_facts(rita_s_case).checked_diagnosis_evidence == 0


def test_the_approvers_own_check_counts(rita_s_case: Case, second_reviewer: User) -> None:
    assert refused(rita_s_case, second_reviewer) == [UNMET]
    services.evidence_check(case=rita_s_case, key="diagnosis/0", actor=second_reviewer)
    outcome = decisions.case_approve(case=rita_s_case, actor=second_reviewer, reason="read it")
    assert outcome.status == Status.APPROVED


def test_a_third_reviewers_check_counts(
    rita_s_case: Case, second_reviewer: User, make_user: Callable[[str, str], User]
) -> None:
    rhea = make_user("rhea", Role.REVIEWER)
    assert refused(rita_s_case, second_reviewer) == [UNMET]
    services.evidence_check(case=rita_s_case, key="diagnosis/0", actor=rhea)
    assert selectors.case_facts(rita_s_case).checked_diagnosis_evidence == 1
    outcome = decisions.case_approve(case=rita_s_case, actor=second_reviewer, reason="rhea read it")
    assert outcome.status == Status.APPROVED


def test_a_check_of_another_section_by_someone_else_does_not_count(
    rita_s_case: Case, second_reviewer: User
) -> None:
    services.evidence_check(case=rita_s_case, key="observations/0", actor=second_reviewer)
    assert refused(rita_s_case, second_reviewer) == [UNMET]


def test_the_rule_is_one_function() -> None:
    assert domain.check_counts(checked_by=2, submitted_by=1)
    assert not domain.check_counts(checked_by=1, submitted_by=1)


# --- the console -----------------------------------------------------------------------------


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def unmet_in(html: str) -> bool:
    return f'class="unmet" title="{UNMET}" data-condition="{UNMET}"' in html


def test_the_console_shows_who_checked_and_that_the_submitters_check_does_not_count(
    rita_s_case: Case, second_reviewer: User
) -> None:
    client = signed_in(second_reviewer)
    digest = rita_s_case.digest
    page = client.get(rita_s_case.get_absolute_url()).content.decode()
    assert unmet_in(page)
    diagnosis = page.split('id="ev-diagnosis-0"', 1)[1].split("</article>", 1)[0]
    assert "checked by rita" in diagnosis
    assert NOT_COUNTING in diagnosis
    assert "checked by the submitter only" in diagnosis
    assert "badge-checked" not in diagnosis

    # The live checklist, as the reason is typed.
    live = client.get(
        reverse("experience:case-checklist", args=[digest]),
        {"reason": "looks right"},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert unmet_in(live)

    # Approving from the page is refused, naming the condition.
    refusal = client.post(
        reverse("experience:case-review", args=[digest]),
        {"decision": "approve", "reason": "looks right"},
    )
    assert refusal.status_code == 422
    assert f'data-condition="{UNMET}"' in refusal.content.decode()
    assert selectors.case_get(rita_s_case.id).status == Status.CANDIDATE

    # ravi checks the item himself: his check counts, rita's still does not.
    swapped = client.post(
        reverse("experience:case-check", args=[digest]),
        {"key": "diagnosis/0", "note": "matches the thread"},
        headers={"HX-Request": "true"},
    ).content.decode()
    item = swapped.split("</article>", 1)[0]
    assert "checked by rita" in item and "checked by ravi" in item
    assert item.count(NOT_COUNTING) == 1
    assert item.index(NOT_COUNTING) < item.index("checked by ravi")
    assert "badge-checked" in item
    assert not unmet_in(swapped)

    approved = client.post(
        reverse("experience:case-review", args=[digest]),
        {"decision": "approve", "reason": "looks right"},
    )
    assert approved.status_code == 303
    assert selectors.case_get(rita_s_case.id).status == Status.APPROVED


# --- the SQL count and the rule agree ------------------------------------------------------------


DIAGNOSIS_ITEMS = 3


@pytest.fixture
def many_items_case(reviewer: User, at_now: datetime) -> Case:
    """A case of rita's with three diagnosis evidence items and one of each other section,
    none checked yet."""
    data = case_data()
    data["diagnosis"]["evidence"] = [
        {"source_id": f"thread:1#m{7 + n}", "excerpt": f"运营：门店列表缺少二号店（{n}）。"}
        for n in range(DIAGNOSIS_ITEMS)
    ]
    case, _ = services.case_submit(content=parse_case(data), actor=reviewer)
    return case


KEYS = [f"diagnosis/{n}" for n in range(DIAGNOSIS_ITEMS)] + [
    "observations/0",
    "counterevidence/0/0",
    "outcome/0",
]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(checks=st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 2)), max_size=8))
def test_the_sql_count_agrees_with_the_rule(
    many_items_case: Case,
    reviewer: User,
    second_reviewer: User,
    make_user: Callable[[str, str], User],
    checks: list[tuple[str, int]],
) -> None:
    checkers = [reviewer, second_reviewer, make_user("rhea", Role.REVIEWER)]
    savepoint = transaction.savepoint()
    try:
        evidence = {item.key: item for item in many_items_case.evidence_items.all()}
        for key, who in checks:
            EvidenceCheck.objects.create(
                evidence=evidence[key], checked_by=checkers[who], checked_at=clock.now()
            )
        expected = len(
            {
                key
                for key, who in checks
                if key.startswith("diagnosis/")
                and domain.check_counts(
                    checked_by=int(checkers[who].pk),
                    submitted_by=int(many_items_case.submitted_by_id),
                )
            }
        )
        assert selectors.case_facts(many_items_case).checked_diagnosis_evidence == expected
    finally:
        transaction.savepoint_rollback(savepoint)
