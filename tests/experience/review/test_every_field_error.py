"""Every field error of every item at once (issue 39.5): the import formats give all the field
failures of one item by the same rules their parse applies (the parse raises the first of them),
the console import and its page list them all, and the commands still stop at the first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases.models import Case
from experience.cases.schema import case_failures, parse_case, parse_skill, skill_failures
from experience.cases.tools import tool_specs
from experience.lessons.schema import lesson_failures, parse_lesson
from experience.review.console_imports import (
    DOCUMENTS,
    ITEMS,
    ImportProblems,
    console_import,
    item_lines,
)
from knowledge.models import Document
from knowledge.schema import document_failures, parse_document
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Event
from tests.experience.conftest import case_data, skill_data
from tests.experience.lessons.test_lessons import lesson_data
from tests.helpers import run_json
from tests.knowledge.conftest import document
from tests.ui.conftest import csrf_client, csrf_token

# Each bad field on its own, as (field changed, its bad value or None to delete it, the failing
# field the rule names).
CASE_BAD: list[tuple[str, Any, str]] = [
    ("title", None, "title"),  # a missing required field
    ("valid_from", "yesterday", "valid_from"),  # a bad date
    ("scope", {**case_data()["scope"], "store": "*"}, "scope.store"),  # a bad scope value
    ("incident", 5, "incident"),  # a wrong type
]
DOCUMENT_BAD: list[tuple[str, Any, str]] = [
    ("title", None, "title"),
    ("doc_key", "Not A Slug", "doc_key"),
    ("version", "one", "version"),
    ("stores", [], "stores"),
    ("valid_from", "soon", "valid_from"),
    ("campaign", "*", "campaign"),
    ("approved", "yes", "approved"),
]


def _with(base: dict[str, Any], bad: list[tuple[str, Any, str]]) -> dict[str, Any]:
    item = dict(base)
    for name, value, _field in bad:
        if value is None:
            del item[name]
        else:
            item[name] = value
    return item


def _pairs(failures: list[ValidationFailure]) -> list[tuple[str, str]]:
    return [(f.field, f.message) for f in failures]


def _raised(parse: Callable[[Any], object], item: Any) -> tuple[str, str]:
    with pytest.raises(ValidationFailure) as refused:
        parse(item)
    return refused.value.field, refused.value.message


def _text(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=2)


# --- the formats --------------------------------------------------------------------------------


def test_a_case_with_four_bad_fields_has_four_failures_each_its_parses() -> None:
    found = _pairs(case_failures(_with(case_data(), CASE_BAD)))

    # Each failure is the one the parse gives for that field alone: one rule, one definition.
    alone = [_raised(parse_case, _with(case_data(), [bad])) for bad in CASE_BAD]
    assert sorted(found) == sorted(alone)
    assert {field for field, _ in found} == {"title", "valid_from", "scope.store", "incident"}


def test_the_parse_raises_the_first_of_the_failures() -> None:
    item = _with(case_data(), CASE_BAD)
    assert _raised(parse_case, item) == _pairs(case_failures(item))[0]
    doc = _with(document(), DOCUMENT_BAD)
    assert _raised(parse_document, doc) == _pairs(document_failures(doc))[0]


def test_a_good_item_has_no_failures() -> None:
    assert case_failures(case_data()) == []
    assert skill_failures(skill_data(["#0"]), tool_specs()) == []
    assert lesson_failures(lesson_data(["#0"])) == []
    assert document_failures(document()) == []


def test_an_item_that_is_not_an_object_is_one_failure() -> None:
    assert [f.field for f in case_failures(["not", "an", "object"])] == [""]
    assert [f.field for f in document_failures("text")] == [""]


def test_a_skill_lists_each_bad_field() -> None:
    skill = skill_data([], when="", prompt={"goal": "x"}, valid_to="2020-01-01T00:00:00+08:00")
    found = skill_failures(skill, tool_specs())
    fields = [f.field for f in found]
    assert fields == ["prompt", "valid_to", "cases", "when"]
    assert _raised(lambda obj: parse_skill(obj, tool_specs()), skill) == _pairs(found)[0]


def test_a_lesson_lists_each_bad_field() -> None:
    lesson = lesson_data([], lesson_type="guess", scene="小程序", conclusion=7)
    del lesson["precondition"]
    found = lesson_failures(lesson)
    assert [f.field for f in found] == [
        "precondition",
        "lesson_type",
        "scene",
        "supports",
        "conclusion",
    ]
    assert _raised(parse_lesson, lesson) == _pairs(found)[0]


def test_a_document_lists_each_bad_field() -> None:
    found = _pairs(document_failures(_with(document(), DOCUMENT_BAD)))
    alone = [_raised(parse_document, _with(document(), [bad])) for bad in DOCUMENT_BAD]
    assert sorted(found) == sorted(alone)


def test_unknown_fields_are_each_listed() -> None:
    found = case_failures({**case_data(), "colour": "red", "size": 3})
    assert [f.field for f in found] == ["colour", "size"]


# --- the console import ------------------------------------------------------------------------


def test_the_service_lists_every_field_of_every_bad_item(reviewer: User) -> None:
    lesson = lesson_data(["#0"], lesson_type="guess", conclusion=7)
    items = [case_data(), _with(case_data(incident="INC-2"), CASE_BAD), lesson]
    events = Event.objects.count()

    with pytest.raises(ImportProblems) as refused:
        console_import(kind=ITEMS, items=items, actor=reviewer, text=_text(items))

    problems = refused.value.problems
    assert sorted((p.item, p.field) for p in problems) == sorted(
        [(1, field) for _name, _value, field in CASE_BAD] + [(2, "lesson_type"), (2, "conclusion")]
    )
    lines = item_lines(_text(items))
    assert {p.line for p in problems} == {lines[1], lines[2]}
    assert not Case.objects.exists() and Event.objects.count() == events


def test_the_service_lists_every_field_of_two_bad_documents(operator: User) -> None:
    items = [
        _with(document(), DOCUMENT_BAD),
        document(doc_key="rule-y", kind="memo", valid_to="2026-01-01T00:00:00+08:00"),
    ]
    with pytest.raises(ImportProblems) as refused:
        console_import(kind=DOCUMENTS, items=items, actor=operator, text=_text(items))

    assert sorted((p.item, p.field) for p in refused.value.problems) == sorted(
        [(0, field) for _name, _value, field in DOCUMENT_BAD] + [(1, "kind"), (1, "valid_to")]
    )
    assert not Document.objects.exists()


def test_the_page_lists_each_fields_problem(reviewer: User) -> None:
    items = [_with(case_data(), CASE_BAD)]
    client = csrf_client(reviewer)

    response = client.post(
        "/import/",
        {"kind": ITEMS, "text": _text(items), "csrfmiddlewaretoken": csrf_token(client)},
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert f"Nothing was imported: {len(CASE_BAD)} problems" in html
    table = html.split('id="import-problems"', 1)[1]
    for _name, _value, field in CASE_BAD:
        assert f">{field}<" in table
    assert not Case.objects.exists()


# --- the commands: still the first error --------------------------------------------------------


def test_import_cases_still_reports_the_first_error_only(
    tmp_path: Path, reviewer: User, at_now: Any
) -> None:
    item = _with(case_data(), CASE_BAD)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([item], ensure_ascii=False), encoding="utf-8")

    status, result = run_json("import_cases", str(path), "--as", reviewer.username)

    first = case_failures(item)[0]
    assert status != 0 and result["field"] == f"[0].{first.field}" == "[0].title"
    assert not Case.objects.exists()


def test_import_knowledge_still_reports_the_first_error_only(
    tmp_path: Path, operator: User
) -> None:
    item = _with(document(), DOCUMENT_BAD)
    path = tmp_path / "docs.json"
    path.write_text(json.dumps([item], ensure_ascii=False), encoding="utf-8")

    status, result = run_json("import_knowledge", str(path), "--as", operator.username)

    assert status != 0 and result["field"] == "[0].title"
    assert not Document.objects.exists()
