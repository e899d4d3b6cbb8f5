"""On a phone (390×844): a page never grows wider than the screen, dialogs fit it, filters fold."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.review.revocation import case_revoke
from tests.browser.conftest import PHONE, login, screen

pytestmark = pytest.mark.browser


def _path(item_id: str) -> str:
    kind, digest = item_id.split(":", 1)
    return f"/{kind}s/{digest}/"


def _page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def _inside_viewport(page: Any, locator: Any) -> bool:
    box = locator.bounding_box()
    assert box is not None
    return bool(
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= PHONE["width"]
        and box["y"] + box["height"] <= PHONE["height"]
    )


def test_a_case_page_citing_a_revoked_case_fits_a_phone(
    page: Any, memory: dict[str, Any], reviewer: User
) -> None:
    revoked, kept = memory["cases"]
    case_revoke(case=revoked, actor=reviewer, reason="wrong store")
    page.set_viewport_size(PHONE)
    login(page, "rita")
    page.goto(_path(kept.id))
    # The skill citing both cases is unavailable: the sentence names the revoked case by title.
    cited_by = page.locator("main")
    expect(cited_by).to_contain_text(f"cited case “{revoked.title}” is revoked")
    expect(cited_by).not_to_contain_text(revoked.id)
    assert _page_width(page) == PHONE["width"]

    page.locator(".page-head").get_by_role("link", name="Revoke…").click()
    dialog = page.locator("#dialog")
    expect(dialog).to_be_visible()
    confirm = dialog.get_by_role("button", name="Confirm revocation")
    confirm.scroll_into_view_if_needed()
    assert _inside_viewport(page, dialog), dialog.bounding_box()
    assert _inside_viewport(page, confirm), confirm.bounding_box()
    assert _page_width(page) == PHONE["width"]
    screen(page, "phone/revoke-dialog-390")


def test_filters_fold_on_a_phone_and_stay_open_on_a_laptop(
    page: Any, memory: dict[str, Any]
) -> None:
    login(page, "rita")
    page.goto("/queue/")
    filters = page.locator("form.filters")
    expect(filters).to_be_visible()  # a laptop: the filters are open, their summary hidden
    expect(page.locator(".filters-fold > summary")).to_be_hidden()

    page.set_viewport_size(PHONE)
    page.goto("/queue/")
    expect(page.locator("[data-queue-item]").first).to_be_visible()
    expect(filters).to_be_hidden()  # a phone: the list comes first
    page.locator(".filters-fold > summary").click()
    expect(filters).to_be_visible()
    assert _page_width(page) == PHONE["width"]
