"""Re-review decisions: a stale or outdated approved item is re-certified, confirmed or closed.

An outdated lesson (``experience.lessons.outdating``) is queued here when it turns outdated and
leaves the queue when a reviewer restores it (on its page) or revokes it; the less supported
lesson of a conflict waits here until the conflict is resolved. An approved item an agent's run
outcome refuted waits here too, naming the runs, until a reviewer reports those runs' outcomes
(then the refutation counts, or not, as the reviewer said), confirms the item holds, or revokes
it: an agent's refutation alone takes nothing out (``experience.lessons.domain.counted_outcomes``).

Closing happens without a person asking too: an item that stops being approved closes its
entries inside the transaction of that change (``curation.subscribers.rereview_closed``, on the
event the change publishes), recording no event of its own; the approval, supersession or
revocation is the audited act.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import transaction

from curation.checks import BUILD_REFUSED, REVIEW_REFUSED, reason_given
from curation.models import ReReview, ReReviewReason, ReReviewResolution, ReReviewStatus
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_case
from experience.cases.services import case_submit
from experience.core.models import Status
from experience.lessons.models import Lesson, LessonConflict
from experience.pages.selectors import availabilities
from experience.runs.models import Outcome, RunOutcome
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import ADD_CASE, REVIEW_CASE, require
from reviewconsole.timeparse import to_utc_iso

if TYPE_CHECKING:
    from django.contrib.auth.models import User

ENTRY_CLOSED = "this re-review entry is not open"
ENTRY_NOT_CASE = "only cases are re-certified as a new version; revoke or confirm a skill"
ENTRY_NOT_SKILL = "a case is re-certified by a reviewed new version, not confirmed"
# How many runs one ``refuted`` entry names: an agent flooding refutations adds no entry per run
# and no unbounded list (the first runs are named; the reviewer's report of them answers it).
RUNS_NAMED = 50
MODELS: dict[str, type[Case] | type[Skill] | type[Lesson]] = {
    "case": Case,
    "skill": Skill,
    "lesson": Lesson,
}
ITEM_NOT_APPROVED = "the item is no longer approved"
# Confirming says the item holds: an item that may not be used now (a skill whose cited case was
# revoked) is revoked or its support re-certified instead.
CONFIRM_UNAVAILABLE = "the item cannot be used now, so it is not confirmed: revoke it instead"
VALID_TO_PASSED = "must be in the future: a new version is certified for what comes"


def resolution_of(status: str | None) -> str:
    """How the entries of an item that is no longer approved close (``None``: the item is gone)."""
    return {
        Status.SUPERSEDED: ReReviewResolution.SUPERSEDED,
        Status.REVOKED: ReReviewResolution.REVOKED,
    }.get(Status(status) if status else Status.REJECTED, ReReviewResolution.GONE)


def close_entries(
    item_id: str, resolution: str, *, now: datetime, note: str = "", reason: str = ""
) -> list[ReReview]:
    """Close the open or pending entries of ``item_id`` (only those of ``reason``, if given)."""
    found = ReReview.objects.filter(
        item_id=item_id, status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING]
    )
    if reason:
        found = found.filter(reason=reason)
    entries = list(found)
    for entry in entries:
        entry.status = ReReviewStatus.CLOSED
        entry.resolution = resolution
        entry.resolved_at = now
        entry.note = entry.note or note
        entry.save(update_fields=["status", "resolution", "resolved_at", "note"])
    return entries


def rereview_close_for(item: Case | Skill | Lesson) -> list[ReReview]:
    """Close the entries of an item that is no longer approved (called on its status change)."""
    if item.status in (Status.APPROVED, Status.OUTDATED):
        return []
    note = f"superseded by {item.superseded_by}" if item.superseded_by else ""
    # Closed at the moment the item left approved, which the write that moved it set on its row.
    left_at = {
        Status.REVOKED: item.revoked_at,
        Status.SUPERSEDED: item.superseded_at,
        Status.REJECTED: item.rejected_at,
    }.get(Status(item.status))
    return close_entries(item.id, resolution_of(item.status), now=left_at or clock.now(), note=note)


def lesson_rereview_followed(lesson: Lesson) -> list[ReReview]:
    """A lesson's status change reaches its re-review entries: one that turned outdated is
    queued (once per outdating: an open entry is not repeated); one restored closes its entries
    as restored; one revoked or superseded closes them as a case's do. Returns the entries
    queued or closed."""
    if lesson.status == Status.OUTDATED:
        if ReReview.objects.filter(
            item_id=lesson.id, reason=ReReviewReason.OUTDATED, status=ReReviewStatus.OPEN
        ).exists():
            return []
        entry = ReReview.objects.create(
            item_id=lesson.id,
            item_type="lesson",
            tenant=lesson.tenant,
            title=lesson.title,
            reason=ReReviewReason.OUTDATED,
            detail=lesson.outdated_cause,
            detected_at=lesson.outdated_at or clock.now(),
        )
        return [entry]
    if lesson.status == Status.APPROVED:
        # Approvals of lessons that never were outdated (nearly all) read no clock here.
        if not ReReview.objects.filter(
            item_id=lesson.id,
            reason=ReReviewReason.OUTDATED,
            status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING],
        ).exists():
            return []
        return close_entries(
            lesson.id,
            ReReviewResolution.RESTORED,
            now=clock.now(),
            reason=ReReviewReason.OUTDATED,
        )
    return rereview_close_for(lesson)


def refutation_rereview_followed(
    *,
    run_id: str,
    outcome: str,
    reviewed: bool,
    actor: User,
    items: list[tuple[str, str]],
    at: datetime,
) -> list[ReReview]:
    """A run's outcome reaches the re-review queue. An agent's refutation (``lead_was_wrong``
    not reported by a reviewer) puts each approved item the run read in the queue naming the
    run: one open ``refuted`` entry per item, later runs appended to it. A reviewer's report of
    a run answers it: an open ``refuted`` entry of an item the run read whose every run now has
    a reviewer's outcome closes as ``reported``. Returns the entries queued, extended or closed."""
    if not reviewed:
        return _refutation_queued(run_id, items, at) if outcome == Outcome.LEAD_WAS_WRONG else []
    return _refutations_answered([item_id for item_id, _kind in items], actor, at)


def _refutation_queued(run_id: str, items: list[tuple[str, str]], at: datetime) -> list[ReReview]:
    touched: list[ReReview] = []
    for kind, model in MODELS.items():
        ids = [item_id for item_id, item_type in items if item_type == kind]
        if not ids:
            continue
        approved = model.objects.filter(pk__in=ids, status=Status.APPROVED).order_by("pk")
        for item in approved.only("id", "tenant", "title"):
            entry = (
                ReReview.objects.select_for_update()
                .filter(item_id=item.id, reason=ReReviewReason.REFUTED, status=ReReviewStatus.OPEN)
                .first()
            )
            if entry is None:
                touched.append(
                    ReReview.objects.create(
                        item_id=item.id,
                        item_type=kind,
                        tenant=item.tenant,
                        title=item.title,
                        reason=ReReviewReason.REFUTED,
                        runs=[run_id],
                        detected_at=at,
                    )
                )
            elif run_id not in entry.runs and len(entry.runs) < RUNS_NAMED:
                entry.runs = [*entry.runs, run_id]
                entry.save(update_fields=["runs"])
                touched.append(entry)
    return touched


def _refutations_answered(item_ids: list[str], actor: User, at: datetime) -> list[ReReview]:
    closed: list[ReReview] = []
    entries = ReReview.objects.select_for_update().filter(
        item_id__in=item_ids, reason=ReReviewReason.REFUTED, status=ReReviewStatus.OPEN
    )
    for entry in entries:
        answered = RunOutcome.objects.filter(run_id__in=entry.runs, reviewed=True).count()
        if answered < len(set(entry.runs)):
            continue
        entry.status = ReReviewStatus.CLOSED
        entry.resolution = ReReviewResolution.REPORTED
        entry.resolved_by = actor
        entry.resolved_at = at
        entry.save(update_fields=["status", "resolution", "resolved_by", "resolved_at"])
        closed.append(entry)
    return closed


def conflict_rereview_queued(conflict: LessonConflict) -> ReReview | None:
    """A conflict whose rule names a better-supported side puts the other side in the re-review
    queue (the design: keep the side with evidence and higher confidence, mark the other for
    re-review); once per conflict."""
    if not conflict.favoured:
        return None
    other = Lesson.objects.filter(pk=conflict.other(conflict.favoured)).first()
    if (
        other is None
        or ReReview.objects.filter(
            item_id=other.id, reason=ReReviewReason.CONFLICT, detail=str(conflict.pk)
        ).exists()
    ):
        return None
    return ReReview.objects.create(
        item_id=other.id,
        item_type="lesson",
        tenant=other.tenant,
        title=other.title,
        reason=ReReviewReason.CONFLICT,
        detail=str(conflict.pk),
        detected_at=conflict.detected_at,
    )


def conflict_rereview_closed(conflict: LessonConflict) -> list[ReReview]:
    """A resolved conflict closes the re-review entry it opened."""
    closed = []
    for entry in ReReview.objects.filter(
        reason=ReReviewReason.CONFLICT,
        detail=str(conflict.pk),
        status__in=[ReReviewStatus.OPEN, ReReviewStatus.PENDING],
    ):
        entry.status = ReReviewStatus.CLOSED
        entry.resolution = ReReviewResolution.SETTLED
        entry.resolved_by = conflict.resolved_by
        entry.resolved_at = conflict.resolved_at or clock.now()
        entry.note = conflict.resolved_reason
        entry.save(update_fields=["status", "resolution", "resolved_by", "resolved_at", "note"])
        closed.append(entry)
    return closed


def _recertified_content(case: Case, valid_from: datetime, valid_to: datetime) -> dict[str, Any]:
    content = dict(case.content)
    content.pop("supersedes", None)
    content["valid_from"] = to_utc_iso(valid_from)
    content["valid_to"] = to_utc_iso(valid_to)
    content["supersedes"] = case.id
    return content


Item = TypeVar("Item", Case, Skill, Lesson)


def _open_entry_item(
    entry: ReReview,
    model: type[Item],
    actor: User,
    permission: str,
    *,
    refused: str,
    other_type: str,
) -> tuple[ReReview, Item]:
    """The entry, locked and still open, and its item, still approved and of a tenant ``actor``
    may act on; ``other_type`` is the refusal for an entry about the other kind of item."""
    entry = ReReview.objects.select_for_update().get(pk=entry.pk)
    if entry.status != ReReviewStatus.OPEN:
        raise ValidationFailure("entry", ENTRY_CLOSED)
    if entry.item_type != model._meta.model_name:
        raise ValidationFailure("entry", other_type)
    item = model.objects.get(pk=entry.item_id)
    require(actor, permission, item.tenant, message=refused)
    if item.status != Status.APPROVED:
        raise ValidationFailure("entry", ITEM_NOT_APPROVED)
    return entry, item


@transaction.atomic
def rereview_recertify(
    *,
    entry: ReReview,
    valid_from: datetime,
    valid_to: datetime,
    actor: User,
    now: datetime | None = None,
) -> Case:
    """Submit a new version of the case (same content, the validity given, ``supersedes`` the
    old one) as a candidate. Its evidence is unchecked, so a reviewer other than ``actor`` must
    check and approve it; that approval supersedes the old version and closes the entry."""
    require(actor, ADD_CASE, message=BUILD_REFUSED)
    entry, old = _open_entry_item(
        entry, Case, actor, ADD_CASE, refused=BUILD_REFUSED, other_type=ENTRY_NOT_CASE
    )
    now = now or clock.now()
    if valid_to <= now:
        raise ValidationFailure("valid_to", VALID_TO_PASSED)
    content = parse_case(_recertified_content(old, valid_from, valid_to))
    new, _created = case_submit(content=content, actor=actor, now=now)
    # Every open question about the old version is answered by the review of the new one.
    for sibling in ReReview.objects.select_for_update().filter(
        item_id=old.id, status=ReReviewStatus.OPEN
    ):
        sibling.status = ReReviewStatus.PENDING
        sibling.new_item_id = new.id
        sibling.resolved_by = actor
        sibling.save(update_fields=["status", "new_item_id", "resolved_by"])
    event_record(
        actor=actor,
        action=Action.REREVIEW_RECERTIFY,
        target=old.id,
        details={"entry": entry.pk, "new_version": new.id, "at": to_utc_iso(now)},
        at=now,
    )
    return new


@transaction.atomic
def rereview_confirm(
    *, entry: ReReview, actor: User, reason: str, now: datetime | None = None
) -> ReReview:
    """A reviewer confirms an approved skill still holds. Skills carry no conclusion and have
    no superseding versions; the cases they cite go through re-certification themselves. An
    entry of an agent's refutation (``refuted``) is confirmed the same way for any kind of item:
    the reviewer looked at the runs it names and the item holds."""
    require(actor, REVIEW_CASE, message=REVIEW_REFUSED)
    reason = reason_given(reason)
    kind = entry.item_type if entry.reason == ReReviewReason.REFUTED else "skill"
    opened: tuple[ReReview, Case | Skill | Lesson]
    if kind == "case":
        opened = _open_entry_item(
            entry, Case, actor, REVIEW_CASE, refused=REVIEW_REFUSED, other_type=ENTRY_NOT_SKILL
        )
    elif kind == "lesson":
        opened = _open_entry_item(
            entry, Lesson, actor, REVIEW_CASE, refused=REVIEW_REFUSED, other_type=ENTRY_NOT_SKILL
        )
    else:
        opened = _open_entry_item(
            entry, Skill, actor, REVIEW_CASE, refused=REVIEW_REFUSED, other_type=ENTRY_NOT_SKILL
        )
    entry, item = opened
    now = now or clock.now()
    state = availabilities([item.id], now).get(item.id)
    if state is not None and not state.available:
        raise ValidationFailure("entry", CONFIRM_UNAVAILABLE)
    entry.status = ReReviewStatus.CLOSED
    entry.resolution = ReReviewResolution.CONFIRMED
    entry.resolved_by = actor
    entry.resolved_at = now
    entry.note = reason
    entry.save(update_fields=["status", "resolution", "resolved_by", "resolved_at", "note"])
    event_record(
        actor=actor,
        action=Action.REREVIEW_CONFIRM,
        target=item.id,
        reason=reason,
        details={"entry": entry.pk, "reason": entry.reason, "document": entry.document_id},
        at=now,
    )
    return entry
