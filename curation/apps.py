from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "intake and curation"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from curation.selectors import canonical_incident_expression
        from curation.signals import case_saved, skill_saved
        from experience.cases.models import Case, Skill
        from experience.cases.selectors import canonical_incident_install

        post_save.connect(case_saved, sender=Case, dispatch_uid="curation.case_saved")
        post_save.connect(skill_saved, sender=Skill, dispatch_uid="curation.skill_saved")
        # A finished skill run or investigation queues its after-action review.
        from curation.tasks import run_finished
        from experience.runs.models import Run
        from investigations.models import Investigation

        post_save.connect(run_finished, sender=Run, dispatch_uid="curation.aar.run")
        post_save.connect(run_finished, sender=Investigation, dispatch_uid="curation.aar.inv")
        # Revocations and new lesson conflicts tell the reviewers who approved the items.
        from curation.tasks import conflict_saved, item_saved
        from experience.lessons.models import Lesson, LessonConflict

        for model in (Case, Skill, Lesson):
            post_save.connect(item_saved, sender=model, dispatch_uid=f"curation.notify.{model}")
        post_save.connect(conflict_saved, sender=LessonConflict, dispatch_uid="curation.notify.c")
        # Every worker makes sure the periodic scan is queued.
        from curation.tasks import schedule_next_scan
        from reviewconsole.background import worker_start_hook_install

        worker_start_hook_install(schedule_next_scan)
        # Skill approval and every distinct-incident count go through incident merges.
        canonical_incident_install(canonical_incident_expression)
