from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "intake and curation"

    def ready(self) -> None:
        from curation import subscribers
        from curation.selectors.incidents import canonical_incident_expression
        from curation.tasks import schedule_next_scan
        from experience.cases.events import CaseStored
        from experience.cases.selectors import canonical_incident_install
        from experience.lessons.events import LessonStored
        from experience.review.events import (
            ItemStatusChanged,
            LessonConflictClosed,
            LessonConflictOpened,
            RunOutcomeReported,
        )
        from experience.runs.events import SkillRunStored
        from investigations.events import InvestigationStored
        from knowledge.events import DocumentSubmitted
        from reviewconsole.background import worker_start_hook_install
        from reviewconsole.dispatch import dispatch_subscribe

        # What curation does when the apps below it write, in the writer's transaction
        # (docs/architecture.md, "Events"): near-duplicate links, re-review, reviewer mails and
        # after-action reviews.
        dispatch_subscribe(CaseStored, subscribers.similar_cases_queued)
        dispatch_subscribe(LessonStored, subscribers.lesson_merges_queued)
        dispatch_subscribe(ItemStatusChanged, subscribers.rereview_closed)
        dispatch_subscribe(ItemStatusChanged, subscribers.revocation_notified)
        dispatch_subscribe(LessonConflictOpened, subscribers.conflict_notified)
        dispatch_subscribe(LessonConflictClosed, subscribers.conflict_rereview_settled)
        dispatch_subscribe(SkillRunStored, subscribers.skill_run_review_queued)
        dispatch_subscribe(RunOutcomeReported, subscribers.refutation_rereview_queued)
        dispatch_subscribe(InvestigationStored, subscribers.investigation_review_queued)
        dispatch_subscribe(DocumentSubmitted, subscribers.document_submission_notified)
        # Every worker makes sure the periodic scan is queued.
        worker_start_hook_install(schedule_next_scan)
        # Skill approval and every distinct-incident count go through incident merges.
        canonical_incident_install(canonical_incident_expression)
