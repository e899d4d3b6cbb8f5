"""The dashboard's cards and the lists they open agree, on the demo world (issue 28, item 3).

A card counts with the selector its list shows, so a run a revocation reached is on the runs
list whatever read it (a recall too, not only a skill run), the re-review card counts the
re-review queue, and a skill proposal whose support fell below the rule offers no Submit."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from console.demo import RECALL_RUN, SECOND_SKILL_RUN
from console.selectors import dashboard_cards
from curation.domain.proposals import MIN_PROPOSAL_INCIDENTS
from curation.models import ReReview, ReReviewStatus, SkillProposal
from curation.proposals import SUPPORT_TOO_LOW, proposal_adopt
from experience.cases.models import Case
from experience.core.models import Status
from experience.review.revocation import case_revoke
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo() -> dict[str, Any]:
    out = StringIO()
    call_command("load_demo", "--no-replay", "--json", stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def signed_in(name: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=name))
    return client


def card_count(html: str, href: str) -> int:
    card = html.split(f'class="card" href="{href}"', 1)[1].split("</a>", 1)[0]
    found = re.search(r'<span class="count">(\d+)</span>', card)
    assert found is not None, card
    return int(found.group(1))


def test_the_runs_to_follow_up_card_counts_the_runs_its_list_shows_a_recall_among_them(
    demo: dict[str, Any],
) -> None:
    client = signed_in("rita")
    listing = reverse("experience:run-list") + "?follow_up=pending"
    count = card_count(client.get(reverse("home")).content.decode(), listing.replace("&", "&amp;"))
    page = client.get(listing).content.decode()
    rows = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    # The revoked case was read by the second skill run and by the agent's recall.
    assert RECALL_RUN in rows and SECOND_SKILL_RUN in rows
    assert rows.count("<tr>") == count == 2
    assert "Memory read by an agent" in rows
    fragment = client.get(listing, headers={"HX-Request": "true"}).content.decode()
    assert RECALL_RUN in fragment and "<html" not in fragment


def test_the_due_for_rereview_card_counts_the_rereview_queue(demo: dict[str, Any]) -> None:
    client = signed_in("rita")
    queue = reverse("curation:rereview-list")
    count = card_count(client.get(reverse("home")).content.decode(), queue)
    active = ReReview.objects.filter(status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING])
    # Three: the demo's prompt skill also read a rule that has a newer version since.
    assert count == active.count() == 3
    assert client.get(queue).context["page_obj"].paginator.count == count
    rita = User.objects.get(username="rita")
    assert dashboard_cards(now=clock.now(), user=rita)["due_for_rereview"].count == 3


def test_a_proposal_whose_support_fell_below_the_rule_offers_no_submit_and_says_why(
    demo: dict[str, Any],
) -> None:
    proposal = SkillProposal.objects.get()
    client = signed_in("olivia")
    before = client.get(proposal.get_absolute_url()).content.decode()
    assert "Submit candidate skill" in before and 'id="support-too-low"' not in before

    # A reviewer revokes one of its two cases: one incident is left.
    cases = Case.objects.filter(pk__in=proposal.case_ids, status=Status.APPROVED)
    assert cases.count() == MIN_PROPOSAL_INCIDENTS
    case_revoke(case=cases[0], actor=User.objects.get(username="rita"), reason="wrong scope")

    after = client.get(proposal.get_absolute_url()).content.decode()
    assert "Submit candidate skill" not in after
    assert "1 distinct incident" in after
    assert "span 1 distinct incident(s), and a skill proposal needs at least 2" in after
    with pytest.raises(ValidationFailure) as refused:
        proposal_adopt(
            proposal=proposal,
            actor=User.objects.get(username="olivia"),
            title=proposal.title,
            when=proposal.when,
            queries=["门店范围"],
        )
    assert (refused.value.field, refused.value.message) == ("proposal", SUPPORT_TOO_LOW)
    refused_post = client.post(
        reverse("curation:proposal-adopt", args=[proposal.pk]),
        {"title": proposal.title, "when": proposal.when, "query_1": "门店范围"},
    )
    assert refused_post.status_code == 422
    assert SkillProposal.objects.get().status == "open"


def test_another_tenants_runs_to_follow_up_are_neither_counted_nor_listed(
    demo: dict[str, Any],
) -> None:
    from reviewconsole.services import user_set_role
    from tests.helpers import tenants_exist

    tenants_exist("riverside")
    outsider = user_set_role(username="otto", role="reviewer", tenants=["riverside"])
    client = Client()
    client.force_login(outsider)
    listing = reverse("experience:run-list") + "?follow_up=pending"
    assert card_count(client.get(reverse("home")).content.decode(), listing) == 0
    page = client.get(listing).content.decode()
    assert RECALL_RUN not in page and SECOND_SKILL_RUN not in page
