"""The dashboard's cards and what waits on the signed-in user.

Every card links to a list and counts that list's own selector with the very filters its link
carries (one query per card): the queue's cards go through ``experience.pages.queue.queue_listed``
with the card's query string, the documents' through the document list's form and selector, the
conflicts', the re-review queue's and the runs' through theirs. So a card's number is the number
of rows its link opens, by construction; ``tests/console/test_dashboard_cards.py`` follows each
link and compares.

"Waiting on you" is the user's attention set, as Gerrit's: the items they claimed
(``reviewconsole.claims``), the re-review entries of items they approved, and the items returned
to them (:func:`returned_to`: sent back to them for changes, not yet resubmitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.urls import reverse

from curation.models import ReReview
from curation.selectors.rereview import rereview_queue
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import Lesson
from experience.lessons.selectors import open_conflicts
from experience.pages.queue import queue_listed
from knowledge.forms import DocumentFilterForm
from knowledge.selectors import documents_visible
from reviewconsole.claims import claim_url, claims_held, item_page_url, minutes_left
from reviewconsole.conversations import changes_requested_of
from reviewconsole.models import ChangeRequest, ReviewClaim
from reviewconsole.permissions import VIEW_CASE, VIEW_DOCUMENT, VIEW_LESSON

RECENT_DAYS = 7
REVOKED_DAYS = 30
# How many entries each group of "Waiting on you" lists (its count says how many there are).
WAITING_SHOWN = 10

# The query string of each queue card's link: what the queue lists for it is what it counts.
QUEUE_CARDS: dict[str, dict[str, str]] = {
    "candidates": {},
    "recently_approved": {
        "status": Status.APPROVED,
        "approved_within": str(RECENT_DAYS),
        "sort": "-approved",
    },
    "recently_revoked": {"status": Status.REVOKED, "revoked_within": str(REVOKED_DAYS)},
    "lesson_candidates": {"kind": "lesson"},
}
DOCUMENT_CARDS: dict[str, dict[str, str]] = {
    "draft_documents": {"status": "submitted"},
    "revoked_documents": {"status": "revoked"},
}


@dataclass(frozen=True)
class Card:
    url: str
    count: int


def _address(name: str, params: dict[str, str]) -> str:
    base = reverse(name)
    return f"{base}?{urlencode(params)}" if params else base


def queue_card(key: str, user: User | AnonymousUser, now: datetime) -> Card:
    params = QUEUE_CARDS[key]
    _form, rows = queue_listed(QueryDict(urlencode(params)), user, now)
    return Card(_address("experience:queue", params), rows.count())


def document_card(key: str, user: User | AnonymousUser) -> Card:
    params = DOCUMENT_CARDS[key]
    form = DocumentFilterForm(QueryDict(urlencode(params)))
    filters = form.filters() if form.is_valid() else {}
    return Card(
        _address("knowledge:document-list", params), documents_visible(user, **filters).count()
    )


def dashboard_cards(*, now: datetime, user: User) -> dict[str, Card]:
    """The cards the user's permissions show, each counted by its list's own selector."""
    cards: dict[str, Card] = {}
    if user.has_perm(VIEW_CASE):
        for key in ("candidates", "recently_approved", "recently_revoked"):
            cards[key] = queue_card(key, user, now)
        cards["due_for_rereview"] = Card(
            reverse("curation:rereview-list"), rereview_queue(user).count()
        )
    if user.has_perm(VIEW_LESSON):
        cards["lesson_candidates"] = queue_card("lesson_candidates", user, now)
        cards["lesson_conflicts"] = Card(
            reverse("experience:lesson-conflicts"), open_conflicts(user).count()
        )
    if user.has_perm(VIEW_DOCUMENT):
        for key in DOCUMENT_CARDS:
            cards[key] = document_card(key, user)
    return cards


# --- waiting on you -------------------------------------------------------------------------------


def rereviews_of_approvals(user: User | AnonymousUser) -> QuerySet[ReReview]:
    """The re-review queue's entries (open or pending) of items ``user`` approved."""
    if not user.is_authenticated:
        return ReReview.objects.none()
    approved = (
        Q(item_id__in=Case.objects.filter(approved_by=user).values("pk"))
        | Q(item_id__in=Skill.objects.filter(approved_by=user).values("pk"))
        | Q(item_id__in=Lesson.objects.filter(approved_by=user).values("pk"))
    )
    return rereview_queue(user).filter(approved)


@dataclass(frozen=True)
class ReturnedItem:
    """An item sent back to the user for changes, not yet resubmitted."""

    request: ChangeRequest
    url: str

    def get_absolute_url(self) -> str:
        return self.url

    def __str__(self) -> str:
        return self.request.item_id


def returned_to(user: User | AnonymousUser) -> list[ReturnedItem]:
    """Items returned to ``user`` with requested changes and not yet resubmitted (one query)."""
    if not user.is_authenticated:
        return []
    return [
        ReturnedItem(request, item_page_url(request.item_id, request.tenant))
        for request in changes_requested_of(user)[:WAITING_SHOWN]
    ]


@dataclass(frozen=True)
class WaitingOnYou:
    claimed: list[ReviewClaim] = field(default_factory=list)
    rereviews: list[ReReview] = field(default_factory=list)
    returned: list[ReturnedItem] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.claimed) + len(self.rereviews) + len(self.returned)


@dataclass(frozen=True)
class ClaimedItem:
    claim: ReviewClaim
    url: str
    minutes_left: int


def waiting_on(user: User, now: datetime) -> WaitingOnYou:
    """What waits on ``user``: two queries (claims held, re-reviews of their approvals)."""
    claimed = list(claims_held(user, now)[:WAITING_SHOWN])
    rereviews = (
        list(rereviews_of_approvals(user)[:WAITING_SHOWN]) if user.has_perm(VIEW_CASE) else []
    )
    return WaitingOnYou(claimed=claimed, rereviews=rereviews, returned=returned_to(user))


def claimed_items(claims: list[ReviewClaim], now: datetime) -> list[ClaimedItem]:
    return [
        ClaimedItem(
            claim=claim,
            url=claim_url(claim),
            minutes_left=minutes_left(claim, now),
        )
        for claim in claims
    ]
