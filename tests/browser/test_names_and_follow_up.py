"""In a browser: ids copy with one click, run ids stay on one line, runs to follow up are flagged
until a reviewer marks them followed up, and the time zone is named in the header."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.review.revocation import case_revoke
from tests.browser.conftest import htmx_settled, login, screen

pytestmark = pytest.mark.browser

RUN = "run-ui-1"


def test_the_copy_button_copies_the_full_id(
    page: Any, memory: dict[str, Any], reviewer: User
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    # The page's timers run on Playwright's clock: the label's return to "Copy" (a timer in
    # console.js) happens when the test moves the clock on, not after a wait of its own.
    page.clock.install()
    login(page, "rita")
    page.goto(f"/runs/{RUN}/")
    skill = memory["skill"]
    mention = page.locator(".facts .item-ref").first
    expect(mention.get_by_role("link", name=skill.title)).to_be_visible()
    expect(mention.locator(".item-id")).to_have_attribute("title", skill.id)
    button = mention.get_by_role("button")
    expect(button).to_be_visible()  # shown by console.js; hidden without script
    page.clock.pause_at(page.evaluate("Date.now()") + 1_000)
    button.click()
    expect(button).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == skill.id
    page.clock.run_for(1_000)
    expect(button).to_have_text("Copied")  # for a moment
    page.clock.run_for(1_000)
    expect(button).to_have_text("Copy")


def test_run_ids_never_wrap(page: Any, memory: Any, reviewer: User) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "rita")
    page.goto("/runs/")
    run_id = page.locator("#run-results .run-id").first
    expect(run_id).to_have_text(RUN)
    assert run_id.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
    box = run_id.bounding_box()
    line = run_id.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 20")
    assert box is not None and box["height"] < 1.6 * line


def test_a_run_that_read_a_revoked_case_is_flagged_until_followed_up(
    page: Any, memory: dict[str, Any], reviewer: User
) -> None:
    case_revoke(case=memory["cases"][0], actor=reviewer, reason="wrong diagnosis")
    login(page, "rita")
    page.goto("/runs/")
    row = page.locator("#run-results tr", has_text=RUN)
    expect(row.locator(".follow-up")).to_have_text("to follow up")
    with htmx_settled(page, "/runs/"):
        page.select_option("#id_follow_up", "pending")
    expect(page).to_have_url(re.compile(r"follow_up=pending"))
    expect(page.locator("#run-results")).to_contain_text(RUN)
    expect(row.locator("button.copy-id").first).to_be_visible()  # shown after the htmx swap too
    screen(page, "runs-to-follow-up")

    row.get_by_role("link", name=RUN).click()
    expect(page.locator("h1 .follow-up")).to_be_visible()
    expect(page.locator("#follow-up")).to_contain_text(memory["cases"][0].title)
    screen(page, "run-to-follow-up")
    page.fill("#follow-up-reason", "answer re-checked; the customer was told")
    page.get_by_role("button", name="Mark followed up").click()
    expect(page.locator(".messages")).to_contain_text(f"Run {RUN} marked followed up.")
    expect(page.locator("h1 .follow-up")).to_have_count(0)
    expect(page.locator("#follow-up")).to_contain_text("answer re-checked")

    page.goto("/runs/?follow_up=pending")
    expect(page.locator("#run-results")).not_to_contain_text(RUN)


def test_the_header_names_the_time_zone_and_it_can_be_changed(
    page: Any, memory: Any, reviewer: User
) -> None:
    login(page, "rita")
    page.goto("/runs/")
    zone = page.locator(".topbar .time-zone")
    expect(zone).to_have_text("Times in Asia/Shanghai")
    zone.click()
    page.select_option("#id_zone", "Europe/Berlin")
    page.get_by_role("button", name="Use this time zone").click()
    expect(page).to_have_url(re.compile(r"/runs/$"))
    expect(page.locator(".topbar .time-zone")).to_have_text("Times in Europe/Berlin")
