"""``import_knowledge``: atomic, idempotent, permission-checked, errors naming the JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from knowledge.models import Document, DocumentStore
from knowledge.services import CONTENT_DIFFERS
from reviewconsole.models import Action, Event
from tests.helpers import run_json
from tests.knowledge.conftest import FIXTURE, document

pytestmark = pytest.mark.django_db


def write(tmp_path: Path, items: Any) -> str:
    path = tmp_path / "docs.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_fixture_imports_then_reimports_as_a_no_op(operator: User) -> None:
    status, first = run_json("import_knowledge", str(FIXTURE), "--as", operator.username)
    assert status == 0
    assert len(first["created"]) >= 10 and first["unchanged"] == []
    events = Event.objects.count()

    status, second = run_json("import_knowledge", str(FIXTURE), "--as", operator.username)

    assert status == 0
    assert second == {"created": [], "unchanged": first["created"]}
    assert Event.objects.count() == events


def test_import_records_the_operator_as_creator_and_approver(
    operator: User, tmp_path: Path
) -> None:
    run_json("import_knowledge", write(tmp_path, [document()]), "--as", operator.username)

    doc = Document.objects.get(doc_key="rule-x")
    assert doc.created_by == operator and doc.approved_by == operator and doc.approved
    actions = set(Event.objects.filter(target="doc:rule-x@1").values_list("action", flat=True))
    assert actions == {Action.DOCUMENT_CREATE, Action.DOCUMENT_APPROVE}
    assert list(DocumentStore.objects.filter(document=doc).values_list("store", flat=True)) == [
        "store-100"
    ]


def test_same_key_and_version_with_other_content_is_refused(operator: User, tmp_path: Path) -> None:
    run_json("import_knowledge", write(tmp_path, [document()]), "--as", operator.username)

    status, result = run_json(
        "import_knowledge",
        write(tmp_path, [document(text="改过的正文。")]),
        "--as",
        operator.username,
    )

    assert status != 0
    assert result["field"] == "[0]"
    assert CONTENT_DIFFERS in result["error"]
    assert Document.objects.get(doc_key="rule-x").text == document()["text"]


def test_a_bad_item_leaves_nothing_behind(operator: User, tmp_path: Path) -> None:
    items = [
        document(doc_key="good-1"),
        document(doc_key="good-2"),
        document(doc_key="bad", valid_from="2026-09-01T00:00:00"),
    ]

    status, result = run_json("import_knowledge", write(tmp_path, items), "--as", operator.username)

    assert status != 0
    assert result["field"] == "[2].valid_from"
    assert Document.objects.count() == 0
    assert Event.objects.count() == 1  # only the operator's creation by the fixture


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"stores": []}, "[0].stores"),
        ({"stores": ["store-1", "*"]}, "[0].stores[1]"),
        ({"campaign": "unknown"}, "[0].campaign"),
        ({"brand": ""}, "[0].brand"),
        ({"kind": "faq"}, "[0].kind"),
        ({"version": 0}, "[0].version"),
        ({"version": "1"}, "[0].version"),
        ({"doc_key": "Rule X"}, "[0].doc_key"),
        ({"title": "x" * 301}, "[0].title"),
        ({"valid_to": "2026-08-01T00:00:00+08:00"}, "[0].valid_to"),
        ({"published_at": "yesterday"}, "[0].published_at"),
        ({"approved": "yes"}, "[0].approved"),
        ({"requirements": {"basket_cents": {"min": "30"}}}, "[0].requirements.basket_cents.min"),
        ({"colour": "red"}, "[0].colour"),
    ],
)
def test_invalid_documents_name_the_json_path(
    operator: User, tmp_path: Path, overrides: dict[str, Any], path: str
) -> None:
    status, result = run_json(
        "import_knowledge", write(tmp_path, [document(**overrides)]), "--as", operator.username
    )

    assert status != 0
    assert result["ok"] is False
    assert result["field"] == path
    assert Document.objects.count() == 0


def test_missing_field_is_named(operator: User, tmp_path: Path) -> None:
    item = document()
    del item["published_at"]
    status, result = run_json(
        "import_knowledge", write(tmp_path, [item]), "--as", operator.username
    )

    assert status != 0 and result["field"] == "[0].published_at"


def test_duplicate_in_one_file_is_refused(operator: User, tmp_path: Path) -> None:
    status, result = run_json(
        "import_knowledge", write(tmp_path, [document(), document()]), "--as", operator.username
    )
    assert status != 0 and result["field"] == "[1]"


def test_malformed_json_is_refused(operator: User, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"doc_key": ', encoding="utf-8")

    status, result = run_json("import_knowledge", str(path), "--as", operator.username)

    assert status != 0 and result["field"] == "FILE" and "line 1" in result["error"]


def test_not_an_array_is_refused(operator: User, tmp_path: Path) -> None:
    status, result = run_json(
        "import_knowledge", write(tmp_path, document()), "--as", operator.username
    )
    assert status != 0 and result["field"] == "$"


@pytest.mark.parametrize("role_fixture", ["agent", "reviewer", "admin_user"])
def test_only_operators_import(
    request: pytest.FixtureRequest, role_fixture: str, tmp_path: Path
) -> None:
    user = request.getfixturevalue(role_fixture)

    status, result = run_json(
        "import_knowledge", write(tmp_path, [document()]), "--as", user.username
    )

    assert status != 0 and result["unmet"] == ["not_permitted"]
    assert Document.objects.count() == 0


def test_unknown_user_is_named(tmp_path: Path, db: None) -> None:
    status, result = run_json("import_knowledge", write(tmp_path, [document()]), "--as", "nobody")
    assert status != 0 and result["field"] == "--as"


def test_reimport_with_another_lifecycle_state_is_refused(operator: User, tmp_path: Path) -> None:
    run_json(
        "import_knowledge", write(tmp_path, [document(approved=False)]), "--as", operator.username
    )

    status, result = run_json(
        "import_knowledge", write(tmp_path, [document(approved=True)]), "--as", operator.username
    )

    assert status != 0 and result["field"] == "[0].approved"
    assert not Document.objects.get().approved
