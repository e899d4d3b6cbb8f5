"""In a browser: a candidate beside the approved case it resembles, section rows aligned, the
decision beside them on a laptop and all of it stacked on a phone, axe-clean (issue 28, item 4)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from curation.models import NearDuplicate
from reviewconsole import clock
from tests.browser.conftest import PHONE, login, screen
from tests.ui.factories import approved_case, case_data, submit_case

pytestmark = pytest.mark.browser


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return dict(box)


def test_compare_side_by_side_on_a_laptop_and_stacked_on_a_phone(
    page: Any, operator: User, reviewer: User, second_reviewer: User
) -> None:
    approved = approved_case(submitter=operator, reviewer=reviewer, incident="INC-CMP-1")
    candidate = submit_case(
        operator,
        incident="INC-CMP-2",
        diagnosis={
            "statement": "The campaign's store list was edited after launch and lost store 002.",
            "evidence": case_data()["diagnosis"]["evidence"],
        },
    )
    first, second = sorted((approved, candidate), key=lambda c: c.id)
    # Submitting the candidate links it to the approved case (near-duplicate detection).
    link, _ = NearDuplicate.objects.get_or_create(
        case_a=first, case_b=second, defaults={"similarity": 0.7, "detected_at": clock.now()}
    )
    login(page, "ravi")
    page.goto("/curation/similar/")
    page.get_by_role("link", name="Compare and decide").click()
    page.wait_for_url(f"**/curation/similar/{link.pk}/")
    expect(page.locator("h1")).to_have_text("Compare and decide")

    # Laptop: the two cases side by side, every section's cells on one line, decision beside.
    for section in ("observations", "diagnosis", "counterevidence", "outcome"):
        label = _box(page, f"#row-{section}")
        cells = page.locator(f"#row-{section} ~ .compare-cell").all()[:2]
        left, right = (cell.bounding_box() for cell in cells)
        assert left is not None and right is not None
        assert abs(left["y"] - label["y"]) <= 1 and abs(right["y"] - label["y"]) <= 1
        assert left["x"] < right["x"] and left["height"] == pytest.approx(right["height"], abs=1)
    assert "Candidate" in page.locator(".compare-head.compare-left").text_content()
    expect(page.locator("#row-diagnosis .badge-differs")).to_be_visible()
    decision = _box(page, "#decision-panel")
    assert decision["x"] > _box(page, ".compare-head.compare-right")["x"]
    screen(page, "compare/laptop")

    # Phone: stacked, nothing sideways, each cell names its case.
    page.set_viewport_size(PHONE)
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    left, right = (cell.bounding_box() for cell in page.locator(".compare-cell").all()[:2])
    assert left is not None and right is not None
    assert right["y"] >= left["y"] + left["height"] and abs(left["x"] - right["x"]) <= 1
    expect(page.locator(".compare-cell-title").first).to_be_visible()
    assert _box(page, "#decision-panel")["y"] > _box(page, "#row-outcome")["y"]
    screen(page, "compare/phone")
