"""In a browser: the audit log fits the page, Reason in view at 1366 px, every column on a phone."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from playwright.sync_api import expect

from reviewconsole.audit import event_record
from reviewconsole.models import Action
from tests.browser.conftest import PHONE, login, screen

pytestmark = pytest.mark.browser

LONG_RUN = "inv-" + "35463b9d80df4a7587b00980fb3fe9e4" * 3
LONG_THREAD = "thread:T-20260918-store-002-coupon-refused-at-the-till-" + "x" * 80
REASON = "the store list of campaign B misses store-002; checked against the change log " * 3


@pytest.fixture
def long_events(admin_user: User) -> None:
    with transaction.atomic():
        event_record(actor=admin_user, action=Action.RUN_FOLLOW_UP, target=LONG_RUN, reason=REASON)
        event_record(
            actor=admin_user, action=Action.THREAD_IMPORT, target=LONG_THREAD, reason=REASON
        )


def _fits(page: Any) -> None:
    width = page.viewport_size["width"]
    table = page.locator("#event-results table")
    expect(table).to_be_visible()
    assert table.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth + 1")
    for cell in page.locator("#event-results td.audit-reason").all():
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width + 1, box


def test_the_audit_log_fits_a_laptop_and_a_phone(
    page: Any, long_events: None, admin_user: User
) -> None:
    login(page, "ada")
    page.goto("/audit/")
    header = page.get_by_role("columnheader", name="Reason")
    box = header.bounding_box()
    assert box is not None and box["x"] + box["width"] <= page.viewport_size["width"], box
    _fits(page)
    page.set_viewport_size(PHONE)
    page.reload()
    _fits(page)
    # Each event is a card whose lines name their column.
    expect(page.locator("#event-results td.audit-reason").first).to_be_visible()
    label = page.locator("#event-results td.audit-reason").first.evaluate(
        "e => getComputedStyle(e, '::before').content"
    )
    assert label == '"Reason"'
    screen(page, "audit-phone")
