"""The thread builder in a browser: the preview beside the picker and the form on a laptop (and
still in view while the form scrolls), after them on a phone; the scope starts filled in."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from console.demo import DEMO_USERS, THREAD_FIXTURE
from reviewconsole.cli import read_json_file
from tests.browser.conftest import PHONE

pytestmark = pytest.mark.browser

PASSWORDS = {name: password for name, _, password in DEMO_USERS}


def _open_builder(page: Any) -> None:
    call_command("load_demo", "--no-replay", stdout=StringIO())
    page.goto("/accounts/login/")
    page.fill("#id_username", "olivia")
    page.fill("#id_password", PASSWORDS["olivia"])
    page.locator("main").get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"/curation/threads/{read_json_file(str(THREAD_FIXTURE))['id']}/")


def test_on_a_laptop_the_preview_sits_beside_the_picker_and_stays_in_view(page: Any) -> None:
    _open_builder(page)
    expect(page.locator("#id_store")).to_have_value("store-002")
    expect(page.locator("#id_deployment")).to_have_value("release-1")
    messages = page.locator("#candidate-form").bounding_box()
    aside = page.locator(".thread-builder-aside").bounding_box()
    assert aside["x"] >= messages["x"] + messages["width"]  # beside, not below
    assert abs(aside["y"] - messages["y"]) < 5

    page.select_option("#id_use__m1", "observation")
    page.locator("#id_outcome").scroll_into_view_if_needed()
    page.locator(".thread-builder-aside").get_by_role("button", name="Preview").click()
    preview = page.locator("#candidate-preview")
    expect(preview).to_contain_text("not complete yet")
    box = preview.bounding_box()
    assert 0 <= box["y"] < page.viewport_size["height"]  # sticky: still on screen down here


def test_on_a_phone_the_preview_follows_the_form(page: Any) -> None:
    page.set_viewport_size(PHONE)
    _open_builder(page)
    form = page.locator("#candidate-form").bounding_box()
    aside = page.locator(".thread-builder-aside").bounding_box()
    assert aside["y"] >= form["y"] + form["height"] - 1
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
