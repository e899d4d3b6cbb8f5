"""Intake in a real browser: a thread becomes a candidate by picking messages, then another
reviewer checks its evidence and approves it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

from curation.models import NearDuplicate
from experience.cases.models import Case
from experience.core.models import Status
from tests.browser.conftest import login, screen
from tests.curation.conftest import THREAD_FILE, THREAD_ID
from tests.ui.factories import submit_case

pytestmark = pytest.mark.browser
SOURCE = f"thread:{THREAD_ID}"


def test_thread_to_candidate_to_approval_by_another_reviewer(
    page: Any, operator: User, reviewer: User
) -> None:
    call_command("import_thread", str(THREAD_FILE), "--as", "olivia", stdout=None)

    login(page, "olivia")
    page.goto("/curation/")
    page.get_by_role("link", name="Investigation threads").click()
    page.get_by_role("link", name="二号店小程序优惠券无法使用（活动 B）").click()
    expect(page.locator("#msg-m11")).to_contain_text("machine text")
    screen(page, "curation-thread")

    for name, value in {
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "deployment": "release-1",
        "incident": "INC-0918-B",
        "title": "二号店优惠券无法使用：活动 B 门店范围漏配",
        "valid_to": "2027-09-18T00:00",
        "diagnosis": "活动 B 的适用门店列表不含二号店。",
        "counter-1-hypothesis": "客户端缓存未刷新",
        "counter-1-statement": "刷新和重新登录后仍失败。",
        "counter-1-refutes": "仅客户端缓存；服务端缓存未排除",
        "outcome": "补充门店后顾客可以下单。",
    }.items():
        page.fill(f"#id_{name}", value)
    page.select_option("#id_use__m1", "observation")
    page.select_option("#id_use__m4", "counter-1")
    page.select_option("#id_use__m8", "diagnosis")
    page.select_option("#id_use__m10", "outcome")
    # The operator selects the part of m8 that matters; the page copies the selection.
    page.evaluate(
        """() => {
          const quote = document.querySelector('[data-unit-text="unit-m8"]');
          const text = quote.firstChild;
          const start = text.data.indexOf("适用门店列表");
          const range = document.createRange();
          range.setStart(text, start);
          range.setEnd(text, text.data.indexOf("截图见附件"));
          const selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
        }"""
    )
    page.locator("#unit-m8").get_by_role("button", name="Use selected text").click()
    expect(page.locator("#id_excerpt__m8")).to_have_value(
        "适用门店列表只有一号店和三号店，二号店漏配了。"
    )
    page.fill("#id_excerpt__m10", "好了，谢谢")

    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#candidate-preview")
    expect(preview.locator(".section-diagnosis")).to_contain_text(f"{SOURCE}#m8")
    expect(preview.locator(".section-outcome")).to_contain_text("好了，谢谢")
    expect(preview.locator(".section-counterevidence")).to_contain_text(f"{SOURCE}#m4")
    assert not Case.objects.exists()
    screen(page, "curation-preview")

    page.get_by_role("button", name="Submit candidate for review").click()
    expect(page.locator(".messages")).to_contain_text("Candidate submitted to the review queue")
    expect(page.locator(".page-head .badge-candidate")).to_be_visible()
    expect(page.locator("#ev-diagnosis-0")).to_contain_text(f"{SOURCE}#m8")
    case = Case.objects.get()
    assert case.submitted_by == operator

    page.context.clear_cookies()
    login(page, "rita")
    page.get_by_role("link", name="Review queue").click()
    page.get_by_role("link", name=case.title).click()
    page.locator("#ev-diagnosis-0").get_by_role("button").click()
    expect(page.locator("#ev-diagnosis-0 .badge-checked")).to_be_visible()
    page.fill("#review-reason", "配置截图与消息 m8 一致；刷新假设已排除到客户端为止")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".messages")).to_contain_text("” is now approved.")
    case.refresh_from_db()
    assert case.status == Status.APPROVED and case.approved_by == reviewer


def test_a_reviewer_records_one_incident_from_the_similar_panel(
    page: Any, operator: User, reviewer: User
) -> None:
    first = submit_case(operator, incident="INC-B1")
    second = submit_case(operator, incident="INC-B2")
    assert NearDuplicate.objects.filter(status="open").count() == 1
    login(page, "rita")
    page.goto(f"/curation/cases/{first.id.removeprefix('case:')}/similar/")
    panel = page.locator("#similar-panel")
    expect(panel).to_contain_text(second.title)
    screen(page, "curation-similar")
    panel.locator("select[name=canonical]").select_option("INC-B1")
    panel.locator("textarea[name=reason]").fill("同一门店同一天，同一配置错误")
    panel.get_by_role("button", name="Same incident").click()
    expect(page.locator(".messages")).to_contain_text("Recorded as one incident.")
    expect(panel).to_contain_text("2 summaries, counted as one incident")
    page.goto("/curation/similar/")
    expect(page.locator("#link-results")).to_contain_text("No pair waits for a decision.")
    screen(page, "curation-links")
