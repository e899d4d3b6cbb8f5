"""Curation's part in writes of the apps below it.

``CurationConfig.ready`` subscribes these handlers to the events those writes publish
(``reviewconsole.dispatch``; every event, publisher and subscriber is listed in
docs/architecture.md, "Events"). Each takes the event, runs in the writer's transaction and
returns nothing: what it queues exists exactly when the write committed, and it records no
event of its own (the write that caused it is the audited act).
"""

from __future__ import annotations

from curation import aar
from curation.notifications import (
    CONFLICT,
    OUTDATED,
    REVOKED,
    notify_document_submitted,
    outdated_key,
)
from curation.rereview import (
    conflict_rereview_closed,
    conflict_rereview_queued,
    lesson_rereview_followed,
    refutation_rereview_followed,
    rereview_close_for,
)
from curation.tasks import aar_draft_task, case_index_task, lesson_index_task, notify_task
from experience.cases.events import CaseStored
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.events import LessonStored
from experience.lessons.models import Lesson
from experience.review.events import (
    ItemStatusChanged,
    LessonConflictClosed,
    LessonConflictOpened,
    RunOutcomeReported,
)
from experience.runs.events import SkillRunStored
from investigations.events import InvestigationStored
from investigations.services import investigation_running
from knowledge.events import DocumentSubmitted


def similar_cases_queued(event: CaseStored) -> None:
    """A new case, however it was stored (console, import, an agent's proposal), gets its
    similarity signature and near-duplicate links off the request path."""
    case_index_task.enqueue(event.case.pk)


def lesson_merges_queued(event: LessonStored) -> None:
    """A new candidate lesson, however it was stored, is compared in meaning with the approved
    lessons of its scope and type off the request path (merges in words are found when read)."""
    lesson_index_task.enqueue(event.lesson.pk)


def rereview_closed(event: ItemStatusChanged) -> None:
    """A case or skill that stops being approved (superseded, revoked) closes its re-review
    entries, so that queue empties as the reviews happen. A lesson that turns outdated is
    queued and its approvers are told; restored, revoked or superseded, its entries close."""
    item = event.item
    if isinstance(item, Case | Skill):
        rereview_close_for(item)
    elif isinstance(item, Lesson):
        lesson_rereview_followed(item)
        if item.status == Status.OUTDATED and item.outdated_at is not None:
            notify_task.enqueue(OUTDATED, outdated_key(item.id, item.outdated_at))


def refutation_rereview_queued(event: RunOutcomeReported) -> None:
    """An agent's refutation puts what its run read in the re-review queue, naming the run (it
    counts nothing until a reviewer reports that run's outcome); a reviewer's report closes the
    entries it answers."""
    refutation_rereview_followed(
        run_id=event.run_id,
        outcome=event.outcome,
        reviewed=event.reviewed,
        actor=event.actor,
        items=list(event.items),
        at=event.now,
    )


def revocation_notified(event: ItemStatusChanged) -> None:
    """Whoever approved a revoked item is told."""
    if event.item.status == Status.REVOKED:
        notify_task.enqueue(REVOKED, str(event.item.pk))


def conflict_notified(event: LessonConflictOpened) -> None:
    """The approvers of both lessons of a new conflict are told; the less supported lesson is
    put in the re-review queue."""
    conflict_rereview_queued(event.conflict)
    notify_task.enqueue(CONFLICT, str(event.conflict.pk))


def conflict_rereview_settled(event: LessonConflictClosed) -> None:
    """A resolved conflict closes the re-review entry it opened."""
    conflict_rereview_closed(event.conflict)


def skill_run_review_queued(event: SkillRunStored) -> None:
    """A finished skill run is reviewed after the fact, unless it is a step of the investigation
    being run here (reviewed with the investigation)."""
    if not investigation_running(event.run.run_id):
        aar_draft_task.enqueue(aar.SKILL_RUN, event.run.pk)


def investigation_review_queued(event: InvestigationStored) -> None:
    """A finished investigation is reviewed after the fact."""
    aar_draft_task.enqueue(aar.INVESTIGATION, event.investigation.pk)


def document_submission_notified(event: DocumentSubmitted) -> None:
    """The operators who may approve a submitted knowledge version are mailed (the outbox row
    and its send task are written with the submission)."""
    notify_document_submitted(event.document, now=event.now)
