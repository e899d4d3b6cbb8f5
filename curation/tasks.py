"""Background tasks of curation (django-tasks; see ``reviewconsole.background``)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django_tasks import TaskResultStatus, task

from curation import aar
from curation.aar_drafts import (
    DraftRefused,
    agent_reply,
    draft_pending,
    run_draft,
    trace_of_investigation,
    trace_of_run,
)
from experience.index.vectors import meaning_prepared
from experience.runs.models import Run
from investigations.models import Investigation
from reviewconsole import clock
from reviewconsole.background import retrying

SCAN_TASK = "curation.tasks.curation_scan_task"


@task()
def aar_draft_task(kind: str, pk: int, attempt: int = 1) -> str:
    """Draft the after-action review of a finished skill run or investigation; the id of the
    candidate it made or joined, or why nothing was drafted (a refusal is final, not retried)."""
    with retrying(aar_draft_task, attempt, kind, pk):
        try:
            if kind == aar.INVESTIGATION:
                investigation = Investigation.objects.get(pk=pk)
                trace = trace_of_investigation(investigation)
                caller_id = investigation.actor_id
            else:
                run = Run.objects.get(pk=pk)
                if _investigation_step(run.run_id):
                    return f"not drafted: {aar.STEP_OF_INVESTIGATION}"
                trace, caller_id = trace_of_run(run), run.actor_id
            # The review agent is asked before the draft's transaction, and only when a draft
            # will be made: a model call holds no lock, and a run drafted already costs none.
            pending = draft_pending(trace)
            reply = agent_reply(trace) if pending else None
            if pending:
                # The draft compares its lesson in meaning: the model loads before the lock.
                meaning_prepared()
            record = run_draft(trace=trace, caller_id=caller_id, reply=reply)
        except DraftRefused as refused:
            return f"not drafted: {refused}"
        return record.case_id


def _investigation_step(run_id: str) -> bool:
    """A skill run stored under an investigation's run id is one of its steps."""
    from investigations.models import InvestigationRequest

    return (
        Investigation.objects.filter(run_id=run_id).exists()
        or InvestigationRequest.objects.filter(run_id=run_id).exists()
    )


def scan_interval_seconds() -> int:
    return int(getattr(settings, "CURATION_SCAN_INTERVAL_SECONDS", 3_600))


@task()
def curation_scan_task(attempt: int = 1) -> dict[str, int]:
    """The periodic curation scan (staleness, proposals, conflicts), as ``curate`` runs it; the
    next scan is queued in the same transaction, so the schedule survives a killed worker."""
    from curation.notifications import notify_waiting_candidates, outbox_retry_stalled
    from curation.scan import curation_scan, stale_after_days

    meaning_prepared()  # the scan links cases in meaning: the model loads before the lock
    with retrying(curation_scan_task, attempt), transaction.atomic():
        report = curation_scan(now=clock.now(), days=stale_after_days())
        notify_waiting_candidates()
        outbox_retry_stalled()
        schedule_next_scan(after=timedelta(seconds=scan_interval_seconds()))
        return {name: len(value) for name, value in vars(report).items() if isinstance(value, list)}


def schedule_next_scan(*, after: timedelta | None = None) -> bool:
    """Queue the next scan unless one is already waiting; True when one was queued."""
    from django_tasks_db.models import DBTaskResult

    backend = curation_scan_task.get_backend()
    if not getattr(backend, "supports_defer", False):
        return False  # the immediate backend of tests: scans run when called, not on a clock
    # A running scan queues its own successor; only a waiting one makes another unnecessary.
    if DBTaskResult.objects.filter(task_path=SCAN_TASK, status=TaskResultStatus.READY).exists():
        return False
    curation_scan_task.using(run_after=clock.now() + (after or timedelta(0))).enqueue()
    return True


@task()
def case_index_task(case_id: str, attempt: int = 1) -> int:
    """Index a newly stored case and link it to its near-duplicates (off the request path);
    linking again finds the links already made, so a re-run writes nothing twice."""
    from curation.incidents import case_link_similar, case_meaning_prepared
    from experience.cases.models import Case

    with retrying(case_index_task, attempt, case_id):
        # The model runs before the write transaction, which then holds the lock only to write.
        found = Case.objects.filter(pk=case_id).first()
        if found is not None:
            case_meaning_prepared(found)
        with transaction.atomic():
            case = Case.objects.filter(pk=case_id).first()
            return len(case_link_similar(case=case)) if case is not None else 0


@task()
def lesson_index_task(lesson_id: str, attempt: int = 1) -> int:
    """Propose merging a new candidate lesson into the approved lessons of its scope and type it
    says the same as in meaning (``curation.incidents.lesson_merges_by_meaning``); proposing
    again finds the proposals already made, so a re-run writes nothing twice."""
    from curation.incidents import lesson_meaning_prepared, lesson_merges_by_meaning
    from experience.lessons.models import Lesson

    with retrying(lesson_index_task, attempt, lesson_id):
        found = Lesson.objects.filter(pk=lesson_id).first()
        if found is not None:
            lesson_meaning_prepared(found)
        with transaction.atomic():
            lesson = Lesson.objects.filter(pk=lesson_id).first()
            return len(lesson_merges_by_meaning(lesson)) if lesson is not None else 0


@task()
def notify_task(kind: str, key: str, attempt: int = 1) -> int:
    """Send one reviewer notification (``curation.notifications``); once per user and event."""
    from curation import notifications

    with retrying(notify_task, attempt, kind, key):
        if kind == notifications.REVOKED:
            return notifications.notify_revoked(key)
        if kind == notifications.CONFLICT:
            return notifications.notify_conflict(int(key))
        if kind == notifications.OUTDATED:
            return notifications.notify_outdated(key)
        return notifications.notify_waiting_candidates()
