"""Screenshots of the main pages with the demo data, on a laptop and on a phone, each checked by
axe-core (zero violations of any impact). ``make screenshots`` copies them to docs/screenshots/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from console.demo import DEMO_USERS, INVESTIGATION_RUN, SECOND_SKILL_RUN, THREAD_FIXTURE
from curation.models import NearDuplicate
from experience.cases.models import Case
from experience.core.models import Status
from experience.lessons.models import Lesson, LessonConflict
from investigations.models import Investigation
from reviewconsole.cli import read_json_file
from tests.browser.conftest import DEADLINE_MS, PHONE, VIEWPORT, screen

# The pages' pixels do not depend on the database engine: taken once, in the SQLite half.
pytestmark = [pytest.mark.browser, pytest.mark.sqlite_half]

PASSWORDS = {name: password for name, _, password in DEMO_USERS}
VIEWPORTS = {"laptop": VIEWPORT, "phone": PHONE}
# The browser's language (the console follows it): English pages keep their plain names, the
# Simplified Chinese ones end in -zh.
LOCALES = {"": "en-US", "-zh": "zh-CN"}


def _path(item_id: str) -> str:
    kind, digest = item_id.split(":", 1)
    return f"/{kind}s/{digest}/"


@pytest.fixture
def demo(transactional_db: None) -> dict[str, str]:
    out = StringIO()
    call_command("load_demo", "--no-replay", "--json", stdout=out)
    skills = json.loads(out.getvalue())["skills"]
    case = Case.objects.filter(status=Status.APPROVED, submitted_by__username="olivia").first()
    assert case is not None
    thread = read_json_file(str(THREAD_FIXTURE))["id"]
    return {
        "dashboard": "/",
        "queue": "/queue/",
        "case": _path(case.id),
        "skill": _path(skills[0]),
        "skill-unavailable": _path(skills[1]),  # a case it cites was revoked
        "lesson": _path(Lesson.objects.order_by("id").first().id),  # type: ignore[union-attr]
        "runs": "/runs/",
        "run": f"/runs/{SECOND_SKILL_RUN}/",  # read the revoked case: to follow up
        "investigation": f"/investigations/{Investigation.objects.get(run_id=INVESTIGATION_RUN).pk}/",
        "audit": "/audit/",
        "documents": "/knowledge/",
        "thread-builder": f"/curation/threads/{thread}/",
        "curation": "/curation/",
        "lesson-conflict": LessonConflict.objects.get().get_absolute_url(),
        "compare": f"/curation/similar/{NearDuplicate.objects.order_by('pk').first().pk}/",  # type: ignore[union-attr]
    }


# Who looks at each page: the reviewer reviews, the operator curates, the admin audits.
VIEWERS = {"audit": "ada", "thread-builder": "olivia", "curation": "olivia", "documents": "olivia"}


@pytest.fixture(params=[(size, language) for size in VIEWPORTS for language in LOCALES])
def device(request: pytest.FixtureRequest, browser: Any, live_server: Any) -> Iterator[Any]:
    size, language = request.param
    context = browser.new_context(
        viewport=VIEWPORTS[size], locale=LOCALES[language], base_url=live_server.url
    )
    context.set_default_timeout(DEADLINE_MS)
    context.device_name = f"{size}{language}"
    yield context
    context.close()


def _login(page: Any, username: str) -> None:
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORDS[username])
    page.press("#id_password", "Enter")  # the button's name is in the page's language
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def test_the_main_pages_with_the_demo_data(device: Any, demo: dict[str, str]) -> None:
    page = device.new_page()
    policy_errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            policy_errors.append(f"{message.text} on {page.url}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    current = None
    problems = []
    for name, path in demo.items():
        viewer = VIEWERS.get(name, "rita")
        if viewer != current:
            _login(page, viewer)
            current = viewer
        response = page.goto(path)
        assert response is not None and response.status == 200, f"{name}: {path}"
        expect(page.locator("main h1").first).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.viewport_size["width"]:
            problems.append(f"{name} scrolls sideways ({width} px)")
        try:
            screen(page, f"main/{name}-{device.device_name}")
        except AssertionError as violations:  # every page is checked before the test fails
            problems.append(str(violations).splitlines()[0])
    assert not problems, "\n".join(problems)
    assert not policy_errors, policy_errors
