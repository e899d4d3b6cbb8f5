"""Importing from the console: the commands' formats, every problem of a file listed at once by
item, line and field, nothing written when any item fails, permission and tenant checked on the
server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile

from experience.cases.models import Case, Skill
from experience.review.console_imports import (
    DOCUMENTS,
    ITEMS,
    ImportProblems,
    console_import,
    item_lines,
)
from knowledge.models import Document
from knowledge.services import CONTENT_DIFFERS, documents_import
from reviewconsole.models import Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.experience.conftest import case_data, skill_data
from tests.knowledge.conftest import document
from tests.ui.conftest import csrf_client, csrf_token

URL = "/import/"


def _text(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=2)


def _problems(kind: str, items: list[Any], actor: User) -> list[tuple[int | None, str]]:
    with pytest.raises(ImportProblems) as refused:
        console_import(kind=kind, items=items, actor=actor, text=_text(items))
    return [(p.item, p.field) for p in refused.value.problems]


def test_item_lines_are_where_each_element_starts() -> None:
    text = '[\n  {"a": "x,]"},\n  {"b": [1,\n 2]},\n\n  3\n]'
    assert item_lines(text) == [2, 3, 6]
    assert item_lines("[]") == []


def test_every_parse_problem_is_listed_and_nothing_is_written(reviewer: User) -> None:
    good = case_data()
    no_title = case_data(incident="INC-2")
    del no_title["title"]
    bad_time = case_data(incident="INC-3", valid_from="yesterday")
    items = [good, no_title, bad_time]
    events = Event.objects.count()

    with pytest.raises(ImportProblems) as refused:
        console_import(kind=ITEMS, items=items, actor=reviewer, text=_text(items))

    problems = refused.value.problems
    assert [(p.item, p.field) for p in problems] == [(1, "title"), (2, "valid_from")]
    lines = item_lines(_text(items))
    assert [p.line for p in problems] == [lines[1], lines[2]]
    assert not Case.objects.exists() and Event.objects.count() == events


def test_a_whole_file_is_imported_with_its_references(reviewer: User) -> None:
    items = [case_data(), case_data(incident="INC-2", title="二号店水果茶券不可用"),
             skill_data(["#0", "#1"])]  # fmt: skip
    result = console_import(kind=ITEMS, items=items, actor=reviewer, text=_text(items))
    assert len(result.created) == 3
    assert Case.objects.count() == 2 and Skill.objects.count() == 1


def test_problems_only_storing_finds_are_listed_for_every_item(operator: User) -> None:
    documents_import(items=[document(), document(doc_key="rule-y")], actor=operator)
    changed = [
        document(text="别的正文。"),
        document(doc_key="rule-z"),
        document(doc_key="rule-y", title="别的标题"),
    ]

    problems = _problems(DOCUMENTS, changed, operator)

    assert problems == [(0, ""), (2, "")]
    assert not Document.objects.filter(doc_key="rule-z").exists()


def test_another_tenant_is_refused_naming_the_item_and_field(
    make_user: Callable[[str, str], User],
) -> None:
    make_user("ophelia", Role.OPERATOR)
    limited = user_set_role(username="ophelia", role=Role.OPERATOR, tenants=["coffeehouse"])
    items = [document(tenant="coffeehouse"), document(doc_key="rule-y", tenant="teahouse")]

    assert _problems(DOCUMENTS, items, limited) == [(1, "tenant")]
    assert not Document.objects.exists()


def test_the_message_of_a_content_conflict_is_the_services(operator: User) -> None:
    documents_import(items=[document()], actor=operator)
    items = [document(text="别的正文。")]
    with pytest.raises(ImportProblems) as refused:
        console_import(kind=DOCUMENTS, items=items, actor=operator)
    assert CONTENT_DIFFERS in refused.value.problems[0].message


def test_a_file_that_is_not_a_list_is_one_problem_of_the_file(reviewer: User) -> None:
    assert _problems(ITEMS, {"type": "case"}, reviewer) == [(None, "$")]  # type: ignore[arg-type]


# --- the page ---------------------------------------------------------------------------------


def _post(user: User, data: dict[str, Any]) -> Any:
    client = csrf_client(user)
    return client.post(URL, {**data, "csrfmiddlewaretoken": csrf_token(client)})


def test_the_page_lists_every_problem_by_item_line_and_field(reviewer: User) -> None:
    no_title = case_data()
    del no_title["title"]
    items = [no_title, case_data(incident="INC-3", valid_from="yesterday")]

    response = _post(reviewer, {"kind": ITEMS, "text": _text(items)})

    assert response.status_code == 422
    html = response.content.decode()
    assert "Nothing was imported: 2 problems" in html
    table = html.split('id="import-problems"', 1)[1]
    assert "title" in table and "valid_from" in table and "[0]" in table and "[1]" in table
    assert not Case.objects.exists()


def test_the_page_imports_an_uploaded_file(operator: User) -> None:
    upload = SimpleUploadedFile("docs.json", _text([document(approved=False)]).encode())

    response = _post(operator, {"kind": DOCUMENTS, "file": upload})

    assert response.status_code == 200
    assert "Imported: 1 created" in response.content.decode()
    assert Document.objects.get().status == "submitted"


def test_the_page_refuses_a_kind_the_user_may_not_import(reviewer: User) -> None:
    response = _post(reviewer, {"kind": DOCUMENTS, "text": _text([document()])})
    assert response.status_code == 422 and "kind" in response.context["form"].errors
    assert not Document.objects.exists()


def test_the_page_is_refused_to_those_who_import_nothing(admin_user: User) -> None:
    assert csrf_client(admin_user).get(URL).status_code == 403
    assert _post(admin_user, {"kind": ITEMS, "text": "[]"}).status_code == 403


def test_the_import_needs_a_csrf_token(reviewer: User) -> None:
    response = csrf_client(reviewer).post(URL, {"kind": ITEMS, "text": _text([case_data()])})
    assert response.status_code == 403
    assert not Case.objects.exists()


def test_a_file_and_a_paste_together_are_refused(reviewer: User) -> None:
    upload = SimpleUploadedFile("cases.json", b"[]")
    response = _post(reviewer, {"kind": ITEMS, "text": "[]", "file": upload})
    assert response.status_code == 422


def test_the_page_reads_in_chinese(reviewer: User) -> None:
    client = csrf_client(reviewer)
    html = client.get(URL, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "或粘贴 JSON" in html and "文件内容" in html and "Or paste the JSON" not in html
    no_title = case_data()
    del no_title["title"]
    response = client.post(
        URL,
        {"kind": ITEMS, "text": _text([no_title]), "csrfmiddlewaretoken": csrf_token(client)},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    )
    assert "未导入任何内容：1 个问题" in response.content.decode()
