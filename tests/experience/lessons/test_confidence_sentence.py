"""A confidence a reviewer can reproduce (issue 28, item 7): the lesson page says in one plain
sentence what the number comes from, and puts the formula behind a disclosure.

Every number the test expects is derived from the fixture it builds (the incidents it cites, the
reviewers it has confirm, the days it lets pass), never read back from the code under test."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from experience.cases.models import Case
from experience.lessons import selectors as lesson_selectors
from experience.lessons import services as lessons
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.review import decisions
from experience.review.outcomes import run_outcome_report
from experience.runs.claims import run_claim
from experience.runs.records import references_record
from reviewconsole import clock
from tests.experience.conftest import NOW
from tests.experience.lessons.test_lessons import lesson_data

pytestmark = pytest.mark.django_db

SUPPORTING = ["INC-S1", "INC-S2"]
CONTRADICTING = ["INC-C1"]
DAYS_SINCE_CONFIRMED = 40
CONFIRMED_AFTER_DAYS = 5


def wilson(successes: int, failures: int, z: float) -> float:
    """The Wilson score interval's lower end, written out here from its textbook definition."""
    n = successes + failures
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def visible_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", html))


@pytest.fixture
def confirmed_lesson(
    approved_case: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
    make_user: Callable[[str, str], User],
    frozen_clock: Any,
) -> Lesson:
    """Two supporting incidents, one contradicting; approved at NOW; an agent's run read it and
    a reviewer confirmed that run's outcome CONFIRMED_AFTER_DAYS later."""
    supports = [approved_case(incident=i, title=f"二号店优惠券无法使用 {i}") for i in SUPPORTING]
    contradicts = [approved_case(incident=i, title=f"二号店券可用 {i}") for i in CONTRADICTING]
    data = lesson_data([c.id for c in supports], contradicts=[c.id for c in contradicts])
    lesson, _ = lessons.lesson_submit(content=parse_lesson(data), actor=reviewer)
    decisions.lesson_approve(lesson=lesson, actor=second_reviewer, reason="two incidents")
    frozen_clock(NOW + timedelta(days=CONFIRMED_AFTER_DAYS))
    # An agent read it under its run (below the recall threshold, so as a read by id does).
    agent = make_user("agent-9", "agent")
    run_claim(run_id="run-c-1", actor=agent, tenant=lesson.tenant, at=clock.now())
    references_record(run_id="run-c-1", items=[(lesson.id, "lesson")], at=clock.now())
    run_outcome_report(run_id="run-c-1", outcome="resolved_by_lead", actor=second_reviewer)
    frozen_clock(NOW + timedelta(days=CONFIRMED_AFTER_DAYS + DAYS_SINCE_CONFIRMED))
    return lesson_selectors.lesson_get(lesson.id)


def test_the_lesson_page_says_what_its_confidence_comes_from_in_one_sentence(
    confirmed_lesson: Lesson, reviewer: User
) -> None:
    client = Client()
    client.force_login(reviewer)
    html = client.get(confirmed_lesson.get_absolute_url()).content.decode()
    panel = html.split('id="confidence"', 1)[1].split("</section>", 1)[0]
    sentence = visible_text(panel.split('id="confidence-sentence">', 1)[1].split("</p>", 1)[0])
    assert sentence.strip() == (
        f"{len(SUPPORTING)} incidents support it, {len(CONTRADICTING)} contradicts it; "
        "the outcomes of runs that used it were confirmed by 1 reviewer and refuted by 0 "
        f"reviewers; last confirmed {DAYS_SINCE_CONFIRMED} days ago."
    )
    # Jargon only behind the disclosure.
    before_formula, formula = panel.split("<details", 1)
    for jargon in ("Wilson", "half-life", "z =", "supporting over all incidents", "(0.0 days)"):
        assert jargon not in visible_text(before_formula), jargon
    # The formula, with the fixture's numbers: three successes (two incidents and one reviewer's
    # confirmation) and one failure.
    z, half_life = 1.0, 180.0
    successes, failures = len(SUPPORTING) + 1, len(CONTRADICTING)
    bound = wilson(successes, failures, z)
    decay = 0.5 ** (DAYS_SINCE_CONFIRMED / half_life)
    shown = visible_text(formula)
    assert f"= {successes}" in shown and f"= {failures}" in shown
    assert f"{bound:.3f}".rstrip("0") in shown and f"{decay:.3f}".rstrip("0") in shown
    assert f"= {round(bound * decay, 3)}" in shown
    assert f"<strong>{round(bound * decay, 3)}</strong>" in panel


def test_a_candidate_lesson_confirmed_today_says_so_without_a_dash(
    approved_case: Callable[..., Case], reviewer: User
) -> None:
    case = approved_case(incident="INC-ONLY")
    lesson, _ = lessons.lesson_submit(content=parse_lesson(lesson_data([case.id])), actor=reviewer)
    client = Client()
    client.force_login(reviewer)
    html = client.get(lesson.get_absolute_url()).content.decode()
    sentence = html.split('id="confidence-sentence">', 1)[1].split("</p>", 1)[0]
    assert visible_text(sentence).strip() == (
        "1 incident supports it, 0 contradict it; no run that used it has a counted outcome "
        "yet; last confirmed today."
    )
    assert "—" not in visible_text(html.split('id="confidence"', 1)[1].split("</section>", 1)[0])
    chinese = client.get(lesson.get_absolute_url(), headers={"Accept-Language": "zh-hans"})
    text = chinese.content.decode().split('id="confidence-sentence">', 1)[1].split("</p>", 1)[0]
    assert "1 个事件支持" in text and "今天" in text
