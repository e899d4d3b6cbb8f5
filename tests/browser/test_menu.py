"""In a browser: every entry of the main menu is on screen and takes a click, on a laptop and on a
phone (issue 28, item 1: at 1366 px an admin's menu hid Curation, Investigations, Replays and
Admin behind a scroll nobody saw)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.browser.conftest import login

pytestmark = pytest.mark.browser

# Whether the entry's own box lies inside the viewport and a click at its centre lands on it
# (not on the user box drawn over a clipped menu, not on nothing).
_HIT = """link => {
  const box = link.getBoundingClientRect();
  const inside = box.width > 0 && box.height > 0 && box.left >= 0 && box.top >= 0
    && box.right <= window.innerWidth && box.bottom <= window.innerHeight;
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return {label: link.textContent.trim(), inside, hit: Boolean(hit && link.contains(hit))};
}"""


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (1366, 900), (1920, 1080), (390, 844)])
def test_every_entry_of_an_admins_menu_is_on_screen_and_takes_a_click(
    page: Any, admin_user: User, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    login(page, "ada")
    entries = page.locator("nav[aria-label=Main] a")
    labels = [label.strip() for label in entries.all_text_contents()]
    for expected in ("Dashboard", "Curation", "Investigations", "Replays", "Admin"):
        assert expected in labels, labels
    for entry in entries.all():
        where = entry.evaluate(_HIT)
        assert where["inside"] and where["hit"], (width, where)
    # Nothing scrolls sideways: neither the page nor the menu.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    menu = page.locator("nav[aria-label=Main]")
    assert menu.evaluate("e => e.scrollWidth <= e.clientWidth"), width
    # The entry furthest along the menu opens its page.
    page.locator("nav[aria-label=Main]").get_by_role("link", name="Replays").click()
    page.wait_for_url("**/evaluation/")
    expect(page.locator("nav[aria-label=Main] a[aria-current=page]")).to_have_text("Replays")
