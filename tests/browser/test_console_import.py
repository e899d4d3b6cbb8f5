"""In Chromium: an operator pastes a file of documents with two faulty items, sees both problems
at once by item, line and field with nothing stored, corrects them and imports the file."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User

from knowledge.models import Document
from tests.browser.conftest import PHONE, login, screen
from tests.knowledge.conftest import document


def test_an_operator_sees_every_problem_then_imports(page: Any, operator: User) -> None:
    login(page, operator.username)
    page.goto("/knowledge/")
    page.get_by_role("link", name="Import a file").click()
    page.wait_for_url("**/import/")

    faulty = [document(approved=False, title=""), document(doc_key="rule-y", approved=False)]
    faulty[1]["valid_from"] = "soon"
    page.select_option("#id_kind", "documents")
    page.fill("#id_text", json.dumps(faulty, ensure_ascii=False, indent=2))
    page.get_by_role("button", name="Import").click()
    problems = page.locator("#import-problems")
    problems.wait_for()
    rows = problems.locator("tbody tr")
    assert rows.count() == 2
    assert "[0]" in rows.nth(0).inner_text() and "title" in rows.nth(0).inner_text()
    assert "[1]" in rows.nth(1).inner_text() and "valid_from" in rows.nth(1).inner_text()
    assert not Document.objects.exists()
    screen(page, "import/import-problems")

    fixed = [document(approved=False), document(doc_key="rule-y", approved=False)]
    page.select_option("#id_kind", "documents")
    page.fill("#id_text", json.dumps(fixed, ensure_ascii=False, indent=2))
    page.get_by_role("button", name="Import").click()
    page.get_by_text("Imported: 2 created").wait_for()
    assert sorted(d.status for d in Document.objects.all()) == ["submitted", "submitted"]
    page.set_viewport_size(PHONE)
    screen(page, "import/import-done-390")
