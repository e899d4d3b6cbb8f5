"""In Chromium: an operator writes a document and submits it with a change note, the operator
asked to approve it finds it in the submitted list and in a mail and approves it, and it is
revoked with its impact."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail

from experience.core.models import ItemType
from experience.runs.models import Reference
from knowledge.models import Document
from reviewconsole.roles import Role
from tests.browser.conftest import VIEWPORT, htmx_settled, login, screen


@pytest.fixture
def second_operator(make_user: Callable[[str, str], User]) -> User:
    user = make_user("otto", Role.OPERATOR)
    user.email = "otto@example.test"
    user.save(update_fields=["email"])
    return user


def test_create_approve_by_another_operator_then_revoke_with_impact(
    page: Any, browser: Any, live_server: Any, operator: User, second_operator: User
) -> None:
    login(page, operator.username)
    page.goto("/knowledge/")
    page.get_by_role("link", name="New document").click()
    page.wait_for_url("**/knowledge/new/")
    page.fill("#id_doc_key", "rule-browser")
    page.fill("#id_title", "浏览器活动优惠券条件")
    page.fill("#id_rule_key", "coupon-browser")
    page.fill("#id_text", "仅限小程序下单、满30元使用。")
    page.fill("#id_source", "ops://rulebook/browser")
    page.fill("#id_tenant", "teahouse")
    page.fill("#id_brand", "leaf-and-cup")
    page.fill("#id_campaign", "campaign-browser")
    page.fill("#id_stores", "store-001, store-002")
    page.fill("#id_requirements", "channel: miniapp\nbasket_cents: >= 3000")
    page.fill("#id_valid_from", "2026-10-01T00:00:00")
    screen(page, "knowledge-document-new")

    # A validity that ends before it starts is refused on its field, nothing saved.
    page.fill("#id_valid_to", "2026-09-01T00:00:00")
    page.get_by_role("button", name="Save as a draft").click()
    errors = page.locator("#document-form-errors")
    errors.wait_for()
    assert "Valid to" in errors.inner_text()
    assert not Document.objects.filter(doc_key="rule-browser").exists()

    page.fill("#id_valid_to", "")
    page.get_by_role("button", name="Save as a draft").click()
    page.wait_for_url("**/knowledge/teahouse/rule-browser/v1/")
    assert "Saved doc:rule-browser@1 as a draft" in page.locator(".messages").inner_text()
    rows = page.locator("table.requirements tbody tr")
    shown = {
        rows.nth(i).locator("th").inner_text(): rows.nth(i).locator("td").inner_text()
        for i in range(rows.count())
    }
    assert shown == {"Basket (cents) basket_cents": "at least 3000", "Channel channel": "miniapp"}
    # A draft is in no reviewer's queue until its author submits it, with a change note.
    assert Document.objects.get(doc_key="rule-browser").status == "draft"
    assert not mail.outbox
    screen(page, "knowledge-document-draft")
    with htmx_settled(page, "/submit/"):
        page.get_by_role("button", name="Submit for review").click()
    assert "change_note" in page.locator("#review-errors").inner_text()
    assert Document.objects.get(doc_key="rule-browser").status == "draft"
    page.fill("#change-note", "New campaign: mini-program orders from 30 yuan")
    page.get_by_role("button", name="Submit for review").click()
    page.locator(".messages").get_by_text("is submitted for review").wait_for()
    assert "Asked to approve: otto" in page.locator(".messages").inner_text()
    # The author sees that someone else must approve it.
    unmet = page.locator("#approval-checklist li.unmet").all_inner_texts()
    assert any("Someone other than its author approves it (four eyes)" in u for u in unmet)
    # The approver is asked by mail, with the change note and a link to the version.
    assert [m.to for m in mail.outbox] == [["otto@example.test"]]
    assert "mini-program orders from 30 yuan" in mail.outbox[0].body

    other = browser.new_context(viewport=VIEWPORT, locale="en-US", base_url=live_server.url)
    approver = other.new_page()
    login(approver, second_operator.username)
    # Submitted versions are what an approver's queue lists.
    approver.goto("/knowledge/?status=submitted")
    approver.get_by_role("link", name="doc:rule-browser@1").click()
    approver.wait_for_url("**/knowledge/teahouse/rule-browser/v1/")
    assert "New campaign" in approver.locator(".change-note").inner_text()
    approver.fill("#review-reason", "Matches the signed campaign brief")
    approver.locator("#approval-checklist").get_by_text("Every condition is met.").wait_for()
    approver.get_by_role("button", name="Approve").click()
    approver.locator(".messages").get_by_text("is approved and published").wait_for()
    saved = Document.objects.get(doc_key="rule-browser")
    assert (saved.status, saved.approved_by) == ("approved", second_operator)

    Reference.objects.create(
        run_id="run-browser-read",
        item_id=saved.public_id,
        item_type=ItemType.DOCUMENT,
        read_at=datetime(2026, 10, 2, 3, 0, tzinfo=UTC),
    )
    approver.get_by_role("link", name="Revoke…").click()
    approver.wait_for_url("**/revoke/")
    assert "run-browser-read" in approver.locator("#preview-runs").inner_text()
    screen(approver, "knowledge-document-revoke")
    approver.get_by_role("button", name="Confirm revocation").click()
    approver.locator("#revoke-errors").get_by_text("A reason is written").wait_for()
    approver.fill("#revoke-reason", "Campaign withdrawn by the brand")
    approver.get_by_role("button", name="Confirm revocation").click()
    approver.wait_for_url("**/knowledge/teahouse/rule-browser/v1/")
    stored = approver.get_by_role("region", name="Revocation impact (stored)")
    assert "run-browser-read" in stored.inner_text()
    assert "Campaign withdrawn by the brand" in stored.inner_text()
    screen(approver, "knowledge-document-revoked")
    approver.set_viewport_size({"width": 390, "height": 844})
    screen(approver, "knowledge-document-revoked-390")
    other.close()
