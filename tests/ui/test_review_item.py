"""The review-item blocks (templates/_review_item.html) every item page shares."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case, Skill
from experience.core.models import Status
from tests.ui.factories import submit_skill

HTMX = {"HX-Request": "true"}
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
SHARED = TEMPLATES / "_review_item.html"


def _url(name: str, item: Case | Skill) -> str:
    return reverse(f"experience:{name}", args=[item.id.split(":", 1)[1]])


# Markup that belongs to one shared block: no page writes it again.
@pytest.mark.parametrize(
    "marker",
    [
        'class="badge badge-checked"',  # evidence item
        'class="checklist"',  # approval checklist
        '<pre class="diff"',  # line diff
        'class="chips"',  # scope
        "Revocation impact (stored)",  # stored impact
        'id="review-panel"',  # review panel
        "These conditions are unmet:",  # a refusal's unmet conditions
        'class="section section-observations"',  # a case's four sections
    ],
)
def test_each_block_is_written_once(marker: str) -> None:
    writers = [
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if marker in path.read_text(encoding="utf-8")
    ]
    assert writers == ["_review_item.html"]


def test_word_differences_are_written_once() -> None:
    """Every page marks changed words through ``_word_diff.html`` (issue 39, item 4)."""
    writers = [
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if 'class="word-diff"' in path.read_text(encoding="utf-8")
    ]
    assert writers == ["_word_diff.html"]


def test_status_badges_show_validity_only_when_known() -> None:
    html = render_to_string(
        "_review_item.html#status-badges", {"kind": "case", "status": "approved", "expired": True}
    )
    assert 'badge-case">case<' in html and 'badge-approved">approved<' in html
    assert "badge-expired" in html and "available" not in html
    html = render_to_string(
        "_review_item.html#status-badges",
        {"kind": "skill", "status": "approved", "available": False},
    )
    assert "badge-unavailable" in html and "badge-expired" not in html
    html = render_to_string(
        "_review_item.html#status-badges", {"kind": "rule", "status": "draft", "available": None}
    )
    assert "available" not in html and "expired" not in html


def test_lifecycle_facts_name_who_when_and_why() -> None:
    at = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    item = SimpleNamespace(
        approved_at=at,
        approved_by=None,  # an imported document may have no approver
        approved_reason="",
        rejected_at=None,
        revoked_at=at,
        revoked_by=SimpleNamespace(username="rita"),
        revoked_reason="wrong store list",
    )
    html = " ".join(render_to_string("_review_item.html#lifecycle-facts", {"item": item}).split())
    assert re.search(r"<dt>Approved</dt><dd>2026-03-01 \d\d:30</dd>", html)
    assert re.search(r"<dt>Revoked</dt><dd>rita · 2026-03-01 \d\d:30 — wrong store list</dd>", html)
    assert "Rejected" not in html


def test_a_case_page_carries_a_csrf_token_in_every_check_form(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(_url("case-detail", candidate)).content.decode()
    forms = re.findall(r"<form method=\"post\".*?</form>", html, re.S)
    checks = [form for form in forms if 'name="key"' in form]
    assert checks, "a reviewer sees a check form per unchecked evidence item"
    assert all('name="csrfmiddlewaretoken"' in form for form in forms)


def test_refusing_a_skill_with_htmx_answers_the_review_panel(
    memory: dict[str, Any], operator: User, reviewer: User, client: Client
) -> None:
    # The skill page names the review panel it shows, so the refusal swaps only that panel.
    skill = submit_skill(operator, [memory["cases"][0].id], title="One incident only")
    client.force_login(reviewer)
    response = client.post(
        _url("skill-review", skill), {"decision": "approve", "reason": "fine"}, headers=HTMX
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="review-panel"')
    assert "too_few_incidents" in html and "<html" not in html
    skill.refresh_from_db()
    assert skill.status == Status.CANDIDATE


def test_list_pages_show_short_ids_with_the_full_id_as_title(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(reverse("experience:queue")).content.decode()
    assert f'title="{candidate.id}">{candidate.id[: len("case:") + 12]}…</span>' in html


def test_item_pages_link_their_curation_panels_by_digest(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(candidate.get_absolute_url()).content.decode()
    assert reverse("curation:case-similar", args=[candidate.digest]) in html
