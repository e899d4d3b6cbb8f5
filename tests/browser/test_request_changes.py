"""Request changes in a real browser (issue 39, items 1, 2, 11 and the decision bar of 9): a
reviewer sends a case back with a comment anchored to an evidence item, its submitter revises and
resubmits it, another reviewer sees the rounds and approves; a case that cannot be approved says
so and "c" goes to what unblocks it; on a phone the decision is one tap away."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.cases.services import case_submit
from experience.core.models import Status
from tests.browser.conftest import DEADLINE_MS, PHONE, VIEWPORT, htmx_settled, login, screen
from tests.ui.factories import case_data

pytestmark = pytest.mark.browser


def _path(case: Case) -> str:
    return f"/cases/{case.digest}/"


@pytest.fixture
def open_page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A page in a browser context of its own per call: one signed-in user each."""
    contexts: list[Any] = []

    def make(viewport: dict[str, int] = VIEWPORT) -> Any:
        context = browser.new_context(viewport=viewport, locale="en-US", base_url=live_server.url)
        context.set_default_timeout(DEADLINE_MS)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def test_sent_back_revised_resubmitted_and_approved_by_another_reviewer(
    open_page: Any,
    candidate: Case,
    operator: User,
    reviewer: User,
    second_reviewer: User,
) -> None:
    # The reviewer sends the case back with a comment on one evidence item.
    rita = open_page()
    login(rita, "rita")
    rita.goto(_path(candidate))
    rita.locator("#request-changes summary").click()
    rita.select_option("#changes-anchor", "evidence:diagnosis/0")
    rita.fill("#changes-note", "Which store list did the operator read? Quote it.")
    rita.locator("#decision-changes").click()
    expect(rita.locator("#returned-note")).to_contain_text("olivia")
    # The thread stands beside the evidence item it is about, and in the conversation.
    expect(rita.locator("#ev-diagnosis-0 .thread-marks")).to_contain_text("open thread")
    expect(rita.locator("#conversation")).to_contain_text("Which store list")
    screen(rita, "review/request-changes-sent")

    # The submitter revises and resubmits.
    olivia = open_page()
    login(olivia, "olivia")
    olivia.goto(_path(candidate))
    olivia.locator("#returned-note a[data-revise]").click()
    olivia.wait_for_url(re.compile("/revise/$"))
    expect(olivia.locator("body")).to_contain_text("Which store list did the operator read?")
    data = json.loads(olivia.locator("#revise-content").input_value())
    data["diagnosis"]["evidence"][0]["excerpt"] = "运营：活动门店列表（store-list v3）缺少二号店。"
    olivia.fill("#revise-content", json.dumps(data, ensure_ascii=False, indent=2))
    olivia.locator("#revise-submit").click()
    olivia.wait_for_url(lambda url: "/revise/" not in url)
    revision = Case.objects.get(submitted_by=operator, status=Status.CANDIDATE)
    assert revision.id != candidate.id
    assert olivia.url.endswith(_path(revision))

    # Another reviewer sees both rounds, checks the evidence and approves.
    ravi = open_page()
    login(ravi, "ravi")
    ravi.goto(_path(revision))
    rounds = ravi.locator("#review-rounds")
    expect(rounds.locator("[data-round]")).to_have_count(2)
    expect(rounds).to_contain_text("rita requested changes")
    expect(rounds).to_contain_text("olivia resubmitted a revision")
    with htmx_settled(ravi, "/check/"):
        ravi.locator("#ev-diagnosis-0 form[data-check-form] button").click()
    # The first round's thread is still open: the page says so before the approval.
    expect(ravi.locator("#open-threads-warning")).to_be_visible()
    ravi.fill("#review-reason", "the store list is quoted now")
    ravi.locator("#decision-approve").click()
    expect(ravi.locator(".page-head")).to_contain_text("approved")
    revision.refresh_from_db()
    assert revision.status == Status.APPROVED and revision.approved_by == second_reviewer


def test_a_case_that_cannot_be_approved_says_so_and_c_goes_to_request_changes(
    open_page: Any, operator: User, reviewer: User
) -> None:
    data = case_data(incident="INC-BARE")
    data["diagnosis"]["evidence"] = []
    case, _ = case_submit(content=parse_case(data), actor=operator)
    rita = open_page()
    login(rita, "rita")
    rita.goto(_path(case))
    expect(rita.locator("#blocked-note")).to_contain_text("cannot be approved as it stands")
    rita.locator("h1").click()
    rita.keyboard.press("c")
    expect(rita.locator("#request-changes summary")).to_be_focused()
    expect(rita.locator("#changes-note")).to_be_visible()


def test_on_a_phone_the_decision_bar_reaches_approve(
    open_page: Any, operator: User, reviewer: User
) -> None:
    from tests.ui.factories import submit_case

    case = submit_case(operator, incident="INC-PHONE", observations=30)
    rita = open_page(PHONE)
    login(rita, "rita")
    rita.goto(_path(case))
    bar = rita.locator(".decision-bar")
    expect(bar).to_be_visible()
    box = bar.bounding_box()
    assert box is not None and box["y"] + box["height"] <= PHONE["height"] + 1
    bar.locator("a[data-jump-decision]").click()
    expect(rita.locator("#decision-approve")).to_be_in_viewport()
    assert rita.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_the_revoke_dialog_fits_the_screen(
    open_page: Any, memory: dict[str, Any], reviewer: User
) -> None:
    case = memory["cases"][0]
    rita = open_page(PHONE)
    login(rita, "rita")
    rita.goto(_path(case))
    rita.get_by_role("link", name="Revoke…").click()
    dialog = rita.locator("#dialog")
    expect(dialog.locator("#preview-runs")).to_be_visible()
    box = dialog.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]
    confirm = dialog.get_by_role("button", name="Confirm revocation")
    confirm.scroll_into_view_if_needed()
    expect(confirm).to_be_in_viewport()
