"""Every dashboard card equals the list its link opens (issue 39, item 7).

On the demo world grown with what made cards and lists disagree before: an item approved ten
days ago (the "recently approved" card counted 7 days, its link listed every approved item), a
revoked lesson and one revoked forty days ago (the "revoked" card counted cases and skills of the
last 30 days, its link listed every revoked item, lessons too), another tenant's items, and a
user limited to that tenant. For each user, every card on the page is followed to its list and
the list's own count compared with the card's.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from console.selectors import QUEUE_CARDS
from experience.core.models import Status
from experience.lessons.models import Lesson
from experience.review.revocation import case_revoke, lesson_revoke
from reviewconsole import clock
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist
from tests.ui.factories import SCOPE, approved_case, submit_case

pytestmark = pytest.mark.django_db

CARD = re.compile(
    r'<a class="card" href="(?P<href>[^"]+)" data-card="(?P<name>[a-z_]+)">\s*'
    r'<span class="count">(?P<count>\d+)</span>'
)
# Every card the dashboard has; each test user together sees them all.
EVERY_CARD = {
    "candidates",
    "recently_approved",
    "recently_revoked",
    "due_for_rereview",
    "lesson_candidates",
    "lesson_conflicts",
    "runs_to_follow_up",
    "draft_documents",
    "revoked_documents",
}


@pytest.fixture
def world(frozen_clock: Any) -> dict[str, User]:
    """The demo, two more tenants' worth of items and dates either side of each card's window."""
    start = clock.now()
    frozen_clock(start - timedelta(days=45))
    call_command("load_demo", "--no-replay", "--json", stdout=StringIO())
    olivia = User.objects.get(username="olivia")
    rita = User.objects.get(username="rita")
    ravi = User.objects.get(username="ravi")
    # Revoked 40 days before the dashboard is read: outside "the last 30 days".
    old = approved_case(submitter=olivia, reviewer=rita, incident="INC-OLD-REVOKE")
    frozen_clock(start - timedelta(days=40))
    case_revoke(case=old, actor=ravi, reason="superseded by the new store list")
    # Approved ten days before: approved, but not "recently".
    frozen_clock(start - timedelta(days=10))
    approved_case(submitter=olivia, reviewer=rita, incident="INC-TEN-DAYS")
    frozen_clock(start)
    # A lesson revoked today: the revoked list includes lessons, so the card counts them.
    lesson = Lesson.objects.filter(status=Status.APPROVED).first()
    assert lesson is not None
    lesson_revoke(lesson=lesson, actor=rita, reason="its case was a different incident")
    # Another tenant: a candidate, an approved case and a limited reviewer who sees only it.
    tenants_exist("riverside")
    riverside = {**SCOPE, "tenant": "riverside"}
    submit_case(olivia, incident="INC-RIVER-1", scope=riverside)
    approved_case(submitter=olivia, reviewer=rita, incident="INC-RIVER-2", scope=riverside)
    otto = user_set_role(username="otto", role="reviewer", tenants=["riverside"])
    return {"rita": rita, "olivia": olivia, "ada": User.objects.get(username="ada"), "otto": otto}


def _cards(client: Client) -> dict[str, tuple[str, int]]:
    html = client.get(reverse("home")).content.decode()
    return {
        match["name"]: (match["href"].replace("&amp;", "&"), int(match["count"]))
        for match in CARD.finditer(html)
    }


def _listed(client: Client, href: str) -> int:
    """How many rows the list at ``href`` says it holds (its paginator's count)."""
    response = client.get(href)
    assert response.status_code == 200, href
    # An empty page is falsy: look the name up, do not ``or`` the two.
    page = response.context.get("page_obj", response.context.get("page"))
    assert page is not None, href
    return int(page.paginator.count)


@pytest.mark.parametrize("name", ["rita", "olivia", "ada", "otto"])
def test_every_card_counts_the_list_its_link_opens(world: dict[str, User], name: str) -> None:
    client = Client()
    client.force_login(world[name])
    cards = _cards(client)
    assert cards, name
    for card, (href, count) in cards.items():
        assert _listed(client, href) == count, f"{name}: {card} ({href})"


def test_the_users_together_see_every_card(world: dict[str, User]) -> None:
    seen: set[str] = set()
    for user in world.values():
        client = Client()
        client.force_login(user)
        seen |= set(_cards(client))
    assert seen == EVERY_CARD


def test_the_cards_that_disagreed_count_what_their_links_list(world: dict[str, User]) -> None:
    client = Client()
    client.force_login(world["rita"])
    cards = _cards(client)
    href, recently = cards["recently_approved"]
    every_approved = _listed(client, reverse("experience:queue") + "?status=approved")
    # The case approved ten days ago is approved, but not in the card nor in its list.
    assert every_approved > recently == _listed(client, href)
    assert "approved_within=7" in href
    href, revoked = cards["recently_revoked"]
    rows = client.get(href).context["rows"]
    assert "lesson" in {row["kind"] for row in rows}  # a lesson is counted and listed
    every_revoked = _listed(client, reverse("experience:queue") + "?status=revoked")
    assert every_revoked > revoked == len(rows)  # the case revoked 40 days ago is in neither


def test_a_tenant_limited_reviewer_counts_only_their_tenant(world: dict[str, User]) -> None:
    client = Client()
    client.force_login(world["otto"])
    cards = _cards(client)
    assert cards["candidates"][1] == 1
    assert cards["recently_approved"][1] == 1
    assert cards["recently_revoked"][1] == 0


def test_every_queue_card_is_on_the_page() -> None:
    assert set(QUEUE_CARDS) <= EVERY_CARD
