"""The claim buttons of every item page: take, release, break (``reviewconsole.claims``).

One endpoint for every kind, posted by a plain form from the item's decision area (the partial
``_claim.html``). The item is named by its id and tenant; the service finds it as the user may see
it (another tenant's item is a 404) and checks the permission its kind needs. The answer is the
item's page again (Post/Redirect/Get) with what happened, or what stood in the way, as a message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.timezone import localtime
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from reviewconsole import claims, clock, itemids
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.models import ReviewClaim
from reviewconsole.permissions import BREAK_CLAIM
from reviewconsole.reasons import MAX_REASON
from reviewconsole.views import HtmxHttpRequest, console_view, finish

# What each refusal of the services says on the page.
REFUSALS = {
    claims.NOT_UNDER_REVIEW: _(
        "Only an item under review (a candidate or a draft) can be claimed."
    ),
    claims.NOT_HOLDER: _("You hold no claim on this item."),
    claims.NOT_CLAIMED: _("Nobody holds a claim on this item."),
    claims.BREAK_REASON_REQUIRED: _("Breaking a claim needs a reason."),
}


def claim_context(
    item_id: str, tenant: str, user: User, *, may_claim: bool, now: datetime | None = None
) -> dict[str, Any]:
    """What the claim partial (``_claim.html``) shows on an item's page: the unlapsed claim on
    it, whether it is the user's, how many minutes it has left, and which buttons to offer
    (``may_claim``: the user holds the permission reviewing the item needs)."""
    now = now or clock.now()
    held = claims.claim_on(item_id, tenant, user, now)
    return {
        "claim": held,
        "claim_mine": held is not None and held.holder_id == user.pk,
        "claim_minutes_left": claims.minutes_left(held, now) if held else 0,
        "claim_item": item_id,
        "claim_tenant": tenant,
        "can_claim": may_claim,
        "can_break": user.has_perm(BREAK_CLAIM),
        "claim_action_url": reverse("claim"),
    }


def held_message(claim: ReviewClaim) -> str:
    return gettext("%(holder)s holds a claim on it until %(until)s.") % {
        "holder": claim.holder.username,
        "until": date_format(localtime(claim.expires_at), "Y-m-d H:i"),
    }


@require_POST
@console_view()
def claim(request: HtmxHttpRequest) -> HttpResponse:
    """``action``: ``take``, ``release`` or ``break`` (with a ``reason``), of the item ``item``
    of ``tenant``."""
    user = acting_user(request)
    item_id = str(request.POST.get("item", ""))[:200]
    tenant = str(request.POST.get("tenant", ""))[:64]
    action = request.POST.get("action", "")
    try:
        if action == "take":
            taken = claims.claim_take(actor=user, item_id=item_id, tenant=tenant)
            messages.success(
                request,
                gettext("You hold a claim on it until %(until)s.")
                % {"until": date_format(localtime(taken.expires_at), "Y-m-d H:i")},
            )
        elif action == "release":
            claims.claim_release(actor=user, item_id=item_id, tenant=tenant)
            messages.success(request, gettext("You released your claim."))
        elif action == "break":
            reason = str(request.POST.get("reason", ""))[:MAX_REASON]
            holder = claims.claim_break(actor=user, item_id=item_id, tenant=tenant, reason=reason)
            messages.success(request, gettext("You broke %(holder)s's claim.") % {"holder": holder})
        else:
            raise Http404
    except claims.ClaimHeld as held:
        messages.error(request, held_message(held.claim))
    except PermissionRefused:
        # The item exists for the user (else a 404 below) but its kind's review is not theirs.
        messages.error(request, gettext("Claiming this item needs the permission to review it."))
    except ValidationFailure as refused:
        if refused.message not in REFUSALS:
            # No such item, another tenant's, or not an item id at all: the same 404.
            raise Http404 from None
        messages.error(request, str(REFUSALS.get(refused.message, refused.message)))
    return finish(request, _item_url(item_id, tenant))


def _item_url(item_id: str, tenant: str) -> str:
    """The page of an item the service found (so the id parses and its kind is claimable)."""
    item = itemids.parse(item_id, field="item")
    return claims.claimables[item.kind.name].url(item, tenant)
