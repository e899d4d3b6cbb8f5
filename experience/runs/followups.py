"""Runs to follow up after a revocation: flagged when the revocation stores its impact, cleared
by someone who may review (``REVIEW_CASE``) marking the run followed up, which is audited
(``experience.run.follow_up``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q, QuerySet

from experience.runs.models import Run, RunFollowUp, RunOwner
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE, require
from reviewconsole.reasons import reason_within_cap
from reviewconsole.tenancy import may_access, tenants_of

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

NOT_FLAGGED = "is not a run to follow up"
ALREADY_FOLLOWED_UP = "is already followed up"
FOLLOW_UP_REFUSED = "marking a run followed up needs the review permission"


def follow_ups_flag(*, run_ids: Iterable[str], item_id: str, at: datetime) -> None:
    """Flag every run in ``run_ids`` as to follow up because ``item_id`` was revoked at ``at``.

    Called where a revocation stores its impact, in the same transaction. A run followed up
    earlier is flagged again."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return
    existing = {
        row.run_id: row for row in RunFollowUp.objects.select_for_update().filter(run_id__in=wanted)
    }
    new = []
    for run_id in wanted:
        row = existing.get(run_id)
        if row is None:
            new.append(RunFollowUp(run_id=run_id, revoked_items=[item_id], flagged_at=at))
            continue
        row.revoked_items = [*[i for i in row.revoked_items if i != item_id], item_id]
        row.flagged_at = at
        row.followed_up_by = None
        row.followed_up_at = None
        row.reason = ""
        row.save(
            update_fields=[
                "revoked_items",
                "flagged_at",
                "followed_up_by",
                "followed_up_at",
                "reason",
            ]
        )
    RunFollowUp.objects.bulk_create(new)


def _run_tenants(run_id: str) -> set[str]:
    return set(Run.objects.filter(run_id=run_id).values_list("tenant", flat=True))


@transaction.atomic
def run_follow_up(
    *, run_id: str, actor: User, reason: str = "", now: datetime | None = None
) -> RunFollowUp:
    """Mark ``run_id`` followed up: its flag clears until another revocation reaches it."""
    require(actor, REVIEW_CASE, message=FOLLOW_UP_REFUSED)
    reason = (reason or "").strip()
    reason_within_cap(reason)
    row = RunFollowUp.objects.select_for_update().filter(run_id=run_id).first()
    # Another tenant's run answers as one that is not flagged: the answer never tells it exists.
    if row is None or not all(may_access(actor, t) for t in _run_tenants(run_id)):
        raise ValidationFailure("run_id", NOT_FLAGGED)
    if not row.pending:
        raise ValidationFailure("run_id", ALREADY_FOLLOWED_UP)
    row.followed_up_by = actor
    now = now or clock.now()
    row.followed_up_at = now
    row.reason = reason
    row.save(update_fields=["followed_up_by", "followed_up_at", "reason"])
    event_record(
        actor=actor,
        action=Action.RUN_FOLLOW_UP,
        target=run_id,
        reason=reason,
        details={
            "revoked_items": list(row.revoked_items),
            "flagged_at": row.flagged_at.isoformat(),
        },
        at=now,
    )
    return row


# --- reads --------------------------------------------------------------------------------------


def follow_ups_of(run_ids: Iterable[str]) -> dict[str, RunFollowUp]:
    """The follow-up records of ``run_ids`` (pending or not), in one query."""
    wanted = sorted(set(run_ids))
    if not wanted:
        return {}
    return {
        row.run_id: row
        for row in RunFollowUp.objects.filter(run_id__in=wanted).select_related("followed_up_by")
    }


def follow_up_get(run_id: str) -> RunFollowUp | None:
    return RunFollowUp.objects.select_related("followed_up_by").filter(run_id=run_id).first()


FOLLOW_UP_PENDING = "pending"
FOLLOW_UP_DONE = "done"


def follow_ups_visible(
    user: User | AnonymousUser,
    state: str = FOLLOW_UP_PENDING,
    *,
    run_id: str = "",
    status: str = "",
    skill_id: str = "",
) -> QuerySet[RunFollowUp]:
    """The flagged run ids ``user`` may see, still to follow up (``FOLLOW_UP_PENDING``) or
    followed up (``FOLLOW_UP_DONE``), newest flag first: every run id a revocation reached, a
    skill run or an agent's recall, context block or investigation reads alike. The dashboard's
    card counts this and the runs list's follow-up filter lists it (``run_id`` contained in the
    id, ``status`` and ``skill_id`` of a skill run under it: the list's other filters).

    A run id is seen by the users of the tenant that opened it (``RunOwner``); one opened before
    runs had owners, by the users of its skill runs' tenant."""
    rows = RunFollowUp.objects.filter(followed_up_at__isnull=state == FOLLOW_UP_PENDING)
    tenants = tenants_of(user)
    if run_id:
        rows = rows.filter(run_id__icontains=run_id)
    if status or skill_id:
        # The runs list's skill-run filters narrow to run ids with such a skill run.
        runs = Run.objects.all()
        runs = runs.filter(status=status) if status else runs
        runs = runs.filter(skill_id=skill_id) if skill_id else runs
        rows = rows.filter(run_id__in=runs.values("run_id"))
    if tenants is not None:
        allowed = sorted(tenants)
        owned = RunOwner.objects.filter(tenant__in=allowed).values("run_id")
        unowned = (
            Run.objects.filter(tenant__in=allowed)
            .exclude(run_id__in=RunOwner.objects.values("run_id"))
            .values("run_id")
        )
        rows = rows.filter(Q(run_id__in=owned) | Q(run_id__in=unowned))
    return rows.select_related("followed_up_by").order_by("-flagged_at", "-id")


def runs_to_follow_up_count(user: User | AnonymousUser) -> int:
    """How many flagged run ids ``user`` may see (the dashboard's count of the same list)."""
    return follow_ups_visible(user).count()
