"""Review claims: a reviewer says "I am looking at this one", and others see who and until when.

A claim names an item under review (a candidate case, skill or lesson, a draft knowledge document
version) by its id string (``reviewconsole.itemids``) and its tenant. It counts until its
``expires_at`` (``REVIEW_CLAIM_TTL_MINUTES`` after it was taken), read against the clock: a
lapsed claim simply stops counting, and the next claim on the item replaces it. The holder
releases it; an admin breaks it (``reviewconsole.break_reviewclaim``, with a reason); a decision
on the item ends it. A decision on an item someone else holds unlapsed is refused with
``claimed_by_other`` unless the decider takes the claim over, audited
(:func:`decision_unmet`, :func:`decision_settle`, called by the review lifecycle with the item's
row locked, so two decisions or a claim and a decision on one item never interleave).

The items belong to the apps above this core, which register per kind how to find one for a
claim (:func:`claimable_register`): its tenant, title, whether it is under review, and the
permission reviewing it needs. Every write here is one transaction with its audit event; another
tenant's item is refused exactly as an unknown one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from reviewconsole import clock, itemids
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import ItemId, Kind
from reviewconsole.models import Action, ReviewClaim
from reviewconsole.permissions import BREAK_CLAIM, require
from reviewconsole.tenancy import may_access, visible

# The unmet name of a decision on an item another reviewer holds (docs/contracts.md).
CLAIMED_BY_OTHER = "claimed_by_other"

NO_SUCH_ITEM = "no item under review with this id"
NOT_UNDER_REVIEW = "is not under review: only a candidate or a draft version can be claimed"
HELD_BY_OTHER = "is claimed by {holder} until {until}"
NOT_HOLDER = "you hold no claim on this item"
NOT_CLAIMED = "nobody holds a claim on this item"
BREAK_REASON_REQUIRED = "breaking a claim needs a reason"


@dataclass(frozen=True)
class ClaimSubject:
    """An item as a claim needs it, found (and locked) by its kind's lookup."""

    tenant: str
    title: str
    under_review: bool
    # The permission reviewing an item of this kind needs (what claiming it needs too).
    permission: str


@dataclass(frozen=True)
class Claimable:
    # The item of this id in this tenant, its row locked for the claim; None when none.
    lookup: Callable[[ItemId, str], ClaimSubject | None]
    # The console page of the item of this id in this tenant.
    url: Callable[[ItemId, str], str]


claimables: dict[str, Claimable] = {}


def claimable_register(kind: Kind, claimable: Claimable) -> None:
    claimables[kind.name] = claimable


class ClaimHeld(ValidationFailure):
    """The item is claimed by someone else, unlapsed; nothing was written."""

    def __init__(self, claim: ReviewClaim) -> None:
        super().__init__(
            "item",
            HELD_BY_OTHER.format(holder=claim.holder.username, until=claim.expires_at.isoformat()),
        )
        self.claim = claim


def claim_ttl() -> timedelta:
    return timedelta(minutes=settings.REVIEW_CLAIM_TTL_MINUTES)


def _subject(actor: User, item_id: str, tenant: str) -> tuple[ItemId, ClaimSubject]:
    """The item ``item_id`` names in ``tenant``, its row locked, as ``actor`` may see it: an
    unknown id, an unclaimable kind and another tenant's item are refused alike."""
    item = itemids.parse(item_id, field="item")
    claimable = claimables.get(item.kind.name)
    subject = claimable.lookup(item, tenant) if claimable is not None else None
    if subject is None or not may_access(actor, subject.tenant):
        raise ValidationFailure("item", f"{NO_SUCH_ITEM}: {item_id}")
    return item, subject


def _held(item_id: str, tenant: str) -> ReviewClaim | None:
    """The claim row of the item, locked (lapsed or not)."""
    return (
        ReviewClaim.objects.select_for_update()
        .select_related("holder")
        .filter(tenant=tenant, item_id=item_id)
        .first()
    )


def is_active(claim: ReviewClaim, now: datetime) -> bool:
    return claim.expires_at > now


def minutes_left(claim: ReviewClaim, now: datetime) -> int:
    """Whole minutes until the claim lapses, rounded up (1 in its last minute)."""
    return max(1, math.ceil((claim.expires_at - now) / timedelta(minutes=1)))


@transaction.atomic
def claim_take(
    *, actor: User, item_id: str, tenant: str, now: datetime | None = None
) -> ReviewClaim:
    """Claim an item under review for ``REVIEW_CLAIM_TTL_MINUTES``; the holder claiming again
    renews it, and a lapsed claim of someone else is replaced. Refused (``ClaimHeld``) while
    someone else holds it unlapsed."""
    now = now or clock.now()
    item, subject = _subject(actor, item_id, tenant)
    require(actor, subject.permission, subject.tenant)
    if not subject.under_review:
        raise ValidationFailure("item", NOT_UNDER_REVIEW)
    claim = _held(item_id, subject.tenant)
    details: dict[str, object] = {"expires_at": (now + claim_ttl()).isoformat()}
    if claim is not None:
        if is_active(claim, now) and claim.holder_id != actor.pk:
            raise ClaimHeld(claim)
        if claim.holder_id == actor.pk:
            details["renewed"] = True
        else:
            details["lapsed_claim_of"] = claim.holder.username
        claim.holder = actor
        claim.claimed_at = now
        claim.expires_at = now + claim_ttl()
        claim.title = subject.title[:300]
        claim.save(update_fields=["holder", "claimed_at", "expires_at", "title"])
    else:
        try:
            with transaction.atomic():
                claim = ReviewClaim.objects.create(
                    tenant=subject.tenant,
                    item_id=item_id,
                    kind=item.kind.name,
                    title=subject.title[:300],
                    holder=actor,
                    claimed_at=now,
                    expires_at=now + claim_ttl(),
                )
        except IntegrityError:
            # Another reviewer's claim committed between our read and our insert.
            raced = _held(item_id, subject.tenant)
            if raced is None:
                raise
            raise ClaimHeld(raced) from None
    event_record(
        actor=actor,
        action=Action.CLAIM_TAKE,
        target=item_id,
        details={"tenant": subject.tenant, **details},
        at=now,
    )
    return claim


@transaction.atomic
def claim_release(*, actor: User, item_id: str, tenant: str, now: datetime | None = None) -> None:
    """The holder gives a claim up (lapsed or not)."""
    now = now or clock.now()
    _item, subject = _subject(actor, item_id, tenant)
    claim = _held(item_id, subject.tenant)
    if claim is None or claim.holder_id != actor.pk:
        raise ValidationFailure("item", NOT_HOLDER)
    claim.delete()
    event_record(
        actor=actor,
        action=Action.CLAIM_RELEASE,
        target=item_id,
        details={"tenant": subject.tenant},
        at=now,
    )


@transaction.atomic
def claim_break(
    *, actor: User, item_id: str, tenant: str, reason: str, now: datetime | None = None
) -> str:
    """An admin ends someone's unlapsed claim, with a reason; answers whose it was."""
    now = now or clock.now()
    _item, subject = _subject(actor, item_id, tenant)
    require(actor, BREAK_CLAIM, subject.tenant)
    if not reason.strip():
        raise ValidationFailure("reason", BREAK_REASON_REQUIRED)
    claim = _held(item_id, subject.tenant)
    if claim is None or not is_active(claim, now):
        raise ValidationFailure("item", NOT_CLAIMED)
    holder = claim.holder.username
    claim.delete()
    event_record(
        actor=actor,
        action=Action.CLAIM_BREAK,
        target=item_id,
        reason=reason.strip(),
        details={"tenant": subject.tenant, "holder": holder},
        at=now,
    )
    return holder


# --- decisions ------------------------------------------------------------------------------------


def decision_unmet(
    *, actor: User, item_id: str, tenant: str, take_over: bool, now: datetime
) -> list[str]:
    """``[CLAIMED_BY_OTHER]`` when someone else holds the item unlapsed and ``actor`` does not
    take it over; the claim row stays locked until the decision's transaction ends."""
    claim = _held(item_id, tenant)
    if claim is None or not is_active(claim, now) or claim.holder_id == actor.pk or take_over:
        return []
    return [CLAIMED_BY_OTHER]


def decision_settle(*, actor: User, item_id: str, tenant: str, now: datetime) -> None:
    """A decision on the item ends its claim, in the decision's transaction: someone else's
    unlapsed claim is taken over (audited; :func:`decision_unmet` let it through only with
    ``take_over``), the decider's own or a lapsed one simply ends."""
    claim = _held(item_id, tenant)
    if claim is None:
        return
    if is_active(claim, now) and claim.holder_id != actor.pk:
        event_record(
            actor=actor,
            action=Action.CLAIM_TAKE_OVER,
            target=item_id,
            details={"tenant": tenant, "holder": claim.holder.username},
            at=now,
        )
    claim.delete()


# --- reads ----------------------------------------------------------------------------------------


def _active(user: User | AnonymousUser, now: datetime) -> QuerySet[ReviewClaim]:
    return visible(ReviewClaim.objects.select_related("holder"), user).filter(expires_at__gt=now)


def claim_on(
    item_id: str, tenant: str, user: User | AnonymousUser, now: datetime
) -> ReviewClaim | None:
    """The unlapsed claim on an item ``user`` may see (None: unclaimed, lapsed, or another
    tenant's)."""
    return _active(user, now).filter(tenant=tenant, item_id=item_id).first()


def claims_on(
    item_ids: Iterable[str], user: User | AnonymousUser, now: datetime
) -> dict[str, ReviewClaim]:
    """The unlapsed claims on ``item_ids`` (content-named ids: one tenant each) that ``user``
    may see, by item id: one query whatever the number of ids."""
    ids = sorted(set(item_ids))
    if not ids:
        return {}
    return {claim.item_id: claim for claim in _active(user, now).filter(item_id__in=ids)}


def claims_held(user: User | AnonymousUser, now: datetime) -> QuerySet[ReviewClaim]:
    """The unlapsed claims ``user`` holds, in tenants they may still see: "Waiting on you"."""
    if not user.is_authenticated:
        return ReviewClaim.objects.none()
    return _active(user, now).filter(holder=user).order_by("expires_at", "id")


def claim_url(claim: ReviewClaim) -> str:
    """The console page of the claimed item."""
    return item_page_url(claim.item_id, claim.tenant)


def item_page_url(item_id: str, tenant: str) -> str:
    """The console page of any item a claim may name (a document's is its tenant's)."""
    item = itemids.parse(item_id)
    return claimables[item.kind.name].url(item, tenant)
