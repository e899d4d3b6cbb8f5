"""In a browser: a reviewer enters a ticket, watches its steps arrive, and reads the verified
answer with each citation linked to its evidence."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from playwright.sync_api import expect

from investigations import services
from investigations.domain import Transcript, Turn
from investigations.models import InvestigationRequest
from investigations.providers import provider_for
from tests.browser.conftest import login, screen
from tests.knowledge.conftest import fixture_documents, knowledge_base

__all__ = ["fixture_documents", "knowledge_base"]

pytestmark = pytest.mark.browser

STEPS = "#investigation-result ol.steps > li"


class PausingForTheBrowser:
    """The scripted provider; before each turn after a tool call, the page must already show
    every step done so far while the run is still going."""

    name = "scripted"

    def __init__(self, page: Any) -> None:
        self.inner = provider_for("scripted")
        self.page = page
        self.checked: list[int] = []

    def next_turn(self, transcript: Transcript) -> Turn:
        done = sum(len(round_.exchanges) for round_ in transcript.rounds)
        if done:
            result = self.page.locator("#investigation-result")
            expect(self.page.locator(STEPS)).to_have_count(done)
            expect(result).to_have_attribute("data-state", "running")
            expect(result).not_to_contain_text("Verified")
            self.checked.append(done)
        return self.inner.next_turn(transcript)


def test_the_steps_arrive_and_the_verified_answer_links_its_evidence(
    page: Any,
    knowledge_base: None,
    reviewer: User,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The run waits in the database for a worker; the test is the worker, below.
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    login(page, "rita")
    page.locator("nav").get_by_role("link", name="Investigations").click()
    page.fill("#id_text", "两杯水果茶，优惠券用不了")
    for field, value in {
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-001",
        "campaign": "campaign-a",
        "deployment": "release-1",
        "occurred_at": "2026-09-18T14:00:00",
        "known_at": "2026-09-18T14:10:00",
        "timezone": "Asia/Shanghai",
        "channel": "miniapp",
        "product": "fruit-tea",
        "basket_cents": "3200",
    }.items():
        page.fill(f"#id_{field}", value)
    page.get_by_role("button", name="Investigate", exact=True).click()

    result = page.locator("#investigation-result")
    expect(result).to_have_attribute("data-state", "queued")
    expect(result).to_contain_text("Waiting for a worker")
    expect(result.get_by_role("link", name="Refresh")).to_be_visible()
    # The run's progress is below the form: the page moves to it, and lists it as not finished.
    expect(page.locator("#investigation-heading")).to_be_focused()
    expect(page.locator("#investigation-heading")).to_be_in_viewport()
    run_id = InvestigationRequest.objects.get().run_id
    expect(page.locator("#investigation-lists")).to_contain_text(run_id)
    screen(page, "investigation-queued")

    watching = PausingForTheBrowser(page)
    monkeypatch.setattr(services, "provider_for", lambda name: watching)
    services.investigation_request_run(InvestigationRequest.objects.get().pk)
    assert watching.checked, "the browser saw the steps while the run went on"

    expect(result).to_contain_text("Verified")
    expect(result).not_to_have_attribute("hx-trigger", "every 1s")  # polling ended
    # The finished run is among the recent investigations without a reload.
    expect(page.locator("#investigation-lists table")).to_contain_text(run_id)
    expect(result.locator("ul.citations")).to_contain_text("历史案例，仅作排查线索")
    rule = reverse("knowledge:document-detail", args=["rule-a", 2])
    citation = result.locator(f'ul.citations a[href="{rule}"]')
    expect(citation).to_be_visible()
    screen(page, "investigation-answered")
    citation.click()
    expect(page).to_have_url(re.compile(re.escape(rule) + "$"))
