from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "intake and curation"

    def ready(self) -> None:
        from curation import subscribers
        from curation.selectors.incidents import canonical_incident_expression
        from curation.tasks import schedule_next_scan
        from experience.cases.selectors import canonical_incident_install
        from reviewconsole.background import worker_start_hook_install
        from reviewconsole.dispatch import Event, dispatch_subscribe

        # What curation does when the apps below it write, in the writer's transaction
        # (docs/architecture.md, "Events"): near-duplicate links, re-review, reviewer mails and
        # after-action reviews.
        dispatch_subscribe(Event.CASE_STORED, subscribers.similar_cases_queued)
        dispatch_subscribe(Event.LESSON_STORED, subscribers.lesson_merges_queued)
        dispatch_subscribe(Event.ITEM_STATUS_CHANGED, subscribers.rereview_closed)
        dispatch_subscribe(Event.ITEM_STATUS_CHANGED, subscribers.revocation_notified)
        dispatch_subscribe(Event.LESSON_CONFLICT_OPENED, subscribers.conflict_notified)
        dispatch_subscribe(Event.LESSON_CONFLICT_CLOSED, subscribers.conflict_rereview_settled)
        dispatch_subscribe(Event.SKILL_RUN_STORED, subscribers.skill_run_review_queued)
        dispatch_subscribe(Event.RUN_OUTCOME_REPORTED, subscribers.refutation_rereview_queued)
        dispatch_subscribe(Event.INVESTIGATION_STORED, subscribers.investigation_review_queued)
        # Every worker makes sure the periodic scan is queued.
        worker_start_hook_install(schedule_next_scan)
        # Skill approval and every distinct-incident count go through incident merges.
        canonical_incident_install(canonical_incident_expression)
