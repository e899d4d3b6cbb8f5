"""Real-browser fixtures: Debian's Chromium driven by Playwright against the live test server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.conftest import PASSWORD
from tests.ui.conftest import candidate, knowledge, memory  # noqa: F401  (shared fixtures)

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENS = Path(settings.BASE_DIR) / "test-artifacts" / "screens"
VIEWPORT = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# How long an action, a navigation or an assertion may wait for what it waits on (an element, a
# page, an htmx swap) before the test fails. Waits end when that happens, so a passing test never
# sits this out; on a loaded machine a page can take seconds to answer, and Playwright's default
# of 5 s for assertions failed tests whose page was merely slow.
DEADLINE_MS = 60_000
expect.set_options(timeout=DEADLINE_MS)

# Armed before the action that starts an htmx request, so an answer quicker than the test is not
# missed: resolves on htmx's own htmx:afterSettle for a request to a path ending in ``path`` (htmx
# has then run every swap of the answer, out-of-band ones included, and console.js has moved the
# focus), and rejects at once when that request fails.
_HTMX_SETTLED = """({path, deadline}) => {
  const ours = (event) => {
    const info = event.detail && event.detail.pathInfo;
    return Boolean(info && info.requestPath && info.requestPath.split("?")[0].endsWith(path));
  };
  const settled = new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no htmx request to ...${path} settled within ${deadline} ms`)),
      deadline,
    );
    const done = (event) => {
      if (!ours(event)) return;
      clearTimeout(timer);
      document.removeEventListener("htmx:afterSettle", done);
      document.removeEventListener("htmx:responseError", failed);
      document.removeEventListener("htmx:sendError", failed);
      resolve(event.detail.pathInfo.requestPath);
    };
    const failed = (event) => {
      if (!ours(event)) return;
      clearTimeout(timer);
      reject(new Error(`the htmx request to ${event.detail.pathInfo.requestPath} failed`));
    };
    document.addEventListener("htmx:afterSettle", done);
    document.addEventListener("htmx:responseError", failed);
    document.addEventListener("htmx:sendError", failed);
  });
  return {settled};
}"""


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI; scripts/ensure_browser.sh installs it")
        pytest.skip(
            "chromium is not installed (scripts/ensure_browser.sh installs it); CI runs these"
        )
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; the ORM calls that set
    # up each test run beside it, one at a time, so Django's async-safety guard is lifted here.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            yield launched
            launched.close()


@pytest.fixture(autouse=True)
def role_groups(transactional_db: None) -> None:
    """The live server needs committed rows, so these tests are transactional; the root
    conftest puts back what the flush after each test takes (roles, lexicon)."""


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, locale="en-US", base_url=live_server.url)
    context.set_default_timeout(DEADLINE_MS)
    opened = context.new_page()
    policy_errors: list[str] = []
    opened.on(
        "console",
        lambda message: (
            policy_errors.append(f"{message.text} at {message.location} on {opened.url}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    yield opened
    context.close()
    assert not policy_errors, f"the page broke its Content-Security-Policy: {policy_errors}"


def login(page: Any, username: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.locator("main").get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


@contextmanager
def htmx_settled(page: Any, path: str) -> Iterator[None]:
    """Leave the block once htmx has swapped in and settled its answer to the request that the
    block's action made to a path ending in ``path`` (``"/check/"``): wait on the event, not on a
    time, so the next step sees the page as the swap left it."""
    waiting = page.evaluate_handle(_HTMX_SETTLED, {"path": path, "deadline": DEADLINE_MS})
    try:
        yield
        waiting.evaluate("waiting => waiting.settled")
    finally:
        waiting.dispose()


def screen(page: Any, name: str) -> None:
    """Keep a screenshot of the page (``name`` may hold a subfolder) and require no axe-core
    violation at all, of any impact (minor and moderate ones included)."""
    from axe_playwright_python.sync_playwright import Axe

    path = SCREENS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    # caret="initial": hiding the caret would inject a style element the CSP rightly refuses.
    page.screenshot(path=str(path), full_page=True, caret="initial")
    violations = Axe().run(page).response["violations"]
    assert not violations, f"{name}: " + "; ".join(
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:5]}" for v in violations
    )
