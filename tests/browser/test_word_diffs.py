"""In a browser, on a laptop (1366×900) and a phone (390×844), in English and in Chinese: a
candidate compared with the approved case it resembles, a document version with the one before
it and a re-review entry with the version it cites, each marked word by word with <ins>/<del>
that a screen reader names; nothing wider than the phone, axe-clean (issue 39, items 4, 8, 13)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from curation.models import NearDuplicate, ReReview, ReReviewReason
from experience.review.revocation import case_revoke
from knowledge.models import Document
from reviewconsole import clock
from tests.browser.conftest import DEADLINE_MS, PHONE, VIEWPORT, screen
from tests.conftest import PASSWORD
from tests.ui.factories import approved_case, submit_case

pytestmark = pytest.mark.browser

LANGUAGES = {"en": ("en-US", "en"), "zh": ("zh-CN", "zh-hans")}
SIZES = {"laptop": VIEWPORT, "phone": PHONE}
# What a screen reader hears at the start of a mark, by language.
COMPARE_LABEL = {"en": "[only in: Candidate: ", "zh": "[仅见于：候选案例："}
VERSION_LABEL = {"en": "[added in v2: ", "zh": "[v2 新增："}


@pytest.fixture
def world(
    knowledge: None, memory: dict[str, Any], operator: User, reviewer: User
) -> dict[str, Any]:
    approved = approved_case(
        submitter=operator,
        reviewer=reviewer,
        incident="INC-DIFF-1",
        title="二号店小程序优惠券无法使用：活动B适用门店漏配 store list",
    )
    candidate = submit_case(
        operator,
        incident="INC-DIFF-2",
        title="二号店小程序优惠券被拒：活动B门店范围缺少二号店 store list",
    )
    first, second = sorted((approved, candidate), key=lambda c: c.id)
    link, _ = NearDuplicate.objects.get_or_create(
        case_a=first, case_b=second, defaults={"similarity": 0.7, "detected_at": clock.now()}
    )
    skill = memory["skill"]
    case_revoke(case=memory["cases"][0], actor=reviewer, reason="its store list was never checked")
    entry = ReReview.objects.create(
        item_id=skill.id,
        item_type="skill",
        tenant=skill.tenant,
        title=skill.title,
        reason=ReReviewReason.DOCUMENT_NEW_VERSION,
        document_id="doc:rule-b@1",
        detail="doc:rule-b@2",
        detected_at=clock.now(),
    )
    document = Document.objects.get(doc_key="rule-b", version=2)
    return {"link": link, "entry": entry, "document": document.get_absolute_url()}


def _hidden_text(locator: Any) -> str:
    return str(locator.locator(".visually-hidden").first.text_content())


def _fits(page: Any, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("language", list(LANGUAGES))
def test_compare_version_and_rereview_diffs_are_marked_word_by_word(
    browser: Any, live_server: Any, world: dict[str, Any], size: str, language: str
) -> None:
    locale, accept = LANGUAGES[language]
    viewport = SIZES[size]
    context = browser.new_context(
        viewport=viewport,
        locale=locale,
        extra_http_headers={"Accept-Language": accept},
        base_url=live_server.url,
    )
    context.set_default_timeout(DEADLINE_MS)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "ravi")
    page.fill("#id_password", PASSWORD)
    page.press("#id_password", "Enter")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    name = f"{size}-{language}"

    # A candidate beside the approved case it resembles: the title's words marked.
    page.goto(f"/curation/similar/{world['link'].pk}/")
    title_left = page.locator("#row-title ~ .compare-left").first
    inserted = title_left.locator("ins").first
    expect(inserted).to_be_visible()
    assert _hidden_text(inserted) == COMPARE_LABEL[language]
    expect(page.locator("#row-title ~ .compare-right").first.locator("del").first).to_be_visible()
    # Not colour alone: an insertion underlined, a deletion struck through.
    assert "underline" in inserted.evaluate("e => getComputedStyle(e).textDecorationLine")
    struck = page.locator("#row-title ~ .compare-right del").first
    assert "line-through" in struck.evaluate("e => getComputedStyle(e).textDecorationLine")
    _fits(page, viewport["width"])
    screen(page, f"diffs/compare-{name}")

    # A document version beside the one before it, field by field.
    page.goto(world["document"])
    requirement = page.locator("#document-diff dd.field-requirements")
    expect(requirement.locator("ins")).to_contain_text("3500")
    expect(requirement.locator("del")).to_contain_text("3000")
    assert _hidden_text(requirement.locator("ins").first) == VERSION_LABEL[language]
    _fits(page, viewport["width"])
    screen(page, f"diffs/document-{name}")

    # The re-review entry: both versions linked, what changed one click away, no Confirm.
    page.goto("/curation/rereview/")
    row = page.locator(f"#rereview-{world['entry'].pk}")
    expect(row.locator(".badge-unavailable")).to_be_visible()
    assert row.locator("input[name=reason][id^=confirm-]").count() == 0
    row.locator("details.version-diff-details summary").click()
    expect(row.locator("dd.field-requirements ins")).to_contain_text("3500")
    expect(row.locator("a.mono").nth(1)).to_have_attribute("href", world["document"])
    _fits(page, viewport["width"])
    for select in page.locator("select").all():
        box = select.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    screen(page, f"diffs/rereview-{name}")
    context.close()
