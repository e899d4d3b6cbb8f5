"""The review flow in a real browser: the decision panel stays in view, "Approve and next" walks
the queue, keyboard shortcuts (never while typing), focus after an htmx swap, no CSP error when a
resized textarea is swapped, aligned evidence and a compact header, in English and Chinese."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.cases.models import Case
from experience.core.models import Status
from experience.review.revocation import case_revoke
from tests.browser.conftest import DEADLINE_MS, SCREENS, htmx_settled, login, screen
from tests.ui.factories import case_data, submit_case

pytestmark = pytest.mark.browser

QUEUE = "/queue/?kind=case&sort=title"


def _path(item_id: str) -> str:
    kind, digest = item_id.split(":", 1)
    return f"/{kind}s/{digest}/"


@pytest.fixture
def candidates(operator: User) -> list[Case]:
    """Three candidates, in title order; the first has many observations to scroll through."""
    return [
        submit_case(operator, incident="INC-FLOW-A", observations=30),
        submit_case(operator, incident="INC-FLOW-B"),
        submit_case(operator, incident="INC-FLOW-C"),
    ]


def _in_viewport(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + 40 <= height


def _loaded(page: Any, case: Case) -> None:
    """Wait until the browser has navigated to ``case``'s page and loaded it."""
    page.wait_for_url(re.compile(re.escape(_path(case.id))))


def _scrolled_below(page: Any, y: int) -> None:
    """Wait until the window has scrolled below ``y``, on its scroll events (a wheel turned by
    the test scrolls on after the test goes on)."""
    page.evaluate(
        """({y, deadline}) => new Promise((resolve, reject) => {
          if (window.scrollY > y) return resolve();
          const timer = setTimeout(
            () => reject(new Error(`the window never scrolled below ${y}`)), deadline
          );
          window.addEventListener("scroll", function seen() {
            if (window.scrollY <= y) return;
            window.removeEventListener("scroll", seen);
            clearTimeout(timer);
            resolve();
          });
        })""",
        {"y": y, "deadline": DEADLINE_MS},
    )


def test_the_decision_panel_stays_in_view_while_the_evidence_scrolls(
    page: Any, candidates: list[Case], reviewer: User
) -> None:
    login(page, "rita")
    page.goto(_path(candidates[0].id))
    assert _in_viewport(page, "#review-panel h2")
    page.locator("#h-outcome").scroll_into_view_if_needed()
    page.mouse.wheel(0, 4000)
    _scrolled_below(page, 1500)
    assert _in_viewport(page, "#review-panel h2")
    expect(page.locator("#review-reason")).to_be_in_viewport()
    screen(page, "case-scrolled-decision-panel")


def test_approve_and_next_and_the_keyboard_walk_through_the_queue(
    page: Any, candidates: list[Case], reviewer: User
) -> None:
    first, second, third = candidates
    login(page, "rita")
    page.goto(QUEUE)
    # j moves through the rows, Enter opens one.
    page.keyboard.press("j")
    expect(page.locator(":focus")).to_have_text(first.title)
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(page.locator(":focus")).to_have_text(first.title)
    page.keyboard.press("Enter")
    _loaded(page, first)
    expect(page.locator("h1")).to_have_text(first.title)

    # j / k: next and previous candidate of the same queue. Each key is pressed once the page
    # before it has loaded (and console.js listens for keys).
    page.keyboard.press("j")
    _loaded(page, second)
    expect(page.locator("h1")).to_have_text(second.title)
    page.keyboard.press("k")
    _loaded(page, first)
    expect(page.locator("h1")).to_have_text(first.title)

    # Typing in the reason never fires a shortcut; a modifier neither.
    page.locator("#review-reason").fill("")
    page.locator("#review-reason").press_sequentially("jack")
    page.keyboard.press("Control+j")
    expect(page.locator("h1")).to_have_text(first.title)
    expect(page.locator("#review-reason")).to_have_value("jack")

    # c marks the focused evidence checked; a moves to the decision.
    page.locator("#ev-diagnosis-0 blockquote").click()
    expect(page.locator("#ev-diagnosis-0")).to_be_focused()
    # The check's swap settles (and focuses the checked item) before the next key is pressed.
    with htmx_settled(page, "/check/"):
        page.keyboard.press("c")
    expect(page.locator("#ev-diagnosis-0 .badge-checked")).to_be_visible()
    expect(
        page.locator('#approval-checklist li.unmet[data-condition="no_checked_diagnosis_evidence"]')
    ).to_have_count(0)
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)
    expect(page.locator("#ev-diagnosis-0")).to_be_focused()
    page.keyboard.press("a")
    expect(page.locator("#decision-approve")).to_be_focused()
    page.keyboard.press("r")
    expect(page.locator("#decision-reject")).to_be_focused()

    page.keyboard.press("?")
    expect(page.locator("#shortcut-help dl")).to_be_visible()
    screen(page, "case-shortcut-help")

    with htmx_settled(page, "/checklist/"):
        page.locator("#review-reason").fill("diagnosis evidence checked against the thread")
    expect(page.locator("#approval-checklist")).to_contain_text("Every condition is met.")
    page.get_by_role("button", name="Approve and next").click()
    _loaded(page, second)
    expect(page.locator(".messages")).to_contain_text("The case is now approved.")
    expect(page.locator("h1")).to_have_text(second.title)
    assert "queue=" in page.url

    page.locator("#review-reason").fill("same incident as another case")
    page.get_by_role("button", name="Reject and next").click()
    expect(page.locator("h1")).to_have_text(third.title)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (Status.APPROVED, Status.REJECTED)


def test_focus_moves_to_the_error_after_a_swap_and_a_resized_textarea_breaks_no_policy(
    page: Any, candidates: list[Case], reviewer: User
) -> None:
    login(page, "rita")
    page.goto(_path(candidates[1].id))
    # A reviewer drags the textarea bigger: the browser writes a style attribute on it.
    page.locator("#review-reason").evaluate("element => { element.style.height = '14rem'; }")
    page.get_by_role("button", name="Approve", exact=True).click()
    errors = page.locator("#review-errors")
    expect(errors.locator('[data-condition="reason_required"]')).to_be_visible()
    expect(errors).to_be_focused()
    expect(errors).to_have_attribute("role", "alert")
    # The page fixture fails the test on any Content-Security-Policy error in the console.


def test_a_revoked_case_shows_one_state_on_the_skill_page(
    page: Any, memory: dict[str, Any], reviewer: User
) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    case_revoke(case=case, actor=reviewer, reason="wrong store")
    login(page, "rita")
    page.goto(_path(skill.id))
    expect(page.locator("#unavailable-reason")).to_contain_text(f"cited case “{case.title}”")
    expect(page.locator("#review-panel")).to_contain_text("Approved, but not reused now")
    expect(page.locator("#review-panel")).not_to_contain_text("available for reuse")
    expect(page.locator(".page-head .badge-approved")).to_have_count(0)
    page.goto(_path(case.id))
    cited = page.locator("section[aria-labelledby=cited-heading]")
    expect(cited.locator(".badge-unavailable")).to_be_visible()
    expect(cited.locator(".badge-approved")).to_have_count(0)


def test_evidence_rows_line_up_in_chinese_and_the_header_is_compact(
    browser: Any, live_server: Any, operator: User, reviewer: User
) -> None:
    data = case_data(incident="INC-FLOW-ZH")
    data["diagnosis"]["statement"] = (
        "活动 B 的适用门店列表漏配了 002 门店，导致小程序优惠券核销失败"
    )
    case = submit_case(operator, incident="INC-FLOW-ZH", diagnosis=data["diagnosis"])
    for width, height, name in ((1366, 900, "wide"), (390, 844, "phone")):
        context = browser.new_context(
            viewport={"width": width, "height": height},
            locale="zh-CN",
            extra_http_headers={"Accept-Language": "zh-hans"},
            base_url=live_server.url,
        )
        page = context.new_page()
        login_zh(page, "rita")
        page.goto(_path(case.id))
        expect(page.locator("#h-diagnosis")).to_have_text("诊断")
        page.screenshot(path=str(SCREENS / f"case-zh-{name}-top.png"), caret="initial")
        header = page.locator(".topbar").bounding_box()
        if width == 1366:
            # One line: the brand, every menu entry and the user box share a row.
            tops = page.locator(".brand, .nav a, .userbox").evaluate_all(
                "elements => elements.map(e => Math.round(e.getBoundingClientRect().top"
                " + e.getBoundingClientRect().height / 2))"
            )
            assert max(tops) - min(tops) <= 6, tops
            assert header["height"] <= 60
            # Claim and evidence side by side, each section's columns at the same x.
            lefts = page.locator(".sections-rows .claim-evidence").evaluate_all(
                "elements => elements.map(e => Math.round(e.getBoundingClientRect().left))"
            )
            assert len(set(lefts)) == 1, lefts
            claim = page.locator(".section-diagnosis .claim").bounding_box()
            evidence = page.locator(".section-diagnosis .claim-evidence").bounding_box()
            assert abs(claim["y"] - evidence["y"]) <= 2 and claim["width"] >= 150
        else:
            # Two short lines of brand and user box, then the menu, wrapped (never scrolled)
            # into rows: every entry shows (tests/browser/test_menu.py).
            assert header["height"] <= 130, header
        screen(page, f"case-zh-{name}")
        context.close()


def login_zh(page: Any, username: str) -> None:
    from tests.conftest import PASSWORD

    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.locator("main button[type=submit]").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def test_screens_of_the_queue_and_a_lesson_free_skill_page_on_a_phone(
    browser: Any, live_server: Any, memory: dict[str, Any], candidates: list[Case], reviewer: User
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, locale="en-US", base_url=live_server.url
    )
    page = context.new_page()
    login(page, "rita")
    page.goto(QUEUE)
    expect(page.locator("#queue-results")).to_contain_text(candidates[0].title)
    screen(page, "queue-phone")
    page.goto(_path(candidates[0].id) + "?" + urlencode({"queue": "kind=case&sort=title"}))
    expect(page.locator("#review-panel")).to_be_visible()
    screen(page, "case-phone")
    context.close()
