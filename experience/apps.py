from django.apps import AppConfig


def document_revocation_preview(document_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking a knowledge document would reach (knowledge's revoke page asks)."""
    from experience.review.impact import revocation_impact

    return revocation_impact(document_id, tenant=tenant).as_json()


class ExperienceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experience"
    verbose_name = "Experience memory"

    def ready(self) -> None:
        from experience.review.revocation import document_revocation_store
        from knowledge.hooks import revocation_previewer_register, revocation_recorder_register

        # Revoking a knowledge document stores the runs whose tool results cited it.
        revocation_recorder_register(document_revocation_store)
        revocation_previewer_register(document_revocation_preview)

        from experience.cases.models import Case, Skill
        from experience.lessons.models import Lesson
        from reviewconsole.audit import audited_models_register

        # Cases, skills and lessons are written only by services that record their submission.
        audited_models_register(Case, Skill, Lesson)

        from experience.index.receivers import receivers_connect
        from experience.pages.titles import title_resolvers_install

        # The retrieval index follows every item's status and the lexicon (experience.index).
        receivers_connect()

        # Item mentions on console pages show titles, resolved in batch (reviewconsole.itemrefs).
        title_resolvers_install()
