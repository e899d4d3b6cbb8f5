"""The experience memory's pure rules: identity, scope, approval, recipes, gate, availability."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from experience.cases.tools import tool_specs
from experience.core import domain
from experience.core.availability import Availability, CitedCase, GateFields, skill_availability
from experience.core.domain import (
    CASE_UNAVAILABLE,
    EXPIRED,
    NO_CHECKED_DIAGNOSIS_EVIDENCE,
    NO_COUNTEREVIDENCE,
    NO_DIAGNOSIS,
    NOT_APPROVED,
    NOT_CANDIDATE,
    NOT_REVIEWER,
    OWN_SUBMISSION,
    REASON_REQUIRED,
    SCOPE_MISMATCH,
    TOO_FEW_INCIDENTS,
    CaseFacts,
    Reviewer,
    SkillFacts,
)
from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import PLACEHOLDER_SCOPE

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
NOW = datetime(2026, 10, 1, 4, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=365)
REVIEWER = Reviewer(user_id=2, can_review=True)


# --- identity --------------------------------------------------------------------------------


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_content_id_ignores_key_order(content: dict[str, Any]) -> None:
    reordered = dict(reversed(list(content.items())))
    assert domain.content_id("case:", content) == domain.content_id("case:", reordered)


@given(
    st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=6), st.text(max_size=8)
)
def test_content_id_changes_with_any_value(content: dict[str, Any], key: str) -> None:
    changed = {**content, key: ["changed", content.get(key)]}
    assert domain.content_id("case:", changed) != domain.content_id("case:", content)


def test_content_id_is_prefixed_sha256() -> None:
    case_id = domain.content_id("case:", {"a": 1})
    assert case_id.startswith("case:") and len(case_id) == len("case:") + 64
    assert domain.item_type(case_id) == "case"
    assert domain.item_type("skill:" + "0" * 64) == "skill"
    assert domain.item_type("doc:rule-b@1") == "document"
    assert domain.item_type("nonsense") is None


# --- scope -----------------------------------------------------------------------------------


@pytest.mark.parametrize("placeholder", ["unknown", "N/A", "none", "*", "Any", "ALL", "-"])
@pytest.mark.parametrize("name", domain.SCOPE_FIELDS)
def test_scope_placeholders_rejected(name: str, placeholder: str) -> None:
    with pytest.raises(ValidationFailure) as failure:
        domain.validate_scope({**SCOPE, name: placeholder})
    assert failure.value.field == f"scope.{name}"
    assert failure.value.message == PLACEHOLDER_SCOPE


@pytest.mark.parametrize("name", domain.SCOPE_FIELDS)
def test_scope_field_required(name: str) -> None:
    partial = {k: v for k, v in SCOPE.items() if k != name}
    with pytest.raises(ValidationFailure) as failure:
        domain.validate_scope(partial)
    assert failure.value.field == f"scope.{name}"


def test_scope_rejects_unknown_field() -> None:
    with pytest.raises(ValidationFailure) as failure:
        domain.validate_scope({**SCOPE, "region": "east"})
    assert failure.value.field == "scope.region"


def test_missing_scope_lists_absent_and_blank_fields() -> None:
    assert domain.missing_scope(SCOPE) == []
    assert domain.missing_scope({**SCOPE, "deployment": None, "store": "  "}) == [
        "store",
        "deployment",
    ]


# --- approval --------------------------------------------------------------------------------


def facts(**changes: Any) -> CaseFacts:
    values: dict[str, Any] = {
        "status": "candidate",
        "submitted_by": 1,
        "valid_to": LATER,
        "diagnosis_statement": "门店范围漏配",
        "checked_diagnosis_evidence": 1,
        "counterevidence_with_evidence": 1,
    }
    values.update(changes)
    return CaseFacts(**values)


def test_approvable_case_has_no_unmet_conditions() -> None:
    assert domain.case_approval_unmet(facts(), reviewer=REVIEWER, reason="ok", now=NOW) == []


@pytest.mark.parametrize(
    ("changes", "reviewer", "reason", "expected"),
    [
        ({}, REVIEWER, "  ", REASON_REQUIRED),
        ({"status": "approved"}, REVIEWER, "ok", NOT_CANDIDATE),
        ({"status": "rejected"}, REVIEWER, "ok", NOT_CANDIDATE),
        ({"valid_to": NOW}, REVIEWER, "ok", EXPIRED),
        ({"submitted_by": 2}, REVIEWER, "ok", OWN_SUBMISSION),
        ({"diagnosis_statement": ""}, REVIEWER, "ok", NO_DIAGNOSIS),
        ({"checked_diagnosis_evidence": 0}, REVIEWER, "ok", NO_CHECKED_DIAGNOSIS_EVIDENCE),
        ({"counterevidence_with_evidence": 0}, REVIEWER, "ok", NO_COUNTEREVIDENCE),
        ({}, Reviewer(user_id=2, can_review=False), "ok", NOT_REVIEWER),
    ],
)
def test_each_unmet_condition_is_named(
    changes: dict[str, Any], reviewer: Reviewer, reason: str, expected: str
) -> None:
    assert domain.case_approval_unmet(
        facts(**changes), reviewer=reviewer, reason=reason, now=NOW
    ) == [expected]


def test_recovery_feedback_alone_cannot_be_approved() -> None:
    only_outcome = facts(checked_diagnosis_evidence=0, counterevidence_with_evidence=0)
    assert domain.case_approval_unmet(only_outcome, reviewer=REVIEWER, reason="ok", now=NOW) == [
        NO_CHECKED_DIAGNOSIS_EVIDENCE,
        NO_COUNTEREVIDENCE,
    ]


def cited(case_id: str, incident: str, **changes: Any) -> CitedCase:
    values: dict[str, Any] = {
        "case_id": case_id,
        "status": "approved",
        "scope": SCOPE,
        "incident": incident,
        "valid_from": NOW - timedelta(days=30),
        "valid_to": LATER,
    }
    values.update(changes)
    return CitedCase(**values)


def skill(*cases: CitedCase, **changes: Any) -> SkillFacts:
    values: dict[str, Any] = {
        "status": "candidate",
        "submitted_by": 1,
        "scope": SCOPE,
        "valid_to": LATER,
        "cases": cases,
    }
    values.update(changes)
    return SkillFacts(**values)


def test_skill_with_two_incidents_is_approvable() -> None:
    assert (
        domain.skill_approval_unmet(
            skill(cited("case:a", "INC-1"), cited("case:b", "INC-2")),
            reviewer=REVIEWER,
            reason="ok",
            now=NOW,
        )
        == []
    )


def test_two_summaries_of_one_incident_count_once() -> None:
    unmet = domain.skill_approval_unmet(
        skill(cited("case:a", "INC-1"), cited("case:b", "INC-1")),
        reviewer=REVIEWER,
        reason="ok",
        now=NOW,
    )
    assert unmet == [TOO_FEW_INCIDENTS]


@pytest.mark.parametrize(
    "changes",
    [{"status": "candidate"}, {"status": "revoked"}, {"valid_to": NOW}, {"valid_from": LATER}],
)
def test_skill_needs_usable_cases(changes: dict[str, Any]) -> None:
    unmet = domain.skill_approval_unmet(
        skill(cited("case:a", "INC-1"), cited("case:b", "INC-2", **changes)),
        reviewer=REVIEWER,
        reason="ok",
        now=NOW,
    )
    assert unmet == [CASE_UNAVAILABLE, TOO_FEW_INCIDENTS]


def test_skill_cases_must_share_its_exact_scope() -> None:
    other = {**SCOPE, "deployment": "release-2"}
    unmet = domain.skill_approval_unmet(
        skill(cited("case:a", "INC-1"), cited("case:b", "INC-2", scope=other)),
        reviewer=REVIEWER,
        reason="ok",
        now=NOW,
    )
    assert unmet == [SCOPE_MISMATCH]


def test_skill_four_eyes_and_reviewer() -> None:
    cases = (cited("case:a", "INC-1"), cited("case:b", "INC-2"))
    assert domain.skill_approval_unmet(
        skill(*cases, submitted_by=2), reviewer=REVIEWER, reason="ok", now=NOW
    ) == [OWN_SUBMISSION]
    assert domain.skill_approval_unmet(
        skill(*cases), reviewer=Reviewer(3, can_review=False), reason="", now=NOW
    ) == [NOT_REVIEWER, REASON_REQUIRED]


def test_reject_and_revoke_rules() -> None:
    assert domain.rejection_unmet(status="candidate", reviewer=REVIEWER, reason="") == [
        REASON_REQUIRED
    ]
    assert domain.rejection_unmet(status="approved", reviewer=REVIEWER, reason="x") == [
        NOT_CANDIDATE
    ]
    assert domain.revocation_unmet(status="candidate", reviewer=REVIEWER, reason="x") == [
        NOT_APPROVED
    ]
    assert domain.revocation_unmet(
        status="approved", reviewer=Reviewer(9, can_review=False), reason=""
    ) == [NOT_REVIEWER, REASON_REQUIRED]


# --- gate and availability ---------------------------------------------------------------------


def gate(**changes: Any) -> GateFields:
    values: dict[str, Any] = {
        "status": "approved",
        "scope": SCOPE,
        "valid_from": NOW - timedelta(days=30),
        "valid_to": LATER,
        "approved_at": NOW - timedelta(days=1),
    }
    values.update(changes)
    return GateFields(**values)


def test_gate_admits_only_exact_scope() -> None:
    assert domain.admits(gate(), SCOPE, NOW)
    for name in domain.SCOPE_FIELDS:
        assert not domain.admits(gate(), {**SCOPE, name: "other"}, NOW)


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "candidate"},
        {"status": "rejected"},
        {"status": "revoked"},
        {"status": "superseded"},
        {"approved_at": NOW + timedelta(seconds=1)},
        {"approved_at": None},
        {"valid_from": NOW + timedelta(seconds=1)},
        {"valid_to": NOW},
    ],
)
def test_gate_closes(changes: dict[str, Any]) -> None:
    assert not domain.admits(gate(**changes), SCOPE, NOW)


def test_gate_compares_instants_not_wall_clocks() -> None:
    shanghai = timezone(timedelta(hours=8))
    starts = datetime(2026, 10, 1, 12, 0, tzinfo=shanghai)  # == NOW in UTC
    assert domain.admits(gate(valid_from=starts, approved_at=starts), SCOPE, NOW)


def test_availability_says_why() -> None:
    cases = [cited("case:a", "INC-1"), cited("case:b", "INC-2")]
    assert skill_availability(gate(), cases, NOW) == Availability(True)
    revoked = [cases[0], cited("case:b", "INC-2", status="revoked")]
    result = skill_availability(gate(), revoked, NOW)
    assert not result and "case:b" in result.reason and "revoked" in result.reason
    expired = [cases[0], cited("case:b", "INC-2", valid_to=NOW)]
    assert not skill_availability(gate(), expired, NOW)
    assert not skill_availability(gate(status="revoked"), cases, NOW)
    assert not skill_availability(gate(), [], NOW)


# --- recipes ---------------------------------------------------------------------------------

TOOLS = tool_specs()
STEP = {"tool": "search_knowledge", "arguments": {"query": "优惠券无法使用的适用条件"}}


def recipe_failure(recipe: object) -> ValidationFailure:
    with pytest.raises(ValidationFailure) as failure:
        domain.validate_recipe(recipe, TOOLS)
    return failure.value


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_recipe_of_one_to_three_steps(steps: int) -> None:
    assert len(domain.validate_recipe([STEP] * steps, TOOLS)) == steps


def test_recipe_limits() -> None:
    assert recipe_failure([]).message == domain.RECIPE_EMPTY
    too_long = recipe_failure([STEP] * 4)
    assert (too_long.field, too_long.message) == ("recipe", domain.RECIPE_TOO_LONG)
    assert recipe_failure("search").field == "recipe"


def test_recipe_rejects_unknown_and_executable_tools() -> None:
    unknown = recipe_failure([STEP, {"tool": "lookup_orders", "arguments": {"query": "x"}}])
    assert unknown.field == "recipe[1].tool" and domain.UNKNOWN_TOOL in unknown.message
    for name in ("shell", "python", "sql"):
        failure = recipe_failure([{"tool": name, "arguments": {"query": "rm -rf /"}}])
        assert failure.field == "recipe[0].tool" and domain.EXECUTABLE_TOOL in failure.message


def test_recipe_rejects_code_alongside_a_tool() -> None:
    failure = recipe_failure([{**STEP, "code": "import os"}])
    assert (failure.field, failure.message) == ("recipe[0].code", domain.STEP_KEY)


@pytest.mark.parametrize("name", ["brand", "store", "tenant", "campaign", "deployment", "stores"])
def test_recipe_rejects_scope_arguments(name: str) -> None:
    failure = recipe_failure([{"tool": "search_knowledge", "arguments": {"query": "x", name: "y"}}])
    assert (failure.field, failure.message) == (
        f"recipe[0].arguments.{name}",
        domain.SCOPE_ARGUMENT,
    )


def test_recipe_rejects_extra_and_missing_arguments() -> None:
    extra = recipe_failure([{"tool": "search_knowledge", "arguments": {"query": "x", "top_k": 9}}])
    assert (extra.field, extra.message) == ("recipe[0].arguments.top_k", domain.UNKNOWN_ARGUMENT)
    missing = recipe_failure([{"tool": "search_knowledge", "arguments": {}}])
    assert missing.field == "recipe[0].arguments.query"


@pytest.mark.parametrize(("length", "ok"), [(0, False), (1, True), (200, True), (201, False)])
def test_query_length_bounds(length: int, ok: bool) -> None:
    recipe = [{"tool": "search_knowledge", "arguments": {"query": "券" * length}}]
    if ok:
        assert domain.validate_recipe(recipe, TOOLS)[0].arguments["query"] == "券" * length
    else:
        assert recipe_failure(recipe).field == "recipe[0].arguments.query"


def test_query_must_be_a_string() -> None:
    failure = recipe_failure([{"tool": "search_knowledge", "arguments": {"query": ["x"]}}])
    assert failure.field == "recipe[0].arguments.query"


# --- ranking ---------------------------------------------------------------------------------


def test_rank_items_uses_the_lexicon_branch() -> None:
    items = [("case:a", "打印机断电"), ("case:b", "优惠券无法使用")]
    assert domain.rank_items("代金券用不了", items, {"代金券": "优惠券", "用不了": "无法使用"}) == [
        "case:b"
    ]
    assert domain.rank_items("代金券用不了", items, {}) == []


def test_what_only_a_new_version_of_a_case_can_meet() -> None:
    """Issue 39, item 11: a check or a reason meets nothing here; a diagnosis without checked
    evidence is only a new version's to meet when it cites no evidence at all."""
    unmet = [
        domain.REASON_REQUIRED,
        domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
        domain.NO_COUNTEREVIDENCE,
        domain.EXPIRED,
    ]
    assert domain.case_unmet_as_it_stands(unmet, diagnosis_evidence=1) == [
        domain.NO_COUNTEREVIDENCE,
        domain.EXPIRED,
    ]
    assert domain.case_unmet_as_it_stands(unmet, diagnosis_evidence=0) == [
        domain.NO_COUNTEREVIDENCE,
        domain.EXPIRED,
        domain.NO_CHECKED_DIAGNOSIS_EVIDENCE,
    ]
    assert domain.case_unmet_as_it_stands([domain.REASON_REQUIRED], diagnosis_evidence=0) == []
