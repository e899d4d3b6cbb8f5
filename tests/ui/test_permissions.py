"""Every console URL × every role, and writes refused without a CSRF token."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.ui.conftest import ROLES, csrf_client, csrf_token

ANON, AGENT, OPERATOR, REVIEWER, ADMIN = ROLES
LOGIN = 302  # anonymous users are sent to the login page


def _digest(item_id: str) -> str:
    return item_id.split(":", 1)[1]


def _investigation(actor: User) -> tuple[str, str]:
    """A stored investigation and a ticket still waiting to run, both of tenant teahouse."""
    from investigations.models import Investigation, InvestigationRequest
    from reviewconsole import clock

    now = clock.now()
    stored = Investigation.objects.create(
        run_id="inv-matrix", text="券用不了", tenant="teahouse", provider="scripted",
        status="answered", started_at=now, finished_at=now, actor=actor,
    )  # fmt: skip
    waiting = InvestigationRequest.objects.create(
        run_id="inv-matrix-2", text="券用不了", tenant="teahouse", actor=actor,
        created_at=now, updated_at=now,
    )  # fmt: skip
    return stored.get_absolute_url(), waiting.get_absolute_url()


def _urls(memory: dict[str, Any], candidate: Any) -> dict[str, str]:
    case = _digest(memory["cases"][0].id)
    skill = _digest(memory["skill"].id)
    investigation, investigation_run = _investigation(candidate.submitted_by)
    return {
        "dashboard": reverse("home"),
        "queue": reverse("experience:queue"),
        "case": reverse("experience:case-detail", args=[_digest(candidate.id)]),
        "case_checklist": reverse("experience:case-checklist", args=[_digest(candidate.id)]),
        "case_revoke": reverse("experience:case-revoke", args=[case]),
        "skill": reverse("experience:skill-detail", args=[skill]),
        "skill_checklist": reverse("experience:skill-checklist", args=[skill]),
        "skill_revoke": reverse("experience:skill-revoke", args=[skill]),
        "runs": reverse("experience:run-list"),
        "run": reverse("experience:run-detail", args=["run-ui-1"]),
        "documents": reverse("knowledge:document-list"),
        "document": reverse("knowledge:document-detail", args=["rule-b", 2]),
        "search": reverse("knowledge:search-preview"),
        "lexicon": reverse("knowledge:lexicon"),
        "document_new": reverse("knowledge:document-new"),
        "document_new_version": reverse("knowledge:document-new-version", args=["rule-b", 2]),
        "document_checklist": reverse("knowledge:document-checklist", args=["case-a-draft", 1]),
        "document_review": reverse("knowledge:document-review", args=["case-a-draft", 1]),
        "document_submit": reverse("knowledge:document-submit", args=["case-a-draft", 1]),
        "document_revoke": reverse("knowledge:document-revoke", args=["rule-b", 2]),
        "audit": reverse("event-list"),
        "users": reverse("user-list"),
        "import": reverse("experience:import"),
        "user_new": reverse("user-new"),
        "user_edit": reverse("user-edit", args=["rita"]),
        "audit_csv": reverse("event-export"),
        "case_check": reverse("experience:case-check", args=[_digest(candidate.id)]),
        "case_review": reverse("experience:case-review", args=[_digest(candidate.id)]),
        "skill_review": reverse("experience:skill-review", args=[skill]),
        "investigations": reverse("investigations:investigation-new"),
        "investigation": investigation,
        "investigation_run": investigation_run,
    }


# GET: expected status per role, in ROLES order (anonymous, agent, operator, reviewer, admin).
GET_MATRIX = {
    "dashboard": (LOGIN, 403, 200, 200, 200),
    "queue": (LOGIN, 403, 200, 200, 200),
    "case": (LOGIN, 403, 200, 200, 200),
    # Without htmx the live checklist sends the browser to the case page.
    "case_checklist": (LOGIN, 403, 302, 302, 302),
    "case_revoke": (LOGIN, 403, 403, 200, 403),
    "skill": (LOGIN, 403, 200, 200, 200),
    "skill_checklist": (LOGIN, 403, 302, 302, 302),
    "skill_revoke": (LOGIN, 403, 403, 200, 403),
    "runs": (LOGIN, 403, 403, 200, 200),
    "run": (LOGIN, 403, 403, 200, 200),
    "documents": (LOGIN, 403, 200, 200, 200),
    "document": (LOGIN, 403, 200, 200, 200),
    "search": (LOGIN, 403, 200, 200, 403),
    # Operators edit the lexicon; admins read it.
    "lexicon": (LOGIN, 403, 200, 403, 200),
    # Operators write documents; reviewers and admins read them.
    "document_new": (LOGIN, 403, 200, 403, 403),
    "document_new_version": (LOGIN, 403, 200, 403, 403),
    "document_checklist": (LOGIN, 403, 302, 302, 302),
    "document_revoke": (LOGIN, 403, 200, 403, 403),
    "document_review": (405, 405, 405, 405, 405),
    "document_submit": (405, 405, 405, 405, 405),
    "audit": (LOGIN, 403, 403, 403, 200),
    # Reviewers import cases, skills and lessons; operators those and documents; admins nothing.
    "import": (LOGIN, 403, 200, 200, 403),
    # Only admins manage users, in the console's own pages.
    "users": (LOGIN, 403, 403, 403, 200),
    "user_new": (LOGIN, 403, 403, 403, 200),
    "user_edit": (LOGIN, 403, 403, 403, 200),
    "audit_csv": (LOGIN, 403, 403, 403, 200),
    # Admins audit investigations (the list, a stored one, a run in progress) but run none.
    "investigations": (LOGIN, 403, 200, 200, 200),
    "investigation": (LOGIN, 403, 200, 200, 200),
    "investigation_run": (LOGIN, 403, 200, 200, 200),
    # Write endpoints answer GET with 405 whoever asks.
    "case_check": (405, 405, 405, 405, 405),
    "case_review": (405, 405, 405, 405, 405),
    "skill_review": (405, 405, 405, 405, 405),
}

# POST with a valid CSRF token and an empty reason: who gets through to the review rules.
POST_MATRIX = {
    "case_check": ({"key": "diagnosis/0"}, (LOGIN, 403, 403, 303, 403)),
    "case_review": ({"decision": "approve", "reason": ""}, (LOGIN, 403, 403, 422, 403)),
    "case_revoke": ({"reason": ""}, (LOGIN, 403, 403, 422, 403)),
    "skill_review": ({"decision": "approve", "reason": ""}, (LOGIN, 403, 403, 422, 403)),
    "skill_revoke": ({"reason": ""}, (LOGIN, 403, 403, 422, 403)),
    "document_new": ({"title": ""}, (LOGIN, 403, 422, 403, 403)),
    "document_new_version": ({"title": ""}, (LOGIN, 403, 422, 403, 403)),
    "document_review": ({"decision": "approve", "reason": ""}, (LOGIN, 403, 422, 403, 403)),
    "document_revoke": ({"reason": ""}, (LOGIN, 403, 422, 403, 403)),
    # Operators submit their drafts (this one was imported: submitted already, so refused).
    "document_submit": ({"change_note": ""}, (LOGIN, 403, 422, 403, 403)),
    "investigations": ({"text": ""}, (LOGIN, 403, 422, 422, 403)),
    "import": ({"kind": "items", "text": ""}, (LOGIN, 403, 422, 422, 403)),
    "user_new": ({"username": ""}, (LOGIN, 403, 403, 403, 422)),
    "user_edit": ({"role": ""}, (LOGIN, 403, 403, 403, 422)),
    "lexicon": ({"action": "set", "term": "", "canonical": ""}, (LOGIN, 403, 422, 403, 403)),
}


@pytest.fixture
def urls(memory: dict[str, Any], candidate: Any, knowledge: None) -> dict[str, str]:
    return _urls(memory, candidate)


@pytest.mark.parametrize("name", sorted(GET_MATRIX))
def test_get_matrix(name: str, urls: dict[str, str], users: dict[str, User | None]) -> None:
    observed = tuple(csrf_client(users[role]).get(urls[name]).status_code for role in ROLES)
    assert observed == GET_MATRIX[name], f"{name}: {dict(zip(ROLES, observed, strict=True))}"


@pytest.mark.parametrize("name", sorted(POST_MATRIX))
def test_post_matrix_with_token(
    name: str, urls: dict[str, str], users: dict[str, User | None]
) -> None:
    data, expected = POST_MATRIX[name]
    observed = []
    for role in ROLES:
        client = csrf_client(users[role])
        observed.append(
            client.post(urls[name], data, HTTP_X_CSRFTOKEN=csrf_token(client)).status_code
        )
    assert tuple(observed) == expected, f"{name}: {dict(zip(ROLES, observed, strict=True))}"


@pytest.mark.parametrize("name", sorted(POST_MATRIX))
@pytest.mark.parametrize("role", ROLES)
def test_writes_without_csrf_token_are_refused(
    name: str, role: str, urls: dict[str, str], users: dict[str, User | None]
) -> None:
    data, _ = POST_MATRIX[name]
    response = csrf_client(users[role]).post(urls[name], data)
    assert response.status_code == 403
    assert b"CSRF" in response.content


def test_anonymous_is_sent_to_login_with_next(urls: dict[str, str]) -> None:
    response = csrf_client(None).get(urls["queue"])
    assert response["Location"] == f"{reverse('login')}?next={urls['queue']}"


def test_anonymous_htmx_request_reloads_into_login(urls: dict[str, str]) -> None:
    response = csrf_client(None).get(urls["queue"], headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(reverse("login"))


def test_agent_sees_why_the_console_is_closed(
    users: dict[str, User | None], urls: dict[str, str]
) -> None:
    response = csrf_client(users["agent"]).get(urls["dashboard"])
    assert response.status_code == 403
    assert b"service account" in response.content


def test_logout_needs_post_and_token(users: dict[str, User | None]) -> None:
    client = csrf_client(users["reviewer"])
    assert client.post(reverse("logout")).status_code == 403
    assert client.get(reverse("logout")).status_code == 405
    response = client.post(reverse("logout"), HTTP_X_CSRFTOKEN=csrf_token(client))
    assert response.status_code == 302
    assert client.get(reverse("home")).status_code == 302


@pytest.mark.parametrize("role", ["operator", "reviewer", "admin"])
def test_navigation_matches_permissions(role: str, users: dict[str, User | None]) -> None:
    html = csrf_client(users[role]).get(reverse("home")).content.decode()
    nav = html.split('<nav aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    assert ("Audit log" in nav) == (role == "admin")
    assert ("Runs" in nav) == (role in ("reviewer", "admin"))
    assert ("Search preview" in nav) == (role in ("reviewer", "operator"))
    assert "Review queue" in nav and "Knowledge" in nav
    assert "Investigations" in nav  # admins audit them; the others also run them
