"""Each list and detail page, as a full page and as an htmx fragment, with a fixed query count."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experience.cases.services import evidence_check
from tests.ui.factories import submit_case

HTMX = {"HX-Request": "true"}


def _digest(item_id: str) -> str:
    return item_id.split(":", 1)[1]


@pytest.fixture
def pages(memory: dict[str, Any], candidate: Any, knowledge: None) -> dict[str, str]:
    return {
        "dashboard": reverse("home"),
        "queue": reverse("experience:queue") + "?status=&sort=title",
        "case": reverse("experience:case-detail", args=[_digest(memory["cases"][0].id)]),
        "candidate": reverse("experience:case-detail", args=[_digest(candidate.id)]),
        "skill": reverse("experience:skill-detail", args=[_digest(memory["skill"].id)]),
        "case_revoke": reverse("experience:case-revoke", args=[_digest(memory["cases"][0].id)]),
        "runs": reverse("experience:run-list"),
        "run": reverse("experience:run-detail", args=["run-ui-1"]),
        "documents": reverse("knowledge:document-list") + "?campaign=campaign-a",
        "document": reverse("knowledge:document-detail", args=["rule-b", 2]),
        "search": reverse("knowledge:search-preview") + "?" + SEARCH_QUERY,
        "audit": reverse("event-list") + "?action=experience.case.approve",
    }


SEARCH_QUERY = (
    "query=%E4%BC%98%E6%83%A0%E5%88%B8%E6%97%A0%E6%B3%95%E4%BD%BF%E7%94%A8"
    "&tenant=teahouse&brand=leaf-and-cup&store=store-001&campaign=campaign-a"
    "&occurred_at=2026-09-18T14:00&known_at=2026-09-18T14:10&timezone=Asia/Shanghai"
    "&channel=miniapp&product=fruit-tea&basket_cents=3200&limit=4"
)

# (page, role, full-page queries, fragment queries, text the fragment must hold); every page
# reads the user's permissions and tenant memberships once, in one statement
# (reviewconsole.access).
CASES = [
    # +1: runs to follow up; one query per card, each its list's own selector (three queue
    # cards, lessons waiting, open conflicts, the re-review queue, two document cards); +2 what
    # waits on the user: the items they claimed, the re-reviews of what they approved.
    # +1: "Waiting on you"'s items returned for changes (reviewconsole.conversations).
    ("dashboard", "reviewer", 16, 16, "Candidates waiting"),
    # The queue: +3, the availability of the approved rows on the page (cases; skills and their
    # cited cases), read in bulk.
    # +2: scope values for the filters; +1: who holds a claim on each row of the page.
    ("queue", "reviewer", 12, 9, "Coupon refused"),
    # Item pages: +1 the neighbours in the queue (j/k, "Approve and next"), +2 the computed
    # confidence (the item's evidence, run outcomes); a case also +2 the availability of the
    # skills citing it.
    # +1 whose accounts the submitter's is, for the checks that count (reviewconsole.accounts);
    # a candidate's checklist +1 the reviewer's and the submitter's, in one query.
    # +1: the claim on it (reviewconsole.claims), every item page; +2: its conversation (change
    # requests, threads).
    ("case", "reviewer", 24, 23, "Diagnosis"),  # +1: the runs it was drafted from
    ("candidate", "reviewer", 22, 21, "Approval checklist"),
    ("skill", "reviewer", 16, 15, "Cited cases"),
    # +1: the item's tenant (impact); +1: the runs whose context block carried it
    ("case_revoke", "reviewer", 12, 11, "Impact preview"),
    # +2: the page's follow-up flags, the titles of the skills it names (one query per kind)
    ("runs", "reviewer", 8, 7, "run-ui-1"),
    # the outcome form reads the latest report; +4: the follow-up flag, item titles by kind
    ("run", "reviewer", 13, 12, "doc:rule-b@1"),  # +1: the run's owner and tenant
    ("documents", "operator", 9, 6, "doc:rule-a@2"),  # +2: scope values for the filters
    (
        "document",
        "operator",
        14,
        13,
        "Compare with version",
    ),  # +2: stored revocation impacts, and which tenant older ones belong to; +2: conversation;
    # +1: its claim
    # The search index's lexicon is cached per process (the fixture's import read it already)
    # while the stamp the ranking statement reads is unchanged; the fragment finds the returned
    # versions' evidence rows cached by the full page.
    # +2: scope values for the context fields; +1: the scope's tenant must exist
    ("search", "operator", 9, 5, "conditions"),
    ("audit", "admin", 7, 6, "experience.case.approve"),  # +1: the titles of the cases named
]


@pytest.mark.parametrize(("page", "role", "full", "fragment", "text"), CASES)
def test_page_and_fragment(
    page: str,
    role: str,
    full: int,
    fragment: int,
    text: str,
    pages: dict[str, str],
    users: dict[str, User | None],
    client: Client,
    django_assert_num_queries: Any,
) -> None:
    user = users[role]
    assert user is not None
    client.force_login(user)
    with django_assert_num_queries(full):
        response = client.get(pages[page])
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and text in html

    with django_assert_num_queries(fragment):
        response = client.get(pages[page], headers=HTMX)
    assert response.status_code == 200
    assert "HX-Request" in response["Vary"]
    html = response.content.decode()
    assert text in html
    if page != "dashboard":  # the dashboard has no fragment; it is always the whole page
        assert "<html" not in html


def _case_page_queries(client: Client, case_id: str) -> int:
    url = reverse("experience:case-detail", args=[_digest(case_id)])
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_case_page_queries_do_not_grow_with_evidence(
    operator: User, reviewer: User, second_reviewer: User, client: Client
) -> None:
    small = submit_case(operator, incident="INC-SMALL", observations=1)
    large = submit_case(operator, incident="INC-LARGE", observations=40)
    client.force_login(reviewer)
    evidence_check(case=small, key="observations/0", actor=second_reviewer)
    for index in range(40):
        evidence_check(case=large, key=f"observations/{index}", actor=second_reviewer)
    assert _case_page_queries(client, small.id) == _case_page_queries(client, large.id)
