"""``run_outcome_report``: what happened after a run, reported by its owner or a reviewer.

A run id is any id under which memory was read (``Reference`` rows: recall, a context block, a
skill run, an investigation). It belongs to the account and tenant that opened it
(``experience.runs.claims``): its owner, or a reviewer of its tenant, may report its outcome; for
anyone else (another account, anyone who may not see its tenant) it is a run with no reads. The
latest outcome of a run is kept
and every report is audited (with the outcome and reporter it replaced);
``experience.lessons.outcome_tallies`` turns outcomes into confidence inputs of the items the run
read. Only a reviewer's report counts, in either direction (``experience.lessons.domain.
counted_outcomes``): an agent's report is kept and shown, and an agent's refutation queues a
re-review of what the run read (``RunOutcomeReported``, ``curation.rereview``). So only a
reviewer's report checks the lessons it reached against the outdated rule
(``experience.lessons.outdating``), and an outcome a reviewer reported is changed only by a
reviewer: an agent cannot take back, by re-reporting its own run, the evidence a reviewer added
or restored an item over.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import transaction

from experience.cases.models import Case, Skill
from experience.lessons.models import Lesson
from experience.lessons.outdating import lesson_heirs
from experience.review.events import RunOutcomeReported
from experience.review.outdating import lessons_outdated_check
from experience.runs.claims import run_named, run_owner
from experience.runs.models import Outcome, Reference, RunOutcome
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.dispatch import dispatch
from reviewconsole.errors import UnknownId, ValidationFailure
from reviewconsole.models import Action
from reviewconsole.permissions import REVIEW_CASE, USE_EXPERIENCE, holds, require
from reviewconsole.reasons import reason_within_cap
from reviewconsole.runids import validate_run_id
from reviewconsole.tenancy import may_access

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OUTCOMES = tuple(Outcome.values)
OUTCOME_INVALID = "must be one of " + ", ".join(OUTCOMES)
NO_READS = "names no run under which memory was read"
USE_REFUSED = "reporting an outcome needs the agent or reviewer role"
NOT_OWNER = (
    "only the account that opened this run, or a reviewer of its tenant, may report its outcome"
)
REVIEWED_OUTCOME = "a reviewer reported this run's outcome; only a reviewer may change it"


def run_read_items(run_id: str) -> list[tuple[str, str]]:
    """``(item_id, item_type)`` of every memory item read under ``run_id``, first read first."""
    return list(
        dict.fromkeys(Reference.objects.filter(run_id=run_id).values_list("item_id", "item_type"))
    )


def _tenants(items: Iterable[tuple[str, str]]) -> set[str]:
    ids = [item_id for item_id, _kind in items]
    tenants: set[str] = set()
    for model in (Case, Skill, Lesson):
        tenants |= set(model.objects.filter(pk__in=ids).values_list("tenant", flat=True))
    return tenants


def _counts(outcome: str, reviewed: bool) -> bool:
    """Whether this report can move confidence (the account's one vote per item): a confirmation
    or a refutation from a reviewer, ``unresolved`` never."""
    return reviewed and outcome in (Outcome.RESOLVED_BY_LEAD, Outcome.LEAD_WAS_WRONG)


def _username(user_id: int | None) -> str | None:
    if user_id is None:
        return None
    user = get_user_model().objects.filter(pk=user_id).first()
    return user.get_username() if user is not None else None


def _validate(run_id: object, outcome: object, note: object) -> tuple[str, str, str]:
    run_id = validate_run_id(run_id)
    if outcome not in OUTCOMES:
        raise ValidationFailure("outcome", OUTCOME_INVALID)
    if note is None:
        note = ""
    if not isinstance(note, str):
        raise ValidationFailure("note", "must be a string")
    # The note is the event's reason: the one cap of every reason.
    return run_id, str(outcome), reason_within_cap(note, field="note").strip()


@dataclass(frozen=True)
class ReadItem:
    """An item the run read: its id and kind."""

    id: str
    type: str


@dataclass(frozen=True)
class OutcomeReport:
    """What :func:`run_outcome_report` answers (the API's and MCP's ``RunOutcomeResult`` is
    read from it)."""

    run_id: str
    outcome: str
    note: str
    reported_by: str
    reported_at: str
    # The outcome replaced, if any.
    previous: str | None
    # Whether this report can move confidence (``_counts``).
    counts: bool
    items: tuple[ReadItem, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            **{name: getattr(self, name) for name in _REPORT_FIELDS},
            "items": [{"id": item.id, "type": item.type} for item in self.items],
        }


_REPORT_FIELDS = ("run_id", "outcome", "note", "reported_by", "reported_at", "previous", "counts")


@transaction.atomic
def run_outcome_report(
    *,
    run_id: str,
    outcome: str,
    actor: User,
    note: str | None = None,
    now: datetime | None = None,
    stored: bool = False,
) -> OutcomeReport:
    """Record ``outcome`` for ``run_id``; replaces an earlier report of the same run.

    ``run_id`` is the run id as its caller knows it (``experience.runs.claims.run_named``: the
    actor's own run, or a reviewer's run of their tenants; another account's run answers as an
    unknown one), or with ``stored`` the run's stored id (the console's run page)."""
    require(actor, USE_EXPERIENCE, message=USE_REFUSED)
    run_id, outcome, note = _validate(run_id, outcome, note)
    claim = run_owner(run_id) if stored else run_named(actor, run_id)
    key = claim.run_id if claim is not None else run_id
    items = run_read_items(key)
    # A run of a tenant the actor may not see (or whose reads reach one, recorded before runs had
    # owners) answers as one with no reads: the answer never tells which run ids exist in other
    # tenants. Another account's run is found only by a reviewer (``run_named``), or by its
    # stored id on its console page, shown to the users of its tenant.
    if (
        claim is None
        or not items
        or not may_access(actor, claim.tenant)
        or not all(may_access(actor, tenant) for tenant in _tenants(items))
    ):
        raise UnknownId("run_id", NO_READS)
    if claim.owner_id != actor.pk:
        # Another account's run of the actor's tenants: only a reviewer reports its outcome.
        require(actor, REVIEW_CASE, message=NOT_OWNER)
    now = now or clock.now()
    # A reviewer's report is what lets a confirmation count (lesson_domain.counted_outcomes).
    reviewed = holds(actor, REVIEW_CASE)
    previous = RunOutcome.objects.select_for_update().filter(run_id=key).first()
    if previous is not None and previous.reviewed and not reviewed:
        raise ValidationFailure("run_id", REVIEWED_OUTCOME)
    if previous is None:
        RunOutcome.objects.create(
            run_id=key,
            outcome=outcome,
            note=note,
            reported_by=actor,
            reported_at=now,
            reviewed=reviewed,
        )
    else:
        RunOutcome.objects.filter(pk=previous.pk).update(
            outcome=outcome, note=note, reported_by=actor, reported_at=now, reviewed=reviewed
        )
    event_record(
        actor=actor,
        action=Action.RUN_OUTCOME,
        target=key,
        reason=note,
        details={
            "outcome": outcome,
            "previous": previous.outcome if previous else None,
            "previous_reported_by": _username(previous.reported_by_id) if previous else None,
            "previous_reported_at": previous.reported_at.isoformat() if previous else None,
            "previous_reviewed": previous.reviewed if previous else None,
            "reviewed": reviewed,
            "counts": _counts(outcome, reviewed),
            "items": [item_id for item_id, _kind in items],
        },
        at=now,
    )
    # Curation, above: an agent's refutation queues what the run read for re-review, a
    # reviewer's report closes the entries it answers.
    dispatch(
        RunOutcomeReported(
            run_id=key, outcome=outcome, reviewed=reviewed, actor=actor, items=tuple(items), now=now
        )
    )
    # A reviewer's report (which may replace another reviewer's) may have turned a lesson the
    # run read (or a later version of one) outdated; an agent's counts nothing, so it cannot.
    read_lessons = [item_id for item_id, kind in items if kind == "lesson"]
    if read_lessons and reviewed:
        lessons_outdated_check(lesson_heirs(read_lessons), now=now, on="outcome", detail=key)
    return OutcomeReport(
        run_id=run_id,
        outcome=outcome,
        note=note,
        reported_by=actor.get_username(),
        reported_at=now.isoformat(),
        previous=previous.outcome if previous else None,
        counts=_counts(outcome, reviewed),
        items=tuple(ReadItem(id=item_id, type=kind) for item_id, kind in items),
    )
