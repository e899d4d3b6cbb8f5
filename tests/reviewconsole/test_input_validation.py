"""One input validator for every door: command-line files and options, API bodies, review forms.

Whatever a command is given, ``--json`` prints exactly one JSON object and a refusal exits
non-zero naming the field; what the API refuses, the command-line imports refuse too, on both
databases, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from agentapi import schemas as api_schemas
from agentapi.services import token_create
from experience.cases.models import Case, EvidenceCheck, Skill
from experience.core.models import Status
from knowledge.models import Document
from reviewconsole import inputs
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Event
from tests.api.conftest import BearerClient, case_body
from tests.experience.conftest import case_data
from tests.helpers import run_json
from tests.knowledge.conftest import document
from tests.ui.factories import submit_case

pytestmark = pytest.mark.django_db


@pytest.fixture
def nothing_written() -> Iterator[None]:
    before = (
        Case.objects.count(),
        Skill.objects.count(),
        Document.objects.count(),
        Event.objects.count(),
    )
    yield
    after = (
        Case.objects.count(),
        Skill.objects.count(),
        Document.objects.count(),
        Event.objects.count(),
    )
    assert after == before


def write_text(tmp_path: Path, text: str, name: str = "input.json") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def write_items(tmp_path: Path, items: Any) -> str:
    # ensure_ascii: a lone surrogate or a NUL is written as a JSON escape, as a user's file would.
    return write_text(tmp_path, json.dumps(items))


# --- the validator itself ----------------------------------------------------------------------


def test_nesting_beyond_the_limit_is_refused_before_parsing() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ValidationFailure) as refused:
        inputs.load_json(deep, field="FILE")
    assert refused.value.field == "FILE" and refused.value.message == inputs.TOO_DEEP


def test_nesting_at_the_limit_is_accepted_and_brackets_in_strings_do_not_count() -> None:
    at_limit = "[" * inputs.MAX_DEPTH + "]" * inputs.MAX_DEPTH
    assert inputs.load_json(at_limit) is not None
    assert inputs.load_json(json.dumps({"text": "[" * 1000 + '\\"{'})) == {
        "text": "[" * 1000 + '\\"{'
    }
    with pytest.raises(ValidationFailure):
        inputs.load_json("[" * (inputs.MAX_DEPTH + 1) + "]" * (inputs.MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ('{"a": [1, "x\\u0000y"]}', "a[1]", inputs.NUL_TEXT),
        ('{"a": {"b": "\\ud800"}}', "a.b", inputs.BAD_UNICODE),
        ('{"a\\u0000": 1}', "a\\u0000", inputs.NUL_TEXT),
        ('{"n": 9007199254740993}', "n", inputs.INT_OUT_OF_RANGE),
        ('{"n": -9007199254740993}', "n", inputs.INT_OUT_OF_RANGE),
        ('{"n": 1' + "0" * 5000 + "}", "n", inputs.INT_OUT_OF_RANGE),
        ('{"n": NaN}', "n", inputs.NOT_FINITE),
        ('{"n": [Infinity]}', "n[0]", inputs.NOT_FINITE),
        ('{"n": 1e400}', "n", inputs.NOT_FINITE),
        ("[1, 2", "FILE", None),
    ],
)
def test_values_that_cannot_be_stored_are_refused_naming_their_path(
    text: str, field: str, message: str | None
) -> None:
    with pytest.raises(ValidationFailure) as refused:
        inputs.load_json(text, field="FILE")
    assert refused.value.field == field
    if message is not None:
        assert refused.value.message.endswith(message)


def test_the_largest_safe_integers_are_accepted() -> None:
    assert inputs.load_json(f"[{2**53}, {-(2**53)}, 1.5, true]") == [2**53, -(2**53), 1.5, True]


def test_bytes_that_are_not_utf8_are_refused_naming_the_field() -> None:
    with pytest.raises(ValidationFailure) as refused:
        inputs.load_json(b'["\xff"]', field="file")
    assert refused.value.field == "file" and refused.value.message == inputs.NOT_UTF8


def test_the_api_refuses_text_by_the_same_rule() -> None:
    # One rule, so the API and the imports cannot drift apart.
    assert api_schemas.NUL_TEXT is inputs.NUL_TEXT
    assert api_schemas.BAD_UNICODE is inputs.BAD_UNICODE
    assert api_schemas.MAX_FACT_INT == inputs.MAX_JSON_INT


# --- command-line imports ------------------------------------------------------------------------


def test_a_file_nested_200000_deep_is_refused_as_one_json_object(
    operator: User, tmp_path: Path, nothing_written: None
) -> None:
    deep = write_text(tmp_path, "[" * 200_000 + "]" * 200_000)
    for command in ("import_cases", "import_knowledge", "import_thread"):
        status, result = run_json(command, deep, "--as", operator.username)
        assert status != 0
        assert result["ok"] is False
        assert result["field"] == "FILE" and result["error"] == inputs.TOO_DEEP


def test_a_directory_given_as_file_is_refused_naming_file(
    operator: User, tmp_path: Path, nothing_written: None
) -> None:
    status, result = run_json("import_cases", str(tmp_path), "--as", operator.username)
    assert status != 0 and result["ok"] is False and result["field"] == "FILE"


def test_a_file_that_is_not_utf8_is_refused_naming_file(
    operator: User, tmp_path: Path, nothing_written: None
) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"title": "caf\xe9"}]')
    status, result = run_json("import_knowledge", str(path), "--as", operator.username)
    assert status != 0 and result["field"] == "FILE" and result["error"] == inputs.NOT_UTF8


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"title": "门店\x00范围"}, "[0].title", inputs.NUL_TEXT),
        ({"title": "门店\ud800范围"}, "[0].title", inputs.BAD_UNICODE),
        (
            {"observations": [{"source_id": "thread:1#m1", "excerpt": "顾客\x00说"}]},
            "[0].observations[0].excerpt",
            inputs.NUL_TEXT,
        ),
        (
            {"observations": [{"source_id": "thread:1#m1", "excerpt": "x", "note\x00": "y"}]},
            "[0].observations[0].note\\u0000",
            inputs.NUL_TEXT,
        ),
    ],
)
def test_case_imports_refuse_text_no_database_can_store(
    operator: User,
    tmp_path: Path,
    nothing_written: None,
    changes: dict[str, Any],
    field: str,
    message: str,
) -> None:
    path = write_items(tmp_path, [case_data(**changes)])
    status, result = run_json("import_cases", path, "--as", operator.username)
    assert status != 0
    assert result["field"] == field and result["error"].endswith(message)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"text": "正文\x00"}, "[1].text", inputs.NUL_TEXT),
        ({"title": "\udfff"}, "[1].title", inputs.BAD_UNICODE),
        (
            {"requirements": {"basket_cents": {"max": 2**53 + 1}}},
            "[1].requirements.basket_cents.max",
            inputs.INT_OUT_OF_RANGE,
        ),
        ({"version": 2**31}, "[1].version", "2147483647"),
        ({"version": 2**64}, "[1].version", inputs.INT_OUT_OF_RANGE),
        ({"version": 2**53 + 1}, "[1].version", inputs.INT_OUT_OF_RANGE),
    ],
)
def test_knowledge_imports_refuse_what_no_database_can_store(
    operator: User,
    tmp_path: Path,
    nothing_written: None,
    changes: dict[str, Any],
    field: str,
    message: str,
) -> None:
    # A good document first: it is not stored either.
    path = write_items(tmp_path, [document(doc_key="good"), document(**changes)])
    status, result = run_json("import_knowledge", path, "--as", operator.username)
    assert status != 0
    assert result["field"] == field and message in result["error"]


def test_the_largest_database_version_is_accepted(operator: User, tmp_path: Path) -> None:
    path = write_items(tmp_path, [document(version=2**31 - 1)])
    status, result = run_json("import_knowledge", path, "--as", operator.username)
    assert status == 0, result
    assert Document.objects.get(doc_key="rule-x").version == 2**31 - 1


def test_an_integer_too_long_to_convert_is_refused_naming_its_path(
    operator: User, tmp_path: Path, nothing_written: None
) -> None:
    text = json.dumps([document()]).replace('"version": 1', '"version": 1' + "0" * 5000)
    status, result = run_json(
        "import_knowledge", write_text(tmp_path, text), "--as", operator.username
    )
    assert status != 0 and result["field"] == "[0].version"


def test_an_option_that_is_not_unicode_text_is_refused_naming_the_option(
    operator: User, tmp_path: Path, nothing_written: None
) -> None:
    # Undecodable bytes on a command line reach Python as lone surrogates.
    path = write_items(tmp_path, [case_data()])
    status, result = run_json("import_cases", path, "--as", operator.username + "\udcff")
    assert status != 0
    assert result["field"] == "--as" and result["error"] == inputs.BAD_UNICODE


def test_an_unexpected_error_still_prints_one_json_object_and_exits_non_zero(
    operator: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experience.management.commands import import_cases

    def broken(**_: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(import_cases, "items_import", broken)
    path = write_items(tmp_path, [case_data()])
    status, result = run_json("import_cases", path, "--as", operator.username)
    assert status != 0
    assert result["ok"] is False and "RuntimeError" in result["error"]


# --- the API refuses the same payloads ------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "loc", "field"),
    [
        ({"title": "门店\x00范围"}, ["title"], "[0].title"),
        ({"title": "门店\ud800范围"}, ["title"], "[0].title"),
        (
            {"observations": [{"source_id": "thread:9#m1", "excerpt": "顾客\x00说"}]},
            ["observations", 0, "excerpt"],
            "[0].observations[0].excerpt",
        ),
    ],
)
def test_the_api_and_the_import_refuse_the_same_case(
    agent: User,
    operator: User,
    tmp_path: Path,
    changes: dict[str, Any],
    loc: list[Any],
    field: str,
) -> None:
    body = case_body(**changes)
    client = BearerClient(token_create(user=agent, name="parity").text)
    events = Event.objects.count()

    response = client.post_json("/api/v1/cases", body)

    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", *loc]
    status, result = run_json(
        "import_cases", write_items(tmp_path, [body]), "--as", operator.username
    )
    assert status != 0
    assert result["field"] == field
    if "\x00" in json.dumps(changes, ensure_ascii=False):
        assert detail["msg"].endswith(result["error"])
    assert Event.objects.count() == events
    assert not Case.objects.exists()


def test_the_api_refuses_a_deeply_nested_body_without_a_server_error(agent: User) -> None:
    client = BearerClient(token_create(user=agent, name="deep").text)
    response = client.post(
        "/api/v1/cases", data="[" * 100_000 + "]" * 100_000, content_type="application/json"
    )
    assert response.status_code in (400, 422)


# --- review forms name the field that is wrong ---------------------------------------------------


def _url(name: str, item: Case) -> str:
    return reverse(f"experience:{name}", args=[item.id.split(":", 1)[1]])


def test_a_review_reason_too_long_is_refused_naming_the_reason(
    operator: User, reviewer: User, client: Client
) -> None:
    candidate = submit_case(operator, incident="INC-INPUT-1")
    client.force_login(reviewer)
    response = client.post(
        _url("case-review", candidate), {"decision": "reject", "reason": "r" * 2001}
    )
    assert response.status_code == 422
    errors = response.context["review_errors"]
    assert [condition.name for condition in errors] == ["reason"]
    assert "2000" in errors[0].label
    assert "Choose approve or reject." not in response.content.decode()
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE


def test_a_missing_decision_still_names_the_decision(
    operator: User, reviewer: User, client: Client
) -> None:
    candidate = submit_case(operator, incident="INC-INPUT-2")
    client.force_login(reviewer)
    response = client.post(_url("case-review", candidate), {"decision": "publish", "reason": "x"})
    assert response.status_code == 422
    assert [condition.name for condition in response.context["review_errors"]] == ["decision"]


def test_an_evidence_note_too_long_is_refused_naming_the_note(
    operator: User, reviewer: User, client: Client
) -> None:
    candidate = submit_case(operator, incident="INC-INPUT-3")
    client.force_login(reviewer)
    response = client.post(_url("case-check", candidate), {"key": "diagnosis/0", "note": "n" * 501})
    assert response.status_code == 400
    text = response.content.decode()
    assert "note" in text and "500" in text
    assert "Name the evidence item" not in text
    assert not EvidenceCheck.objects.exists()
