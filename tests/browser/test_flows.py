"""What only a browser shows: the review flows end to end, with screenshots and axe-core."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.cases.models import Case
from experience.core.models import Status
from experience.runs.models import RevocationImpact
from knowledge.models import Document
from reviewconsole.roles import Role
from tests.browser.conftest import htmx_settled, login, screen
from tests.ui.factories import submit_case

pytestmark = pytest.mark.browser


def _path(item_id: str) -> str:
    kind, digest = item_id.split(":", 1)
    return f"/{kind}s/{digest}/"


def test_reviewer_checks_evidence_and_approves_with_a_reason(
    page: Any, operator: User, reviewer: User
) -> None:
    case = submit_case(operator, incident="INC-BROWSER-1")
    page.goto("/accounts/login/")
    screen(page, "login")
    login(page, "rita")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to content")
    screen(page, "dashboard")

    page.get_by_role("link", name="Review queue").click()
    page.wait_for_url(re.compile(r"/queue/"))
    with htmx_settled(page, "/queue/"):
        # The queue's scope filters offer the values that exist.
        page.select_option("#id_campaign", "campaign-b")
    expect(page).to_have_url(re.compile(r"campaign=campaign-b"))
    expect(page.locator("#queue-results")).to_contain_text(case.title)
    screen(page, "queue")

    page.get_by_role("link", name=case.title).click()
    page.wait_for_url(re.compile(re.escape(_path(case.id))))
    expect(
        page.locator('#approval-checklist li.unmet[data-condition="no_checked_diagnosis_evidence"]')
    ).to_be_visible()
    screen(page, "case")

    page.fill("#note-ev-diagnosis-0", "matches message m7 of the thread")
    # The check's answer swaps in the evidence item and, out of band, the approval checklist.
    with htmx_settled(page, "/check/"):
        page.locator("#ev-diagnosis-0").get_by_role("button").click()
    expect(page.locator("#ev-diagnosis-0")).to_contain_text("matches message m7 of the thread")
    expect(page.locator("#ev-diagnosis-0 .badge-checked")).to_be_visible()
    expect(
        page.locator('#approval-checklist li.unmet[data-condition="no_checked_diagnosis_evidence"]')
    ).to_have_count(0)

    # Typing the reason asks for the checklist again (after htmx's input delay).
    with htmx_settled(page, "/checklist/"):
        page.fill("#review-reason", "diagnosis evidence checked; the refresh hypothesis is refuted")
    expect(page.locator("#approval-checklist")).to_contain_text("Every condition is met.")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("” is now approved.")
    expect(page.locator(".page-head .badge-approved")).to_be_visible()
    screen(page, "case-approved")

    case.refresh_from_db()
    assert case.status == Status.APPROVED and case.approved_by == reviewer


def test_approving_ones_own_submission_is_refused_with_the_reason(
    page: Any, reviewer: User
) -> None:
    own = submit_case(reviewer, incident="INC-BROWSER-OWN")
    login(page, "rita")
    page.goto(_path(own.id))
    with htmx_settled(page, "/check/"):
        page.locator("#ev-diagnosis-0").get_by_role("button").click()
    # Her own check is recorded, and marked as not counting toward approval (four eyes).
    expect(page.locator("#ev-diagnosis-0")).to_contain_text("checked by rita")
    expect(page.locator("#ev-diagnosis-0")).to_contain_text("checked by the submitter only")
    expect(page.locator("#ev-diagnosis-0 .badge-checked")).to_have_count(0)
    page.fill("#review-reason", "I am sure about my own diagnosis")
    page.get_by_role("button", name="Approve", exact=True).click()
    alert = page.locator("#review-panel [role=alert]")
    expect(alert).to_contain_text("Someone other than the submitter approves it (four eyes)")
    expect(alert.locator('[data-condition="own_submission"]')).to_be_visible()
    expect(alert.locator('[data-condition="no_checked_diagnosis_evidence"]')).to_be_visible()
    screen(page, "case-own-submission-refused")
    own.refresh_from_db()
    assert own.status == Status.CANDIDATE


def test_revocation_shows_the_impact_before_and_after(page: Any, memory: dict[str, Any]) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    login(page, "rita")
    page.goto(_path(case.id))
    page.locator(".page-head").get_by_role("link", name="Revoke…").click()
    dialog = page.locator("#dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#preview-skills")).to_contain_text(skill.title)
    expect(dialog.locator("#preview-runs")).to_contain_text("run-ui-1")
    screen(page, "revoke-dialog")

    dialog.get_by_role("button", name="Confirm revocation").click()
    expect(dialog.locator('[role=alert] [data-condition="reason_required"]')).to_be_visible()
    dialog.locator("#revoke-reason").fill("store list was corrected; the diagnosis no longer holds")
    dialog.get_by_role("button", name="Confirm revocation").click()

    expect(page.locator(".messages")).to_contain_text(
        "It reached 1 skill(s), 0 lesson(s), 0 conflict(s) and 1 run(s)"
    )
    stored = page.locator(".impact").first
    expect(stored).to_contain_text("Revocation impact (stored)")
    expect(stored.locator(".impact-skills")).to_contain_text(skill.title)
    expect(stored.locator(".impact-runs")).to_contain_text("run-ui-1")
    screen(page, "case-revoked")
    impact = RevocationImpact.objects.get(item_id=case.id)
    assert impact.skills == [skill.id] and impact.runs == ["run-ui-1"]

    stored.get_by_role("link", name=skill.title).click()
    expect(page.locator("#unavailable-reason")).to_contain_text(
        f"cited case “{case.title}” is revoked"
    )
    screen(page, "skill-unavailable")
    page.get_by_role("link", name="run-ui-1").click()
    expect(page.get_by_role("heading", name="Memory read in this run")).to_be_visible()
    screen(page, "run-trace")
    page.get_by_role("link", name="All runs").click()
    screen(page, "runs")


def test_operator_saves_a_new_version_and_previews_search(
    page: Any, knowledge: None, make_user: Callable[[str, str], User]
) -> None:
    base = Document.objects.get(doc_key="rule-b", version=2)
    approver = make_user("oscar", Role.OPERATOR)  # four eyes: not the new version's author
    login(page, "olivia")
    page.get_by_role("link", name="Knowledge", exact=True).click()
    page.wait_for_url(re.compile(r"/knowledge/$"))
    with htmx_settled(page, "/knowledge/"):
        page.fill("#id_campaign", "campaign-b")
    expect(page.locator("#document-results")).not_to_contain_text("doc:rule-a@2")
    screen(page, "knowledge")

    page.get_by_role("link", name="doc:rule-b@2").click()
    page.get_by_role("link", name="New version").click()
    page.fill("#id_text", base.text + "\n九月二十日起，外卖渠道同样适用。")
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.locator(".messages")).to_contain_text("Saved doc:rule-b@3 as a draft")

    page.goto("/knowledge/rule-b/v3/")
    expect(page.locator(".page-head .badge-draft")).to_be_visible()
    # The text field compared word by word (Chinese by character): the added sentence is marked.
    expect(page.locator("#document-diff .field-text ins")).to_contain_text(
        ["九月二十日起，外卖渠道同样适用。"]
    )
    screen(page, "document")
    # A draft reaches approvers once its author submits it, with what it changes.
    page.fill("#change-note", "Delivery orders count from 20 September")
    page.get_by_role("button", name="Submit for review").click()
    expect(page.locator(".messages")).to_contain_text("doc:rule-b@3 is submitted for review")

    new = Document.objects.get(doc_key="rule-b", version=3)
    page.context.clear_cookies()
    login(page, approver.username)
    page.goto("/admin/knowledge/document/?q=rule-b")
    page.locator(f"input[name=_selected_action][value='{new.pk}']").check()
    page.select_option("select[name=action]", "approve_selected")
    page.locator("button[name=index]").click()
    page.fill("#id_reason", "delivery channel confirmed by campaign owner")
    page.locator("input[type=submit][value=Confirm]").click()
    expect(page.locator(".messagelist")).to_contain_text("doc:rule-b@3")

    page.goto("/knowledge/search/")
    page.fill("#id_query", "活动B优惠券使用条件")
    page.fill("#id_store", "store-002")
    page.fill("#id_campaign", "campaign-b")
    page.fill("#id_occurred_at", "2026-09-18T14:00")
    page.fill("#id_channel", "miniapp")
    page.fill("#id_product", "fruit-tea")
    page.fill("#id_basket_cents", "3600")
    page.get_by_role("button", name="Search").click()
    results = page.locator("#search-results")
    expect(results).to_contain_text("doc:rule-b@3")
    expect(page).to_have_url(re.compile(r"query="))
    screen(page, "search-preview")


def test_admin_audits_the_log_in_chinese(page: Any, candidate: Case, admin_user: User) -> None:
    login(page, "ada")
    page.get_by_role("link", name="Audit log").click()
    page.select_option("#id_action", "experience.case.submit")
    expect(page).to_have_url(re.compile(r"action=experience.case.submit"))
    expect(page.locator("#event-results tbody tr")).to_have_count(1)
    # The target by its name, linked to its page, the full id on hover.
    target = page.locator("#event-results").get_by_role("link", name=candidate.title)
    expect(target).to_have_attribute("title", candidate.id)
    screen(page, "audit")
    page.select_option("#language-select", "zh-hans")
    expect(page.get_by_role("heading", name="审计日志")).to_be_visible()
    page.get_by_role("link", name="仪表盘").click()
    screen(page, "dashboard-zh")
