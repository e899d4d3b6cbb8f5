"""Checking evidence, the live checklist, approving and rejecting through the console."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case, EvidenceCheck, Skill
from experience.core.models import Status
from reviewconsole.models import Action, Event
from tests.ui.factories import submit_case, submit_skill

HTMX = {"HX-Request": "true"}


def _url(name: str, item: Case | Skill) -> str:
    return reverse(f"experience:{name}", args=[item.id.split(":", 1)[1]])


def test_mark_checked_with_htmx_swaps_the_item_and_the_checklist(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    response = client.post(
        _url("case-check", candidate),
        {"key": "diagnosis/0", "note": "matches the thread"},
        headers=HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="ev-diagnosis-0"' in html and "matches the thread" in html
    assert 'id="approval-checklist" hx-swap-oob="true"' in html
    assert "no_checked_diagnosis_evidence" not in html
    check = EvidenceCheck.objects.get(evidence__case=candidate, evidence__key="diagnosis/0")
    assert check.checked_by == reviewer
    assert Event.objects.filter(
        action=Action.CASE_VERIFY, actor=reviewer, target=candidate.id
    ).exists()


def test_mark_checked_without_js_redirects_to_the_item(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    response = client.post(_url("case-check", candidate), {"key": "observations/0"})
    assert response.status_code == 303
    assert response["Location"].endswith("#ev-observations-0")
    page = client.get(response["Location"]).content.decode()
    assert "Marked observations/0 as checked." in page


def test_checking_an_unknown_evidence_key_is_404(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    assert client.post(_url("case-check", candidate), {"key": "diagnosis/9"}).status_code == 404


def test_live_checklist_follows_the_reason(candidate: Case, reviewer: User, client: Client) -> None:
    client.force_login(reviewer)
    empty = client.get(_url("case-checklist", candidate), headers=HTMX).content.decode()
    typed = client.get(
        _url("case-checklist", candidate) + "?reason=checked", headers=HTMX
    ).content.decode()
    assert "reason_required" in empty and "reason_required" not in typed
    assert "no_checked_diagnosis_evidence" in typed
    assert "<html" not in typed


def test_approve_with_reason_after_a_check(candidate: Case, reviewer: User, client: Client) -> None:
    client.force_login(reviewer)
    client.post(_url("case-check", candidate), {"key": "diagnosis/0"})
    response = client.post(
        _url("case-review", candidate), {"decision": "approve", "reason": "matches the thread"}
    )
    assert response.status_code == 303
    candidate.refresh_from_db()
    assert candidate.status == Status.APPROVED and candidate.approved_by == reviewer
    assert candidate.approved_reason == "matches the thread"
    page = client.get(response["Location"]).content.decode()
    assert f"The case “{candidate.title}” is now approved." in page


def test_approve_with_htmx_reloads_the_page(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    client.post(_url("case-check", candidate), {"key": "diagnosis/0"})
    response = client.post(
        _url("case-review", candidate), {"decision": "approve", "reason": "ok"}, headers=HTMX
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == _url("case-detail", candidate)


def test_refusal_names_every_unmet_condition_inline(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    response = client.post(
        _url("case-review", candidate), {"decision": "approve", "reason": " "}, headers=HTMX
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="review-panel"')
    assert 'role="alert"' in html
    for name in ("reason_required", "no_checked_diagnosis_evidence"):
        assert name in html
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE


def test_approving_ones_own_submission_is_refused(reviewer: User, client: Client) -> None:
    own = submit_case(reviewer, incident="INC-OWN")
    client.force_login(reviewer)
    client.post(_url("case-check", own), {"key": "diagnosis/0"})
    response = client.post(
        _url("case-review", own), {"decision": "approve", "reason": "looks right"}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "own_submission" in html and "four eyes" in html
    assert "<html" in html  # without htmx the whole page comes back with the errors
    own.refresh_from_db()
    assert own.status == Status.CANDIDATE


def test_reject_needs_a_reason_then_rejects(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    refused = client.post(_url("case-review", candidate), {"decision": "reject", "reason": ""})
    assert refused.status_code == 422 and "reason_required" in refused.content.decode()
    done = client.post(
        _url("case-review", candidate), {"decision": "reject", "reason": "only recovery feedback"}
    )
    assert done.status_code == 303
    candidate.refresh_from_db()
    assert (
        candidate.status == Status.REJECTED
        and candidate.rejected_reason == "only recovery feedback"
    )


def test_a_decision_must_be_named(candidate: Case, reviewer: User, client: Client) -> None:
    client.force_login(reviewer)
    response = client.post(_url("case-review", candidate), {"decision": "publish", "reason": "x"})
    assert response.status_code == 422
    assert "Choose approve or reject." in response.content.decode()


def test_identity_comes_from_the_session_not_the_form(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    client.post(_url("case-check", candidate), {"key": "diagnosis/0", "checked_by": "someone-else"})
    client.post(
        _url("case-review", candidate),
        {"decision": "approve", "reason": "ok", "actor": "admin", "approved_by": "ada"},
    )
    candidate.refresh_from_db()
    assert candidate.approved_by == reviewer
    assert Event.objects.filter(action=Action.CASE_APPROVE).get().actor_name == reviewer.username


def test_operator_sees_the_checklist_but_no_review_form(
    candidate: Case, operator: User, client: Client
) -> None:
    client.force_login(operator)
    html = client.get(_url("case-detail", candidate)).content.decode()
    assert "Approval checklist" in html and "not_reviewer" in html
    assert 'name="decision"' not in html and "Mark checked" not in html


def test_case_page_shows_version_diff_and_same_incident(
    operator: User, reviewer: User, client: Client
) -> None:
    first = submit_case(operator, incident="INC-V")
    second = submit_case(
        operator,
        incident="INC-V",
        supersedes=first.id,
        diagnosis={
            "statement": "Campaign B's store list does not include store 002 or store 003.",
            "evidence": [
                {"source_id": "thread:INC-V#m7", "excerpt": "Ops: two stores are missing."}
            ],
        },
    )
    client.force_login(reviewer)
    html = client.get(_url("case-detail", second)).content.decode()
    assert "Version history" in html
    assert (
        '<span class="del">-diagnosis: Campaign B&#x27;s store list does not include store 002.</span>'
        in html
    )
    assert (
        '<span class="add">+diagnosis: Campaign B&#x27;s store list does not include store 002 or store 003.</span>'
        in html
    )
    assert "Other cases of this incident" in html and _url("case-detail", first) in html


def test_skill_review_refusal_names_the_skill_conditions(
    memory: dict[str, Any], operator: User, reviewer: User, client: Client
) -> None:
    first = memory["cases"][0]
    skill = submit_skill(operator, [first.id], title="One incident only")
    client.force_login(reviewer)
    page = client.get(_url("skill-detail", skill)).content.decode()
    assert "too_few_incidents" in page
    response = client.post(_url("skill-review", skill), {"decision": "approve", "reason": "fine"})
    assert response.status_code == 422
    assert "too_few_incidents" in response.content.decode()
    skill.refresh_from_db()
    assert skill.status == Status.CANDIDATE


def test_skill_page_says_why_it_is_unavailable(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    from experience.review.revocation import case_revoke

    case_revoke(case=memory["cases"][0], actor=reviewer, reason="wrong store")
    client.force_login(reviewer)
    html = client.get(_url("skill-detail", memory["skill"])).content.decode()
    assert "badge-unavailable" in html
    # The cited case is named by its title, not its hash.
    assert f"cited case “{memory['cases'][0].title}” is revoked" in html
