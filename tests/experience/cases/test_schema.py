"""The import format of cases and skills: identity of content, and errors that name their JSON path."""

from __future__ import annotations

from typing import Any

import pytest

from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import NAIVE_DATETIME
from tests.experience.conftest import case_data, skill_data, without_verified

CASE_ID = "case:" + "a" * 64


def failure_of(data: Any, *, skill: bool = False) -> ValidationFailure:
    with pytest.raises(ValidationFailure) as failure:
        parse_skill(data, tool_specs()) if skill else parse_case(data)
    return failure.value


def test_identical_content_gives_identical_id() -> None:
    assert parse_case(case_data()).id == parse_case(case_data()).id


def test_verified_marks_are_not_content() -> None:
    assert parse_case(case_data()).id == parse_case(without_verified(case_data())).id


def test_equal_instants_in_other_offsets_hash_alike() -> None:
    utc = case_data(valid_from="2026-08-31T16:00:00Z", valid_to="2027-12-30T16:00:00+00:00")
    assert parse_case(utc).id == parse_case(case_data()).id


@pytest.mark.parametrize(
    "changes",
    [
        {"diagnosis": {"statement": "另一个诊断", "evidence": []}},
        {"scope": {**case_data()["scope"], "deployment": "release-2"}},
        {"valid_to": "2027-12-31T00:00:01+08:00"},
        {"incident": "INC-9"},
        {"supersedes": CASE_ID},
    ],
)
def test_any_change_gives_a_new_id(changes: dict[str, Any]) -> None:
    assert parse_case(case_data(**changes)).id != parse_case(case_data()).id


def test_evidence_keys_name_section_and_position() -> None:
    content = parse_case(case_data())
    assert [item.key for item in content.evidence()] == [
        "observations/0",
        "diagnosis/0",
        "counterevidence/0/0",
        "outcome/0",
    ]
    assert [item.key for item in content.evidence() if item.verified] == ["diagnosis/0"]


def test_candidate_may_have_empty_sections() -> None:
    data = case_data(counterevidence=[], diagnosis={"statement": "", "evidence": []})
    del data["outcome"], data["observations"], data["summary"]
    content = parse_case(data)
    assert content.counterevidence == () and content.diagnosis.evidence == ()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (case_data(scope={**case_data()["scope"], "store": "unknown"}), "scope.store"),
        (case_data(incident=" "), "incident"),
        ({k: v for k, v in case_data().items() if k != "incident"}, "incident"),
        (case_data(valid_to=None), "valid_to"),
        (case_data(valid_to="2026-08-01T00:00:00+08:00"), "valid_to"),
        (case_data(colour="red"), "colour"),
        (case_data(supersedes="case:nothex"), "supersedes"),
        (case_data(observations=[{"source_id": "s", "excerpt": ""}]), "observations[0].excerpt"),
        (
            case_data(observations=[{"source_id": "s", "excerpt": "x" * 2001}]),
            "observations[0].excerpt",
        ),
        (
            case_data(
                diagnosis={
                    "statement": "d",
                    "evidence": [{"source_id": "s", "excerpt": "e", "verified": "yes"}],
                }
            ),
            "diagnosis.evidence[0].verified",
        ),
        (
            case_data(counterevidence=[{"hypothesis": "h", "statement": "s", "evidence": []}]),
            "counterevidence[0].refutes",
        ),
        (
            case_data(
                counterevidence=[
                    {
                        "hypothesis": "h",
                        "statement": "s",
                        "refutes": "r",
                        "evidence": [{"excerpt": "e"}],
                    }
                ]
            ),
            "counterevidence[0].evidence[0].source_id",
        ),
        (case_data(title="t" * 301), "title"),
    ],
)
def test_case_errors_name_the_path(data: dict[str, Any], field: str) -> None:
    assert failure_of(data).field == field


def test_naive_datetime_is_refused() -> None:
    failure = failure_of(case_data(valid_from="2026-09-01T00:00:00"))
    assert (failure.field, failure.message) == ("valid_from", NAIVE_DATETIME)


def test_skill_canonical_cases_are_a_set() -> None:
    a, b = "case:" + "a" * 64, "case:" + "b" * 64
    assert (
        parse_skill(skill_data([a, b]), tool_specs()).id
        == parse_skill(skill_data([b, a]), tool_specs()).id
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (skill_data([]), "cases"),
        (skill_data(["case:short"]), "cases[0]"),
        (skill_data([CASE_ID, CASE_ID]), "cases[1]"),
        (skill_data([CASE_ID], recipe=[]), "recipe"),
        (
            skill_data([CASE_ID], recipe=[{"tool": "shell", "arguments": {"query": "ls"}}]),
            "recipe[0].tool",
        ),
        (skill_data([CASE_ID], valid_to=None), "valid_to"),
        (skill_data([CASE_ID], scope={**skill_data([])["scope"], "brand": "*"}), "scope.brand"),
    ],
)
def test_skill_errors_name_the_path(data: dict[str, Any], field: str) -> None:
    assert failure_of(data, skill=True).field == field
