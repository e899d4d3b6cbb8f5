"""Revocation: the impact preview, the confirmation the server recomputes, the stored list."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.runs.models import RevocationImpact
from reviewconsole.models import Action, Event
from tests.ui.factories import record_run

HTMX = {"HX-Request": "true"}


def _url(name: str, item: Case | Skill) -> str:
    return reverse(f"experience:{name}", args=[item.id.split(":", 1)[1]])


def test_preview_lists_the_skills_and_runs_it_reaches(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    client.force_login(reviewer)
    html = client.get(_url("case-revoke", case)).content.decode()
    assert "Impact preview" in html
    assert _url("skill-detail", skill) in html and escape(skill.title) in html
    assert reverse("experience:run-detail", args=["run-ui-1"]) in html
    assert f'name="previewed_skills" value="{skill.id}"' in html
    case.refresh_from_db()
    assert case.status == Status.APPROVED  # a preview changes nothing


def test_preview_as_a_dialog_fragment(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(_url("case-revoke", memory["cases"][0]), headers=HTMX).content.decode()
    assert html.lstrip().startswith('<div class="panel" id="revoke-form">')
    assert 'id="dialog-title"' in html


def test_confirm_needs_a_reason(memory: dict[str, Any], reviewer: User, client: Client) -> None:
    client.force_login(reviewer)
    response = client.post(_url("case-revoke", memory["cases"][0]), {"reason": ""}, headers=HTMX)
    assert response.status_code == 422
    assert "reason_required" in response.content.decode()
    assert not RevocationImpact.objects.exists()


def test_confirm_revokes_stores_the_impact_and_shows_it(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    client.force_login(reviewer)
    preview = client.get(_url("case-revoke", case))
    assert preview.status_code == 200
    response = client.post(
        _url("case-revoke", case),
        {
            "reason": "store list was fixed upstream",
            "previewed_skills": skill.id,
            "previewed_runs": "run-ui-1",
        },
    )
    assert response.status_code == 303 and response["Location"] == _url("case-detail", case)
    impact = RevocationImpact.objects.get(item_id=case.id)
    assert impact.skills == [skill.id] and impact.runs == ["run-ui-1"]
    assert impact.revoked_by == reviewer
    assert Event.objects.filter(action=Action.CASE_REVOKE, target=case.id, actor=reviewer).exists()
    page = client.get(response["Location"]).content.decode()
    assert "Revocation impact (stored)" in page and "store list was fixed upstream" in page
    assert "The impact changed" not in page
    # Afterwards the revoke page shows the stored list instead of a form.
    after = client.get(_url("case-revoke", case)).content.decode()
    assert "Confirm revocation" not in after and "run-ui-1" in after


def test_the_server_recomputes_and_says_when_the_impact_changed(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    client.force_login(reviewer)
    client.get(_url("case-revoke", case))
    record_run("run-ui-2", skill, [case.id])  # a run reads the case between preview and confirm
    response = client.post(
        _url("case-revoke", case),
        {"reason": "wrong", "previewed_skills": skill.id, "previewed_runs": "run-ui-1"},
        follow=True,
    )
    assert (
        "The impact changed between your preview and the confirmation" in response.content.decode()
    )
    assert RevocationImpact.objects.get(item_id=case.id).runs == ["run-ui-1", "run-ui-2"]


def test_a_candidate_cannot_be_revoked(candidate: Case, reviewer: User, client: Client) -> None:
    client.force_login(reviewer)
    page = client.get(_url("case-revoke", candidate)).content.decode()
    assert "Only approved items can be revoked" in page
    response = client.post(_url("case-revoke", candidate), {"reason": "x"})
    assert response.status_code == 422 and "not_approved" in response.content.decode()


def test_skill_revocation_lists_runs(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    skill = memory["skill"]
    client.force_login(reviewer)
    assert "run-ui-1" in client.get(_url("skill-revoke", skill)).content.decode()
    response = client.post(
        _url("skill-revoke", skill), {"reason": "recipe too broad"}, headers=HTMX
    )
    assert response["HX-Redirect"] == _url("skill-detail", skill)
    assert RevocationImpact.objects.get(item_id=skill.id).runs == ["run-ui-1"]
    skill.refresh_from_db()
    assert skill.status == Status.REVOKED


def test_run_trace_shows_references_steps_and_reason(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = client.get(reverse("experience:run-detail", args=["run-ui-1"])).content.decode()
    for text in (
        "Memory read in this run",
        memory["skill"].id,
        memory["cases"][0].id,
        "search_knowledge",
        "coupon conditions",
        "all_steps_passed",
        "doc:rule-b@1",
        "channel=miniapp",
    ):
        assert text in html
    assert client.get(reverse("experience:run-detail", args=["no-such-run"])).status_code == 404


def test_a_reason_too_long_is_refused_naming_the_reason_not_cut(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    case = memory["cases"][0]
    client.force_login(reviewer)
    response = client.post(_url("case-revoke", case), {"reason": "r" * 2001})
    assert response.status_code == 422
    assert [condition.name for condition in response.context["errors"]] == ["reason"]
    case.refresh_from_db()
    assert case.status == Status.APPROVED and not RevocationImpact.objects.exists()
