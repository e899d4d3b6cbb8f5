"""Two reviewers at once, each in a browser of their own (issue 39, item 3): rita claims a
candidate; ravi sees who holds it on its page and in the queue; ravi's approval is refused and
offers to take the claim over; rita's dashboard has the item under "Waiting on you"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from experience.cases.models import Case
from experience.cases.services import evidence_check
from experience.core.models import Status
from reviewconsole.claims import CLAIMED_BY_OTHER
from tests.browser.conftest import DEADLINE_MS, VIEWPORT, htmx_settled, login, screen
from tests.ui.factories import submit_case

pytestmark = pytest.mark.browser


@pytest.fixture
def candidate(operator: User, reviewer: User, second_reviewer: User) -> Case:
    """A candidate either reviewer could approve: its diagnosis evidence checked by rita."""
    case = submit_case(operator, incident="INC-TWO-BROWSERS")
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    return case


@pytest.fixture
def second_page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A second browser context, open beside ``page``: another person's browser."""
    context = browser.new_context(viewport=VIEWPORT, locale="en-US", base_url=live_server.url)
    context.set_default_timeout(DEADLINE_MS)
    yield context.new_page()
    context.close()


def test_two_reviewers_see_one_claim_and_the_second_approval_asks_to_take_over(
    page: Any, second_page: Any, candidate: Case
) -> None:
    rita, ravi = page, second_page
    login(rita, "rita")
    login(ravi, "ravi")
    url = candidate.get_absolute_url()

    # Both have the item open; rita claims it.
    rita.goto(url)
    ravi.goto(url)
    expect(ravi.locator("#claim-take")).to_be_visible()
    rita.locator("#claim-take").click()
    expect(rita.locator("#claim-status")).to_contain_text("You hold a claim on it until")
    expect(rita.locator("#claim-release")).to_be_visible()

    # Ravi's page, loaded again, says who holds it; so does the queue.
    ravi.reload()
    expect(ravi.locator("#claim-status")).to_contain_text("Claimed by rita until")
    expect(ravi.locator("#claim-take")).to_have_count(0)
    screen(ravi, "claims/claimed-by-another")
    ravi.goto("/queue/")
    row = ravi.locator("tr", has=ravi.locator(f'a[href^="{url}"]'))
    expect(row.locator('[data-claimed-by="rita"]')).to_have_text("Claimed by rita")

    # Ravi approves anyway: refused, with the claim named and the take-over offered.
    ravi.goto(url)
    ravi.locator("#review-reason").fill("diagnosis evidence checked against the thread")
    with htmx_settled(ravi, "/review/"):
        ravi.locator("#decision-approve").click()
    expect(ravi.locator(f'#review-errors [data-condition="{CLAIMED_BY_OTHER}"]')).to_be_visible()
    expect(ravi.locator("#take-over")).to_be_visible()
    candidate.refresh_from_db()
    assert candidate.status == Status.CANDIDATE

    # Rita's dashboard: the item waits on her.
    rita.goto("/")
    claimed = rita.locator('#waiting-on-you [data-waiting="claimed"]')
    expect(claimed.get_by_role("link", name=candidate.title)).to_be_visible()
    screen(rita, "claims/waiting-on-you")

    # Ravi takes the claim over, knowingly, and approves.
    ravi.locator("#take-over").check()
    # Approved, htmx is told to load the item's page again: wait on that navigation.
    with ravi.expect_navigation(url=re.compile(re.escape(url))):
        ravi.locator("#decision-approve").click()
    expect(ravi.locator("#claim-status")).to_have_count(0)
    candidate.refresh_from_db()
    assert candidate.status == Status.APPROVED
    rita.reload()
    expect(rita.locator('#waiting-on-you [data-waiting="claimed"]')).to_have_count(0)
