"""The review flow: one availability state on every page, a diagnosis that really states a cause,
"Approve and next" through the queue a reviewer opened, lessons in the queue and reviewed the way
cases are, and the computed confidence on case and skill pages."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from experience.cases.models import Case, Skill
from experience.cases.schema import parse_skill
from experience.cases.services import evidence_check, skill_submit
from experience.cases.tools import tool_specs
from experience.core import availability, domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons import services as lessons
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from experience.review import decisions
from experience.review.decisions import case_approve, skill_approve
from experience.review.revocation import case_revoke
from reviewconsole import clock
from reviewconsole.timeparse import to_utc_iso
from tests.ui.factories import SCOPE, approved_case, approved_skill, skill_data, submit_case

HTMX = {"HX-Request": "true"}


def _page(client: Client, item: Case | Skill | Lesson, query: str = "") -> str:
    response = client.get(item.get_absolute_url() + query)
    assert response.status_code == 200
    return response.content.decode()


def _lesson(actor: User, supports: list[str], **changes: Any) -> Lesson:
    now = clock.now()
    data: dict[str, Any] = {
        "type": "lesson",
        "lesson_type": "failure_lesson",
        "scope": dict(SCOPE),
        "scene": {"tags": ["coupon"], "description": "A coupon is refused in the mini-app"},
        "precondition": "The campaign limits its stores",
        "conclusion": "Check the campaign's store list before asking for a refresh",
        "supports": supports,
        "valid_from": to_utc_iso(now - timedelta(days=30)),
        "valid_to": to_utc_iso(now + timedelta(days=365)),
        **changes,
    }
    lesson, _ = lessons.lesson_submit(content=parse_lesson(data), actor=actor)
    return lesson


# --- 1. one availability state, shown the same everywhere ------------------------------------


def test_a_revoked_cited_case_makes_the_skill_unavailable_on_every_page(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    case, skill = memory["cases"][0], memory["skill"]
    case_revoke(case=case, actor=reviewer, reason="wrong store")
    client.force_login(reviewer)

    html = _page(client, skill)
    assert f"cited case “{case.title}” is revoked" in html
    # The review panel agrees with the availability panel: no "available for reuse".
    panel = html[html.index('id="review-panel"') :]
    assert "Approved and available for reuse" not in panel
    assert "Approved, but not reused now:" in panel
    head = html[html.index('class="page-head"') : html.index("<h1>")]
    assert "approved, unavailable" in head and "badge-approved" not in head

    # The revoked case lists the skill citing it as unavailable, not as a green "approved".
    cited = _page(client, case)
    citing = cited[cited.index('id="cited-heading"') :]
    citing = citing[: citing.index("</section>")]
    assert escape(skill.title) in citing and f"“{case.title}” is revoked" in citing
    assert "badge-unavailable" in citing and "badge-approved" not in citing

    # The queue shows the same state.
    queue = client.get(reverse("experience:queue") + "?status=approved&kind=skill")
    row = queue.content.decode()
    row = row[row.index(escape(skill.title)) :]
    row = row[: row.index("</tr>")]
    assert "approved, unavailable" in row and "badge-approved" not in row


def test_an_available_skill_says_so_in_its_review_panel(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    html = _page(client, memory["skill"])
    assert "Approved and available for reuse" in html
    assert "badge-unavailable" not in html


def test_a_lesson_whose_support_is_revoked_is_unavailable_on_its_page_and_in_the_queue(
    memory: dict[str, Any], operator: User, reviewer: User, second_reviewer: User, client: Client
) -> None:
    case = memory["cases"][0]
    lesson = _lesson(operator, [case.id])
    decisions.lesson_approve(lesson=lesson, actor=reviewer, reason="one incident backs it")
    case_revoke(case=case, actor=second_reviewer, reason="wrong store")
    client.force_login(reviewer)
    html = _page(client, Lesson.objects.get(pk=lesson.id))
    assert "every supporting case is revoked, superseded or expired" in html
    assert "Approved and available for reuse" not in html
    queue = client.get(reverse("experience:queue") + "?status=approved&kind=lesson")
    assert "approved, unavailable" in queue.content.decode()


def test_availability_in_bulk_matches_the_domain_rules(
    memory: dict[str, Any], reviewer: User
) -> None:
    from experience.pages.selectors import availabilities

    case, other = memory["cases"]
    skill = memory["skill"]
    now = clock.now()
    assert availabilities([case.id, other.id, skill.id], now) == {
        case.id: availability.Availability(True),
        other.id: availability.Availability(True),
        skill.id: availability.Availability(True),
    }
    case_revoke(case=case, actor=reviewer, reason="wrong store")
    found = availabilities([case.id, skill.id], clock.now())
    assert (
        found[case.id].code == availability.NOT_APPROVED_NOW and found[case.id].status == "revoked"
    )
    assert found[skill.id].code == availability.CITED_CASE_NOT_APPROVED
    assert found[skill.id].subject == case.id


# --- 2. the diagnosis states a cause ---------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "尚未确定原因",
        "原因不明，待排查",
        "目前仍无法确定根本原因",
        "未知",
        "Cause not yet determined",
        "Root cause unknown; still under investigation",
        "TBD",
        "   ",
    ],
)
def test_a_diagnosis_that_says_the_cause_is_unknown_states_no_cause(statement: str) -> None:
    assert not domain.states_cause(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "Campaign B's store list does not include store 002.",
        "The POS sent an unknown store code, so the coupon was refused.",
        "活动B的门店列表漏配了002门店",
        "确定原因：门店未加入活动",
    ],
)
def test_a_diagnosis_naming_a_cause_states_one(statement: str) -> None:
    assert domain.states_cause(statement)


@pytest.mark.parametrize("statement", ["尚未确定原因", "The cause is not yet determined."])
def test_the_checklist_and_approval_refuse_an_undetermined_cause(
    statement: str, operator: User, reviewer: User, client: Client
) -> None:
    from tests.ui.factories import case_data

    diagnosis = {**case_data()["diagnosis"], "statement": statement}
    case = submit_case(operator, incident="INC-UNKNOWN", diagnosis=diagnosis)
    evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    client.force_login(reviewer)
    html = _page(client, case)
    # The page says what the condition checks, and marks it unmet.
    assert "“not yet determined” does not count" in html
    assert 'class="unmet" title="no_diagnosis" data-condition="no_diagnosis"' in html
    with pytest.raises(ReviewRefused) as refused:
        case_approve(case=case, actor=reviewer, reason="looks fine")
    assert domain.NO_DIAGNOSIS in refused.value.unmet


# --- 8. approve and next ---------------------------------------------------------------------


@pytest.fixture
def three_candidates(operator: User) -> list[Case]:
    return [submit_case(operator, incident=f"INC-NEXT-{n}") for n in range(3)]


def _queue_ids(client: Client, query: str) -> list[str]:
    html = client.get(reverse("experience:queue") + "?" + query).content.decode()
    return re.findall(r'href="/[^"]*/([0-9a-f]{64})/\?queue=', html)


def test_approve_and_next_lands_on_the_next_candidate_of_the_same_filter(
    three_candidates: list[Case], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    query = "kind=case&sort=title"
    order = _queue_ids(client, query)
    assert sorted(order) == sorted(c.digest for c in three_candidates)
    first = Case.objects.get(pk="case:" + order[0])
    evidence_check(case=first, key="diagnosis/0", actor=reviewer)
    response = client.post(
        reverse("experience:case-review", args=[order[0]]) + "?then=next",
        {"decision": "approve", "reason": "diagnosis checked", "queue": query},
    )
    assert response.status_code == 303
    location = urlsplit(response["Location"])
    assert order[1] in location.path
    assert parse_qs(location.query)["queue"] == [query]
    assert Case.objects.get(pk=first.id).status == Status.APPROVED


def test_reject_and_next_with_htmx_and_the_last_one_goes_back_to_the_queue(
    three_candidates: list[Case], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    query = "kind=case&sort=title"
    order = _queue_ids(client, query)
    response = client.post(
        reverse("experience:case-review", args=[order[1]]),
        {"decision": "reject", "reason": "duplicate", "queue": query, "then": "next"},
        headers=HTMX,
    )
    assert order[2] in response["HX-Redirect"]
    response = client.post(
        reverse("experience:case-review", args=[order[2]]),
        {"decision": "reject", "reason": "duplicate", "queue": query, "then": "next"},
    )
    # Nothing after the last one: back to the same filtered queue.
    assert response["Location"] == reverse("experience:queue") + "?" + query


def test_an_item_page_links_its_neighbours_in_the_queue(
    three_candidates: list[Case], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    order = _queue_ids(client, "kind=case&sort=title")
    middle = Case.objects.get(pk="case:" + order[1])
    html = _page(client, middle, "?queue=kind%3Dcase%26sort%3Dtitle")
    assert re.search(rf'href="[^"]*{order[0]}[^"]*" rel="prev" data-shortcut="k"', html)
    assert re.search(rf'href="[^"]*{order[2]}[^"]*" rel="next" data-shortcut="j"', html)
    assert "Approve and next" in html and "Keyboard shortcuts" in html


# --- issue 15: lessons in the queue, reviewed as cases are; confidence on every kind -----------


def test_lessons_wait_in_the_queue_and_filter_by_kind(
    memory: dict[str, Any], candidate: Case, operator: User, reviewer: User, client: Client
) -> None:
    lesson = _lesson(operator, [memory["cases"][0].id])
    client.force_login(reviewer)
    everything = client.get(reverse("experience:queue")).content.decode()
    assert lesson.title in everything and candidate.title in everything
    only = client.get(reverse("experience:queue") + "?kind=lesson").content.decode()
    assert lesson.title in only and candidate.title not in only


def test_a_lesson_is_approved_through_the_shared_review_panel(
    memory: dict[str, Any], operator: User, reviewer: User, client: Client
) -> None:
    lesson = _lesson(operator, [memory["cases"][0].id])
    client.force_login(reviewer)
    html = _page(client, lesson)
    assert 'id="review-panel"' in html and 'id="approval-checklist"' in html
    checklist = client.get(
        reverse("experience:lesson-checklist", args=[lesson.digest]) + "?reason=ok",
        headers=HTMX,
    ).content.decode()
    assert "Every condition is met." in checklist
    url = reverse("experience:lesson-review", args=[lesson.digest])
    refused = client.post(url, {"decision": "approve", "reason": ""}, headers=HTMX)
    assert refused.status_code == 422
    body = refused.content.decode()
    assert body.lstrip().startswith('<section id="review-panel"') and "reason_required" in body
    done = client.post(url, {"decision": "approve", "reason": "the case backs it"})
    assert done.status_code == 303
    assert Lesson.objects.get(pk=lesson.id).status == Status.APPROVED


def test_case_and_skill_pages_show_their_confidence_with_its_inputs(
    memory: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    for item, support in (
        (memory["cases"][0], "1 incident supports it"),
        (memory["skill"], "2 incidents support it"),
    ):
        html = _page(client, item)
        assert 'id="confidence"' in html and "Wilson lower bound" in html
        sentence = html.split('id="confidence-sentence">', 1)[1].split("</p>", 1)[0]
        assert sentence.startswith(f"{support}, 0 contradict it;"), sentence


# --- queries stay constant in the number of items ----------------------------------------------


def _queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_queue_queries_do_not_grow_with_approved_items(
    operator: User, reviewer: User, second_reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    url = reverse("experience:queue") + "?status=approved"
    approved_case(submitter=operator, reviewer=reviewer, incident="INC-Q-0")
    few = _queries(client, url)
    for n in range(1, 6):
        approved_case(submitter=operator, reviewer=second_reviewer, incident=f"INC-Q-{n}")
    assert _queries(client, url) == few


def test_the_lesson_list_shows_the_same_state_as_the_lesson_page(
    memory: dict[str, Any], operator: User, reviewer: User, second_reviewer: User, client: Client
) -> None:
    case = memory["cases"][0]
    lesson = _lesson(operator, [case.id])
    decisions.lesson_approve(lesson=lesson, actor=reviewer, reason="one incident backs it")
    client.force_login(reviewer)
    listed = client.get(reverse("experience:lesson-list") + "?status=approved").content.decode()
    assert "badge-approved" in listed and "approved, unavailable" not in listed
    case_revoke(case=case, actor=second_reviewer, reason="wrong store")
    listed = client.get(reverse("experience:lesson-list") + "?status=approved").content.decode()
    assert "approved, unavailable" in listed and "badge-approved" not in listed


def test_case_page_queries_do_not_grow_with_the_skills_citing_it(
    operator: User, reviewer: User, second_reviewer: User, client: Client
) -> None:
    cases = [
        approved_case(submitter=operator, reviewer=reviewer, incident=f"INC-C-{n}")
        for n in range(2)
    ]
    ids = [c.id for c in cases]
    client.force_login(reviewer)
    url = cases[0].get_absolute_url()
    approved_skill(submitter=operator, reviewer=second_reviewer, case_ids=ids)
    one = _queries(client, url)
    for n in range(4):
        skill, _ = skill_submit(
            content=parse_skill(skill_data(ids, title=f"Skill {n}"), tool_specs()), actor=operator
        )
        skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    assert _queries(client, url) == one


def test_a_refused_decision_keeps_the_queue_it_came_from(
    three_candidates: list[Case], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    query = "kind=case&sort=title"
    order = _queue_ids(client, query)
    refused = client.post(
        reverse("experience:case-review", args=[order[0]]),
        {"decision": "approve", "reason": "", "queue": query, "then": "next"},
        headers=HTMX,
    )
    assert refused.status_code == 422
    body = refused.content.decode()
    assert f'name="queue" value="{escape(query)}"' in body
    assert re.search(rf'href="[^"]*{order[1]}[^"]*" rel="next"', body)
