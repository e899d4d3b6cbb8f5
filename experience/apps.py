from django.apps import AppConfig


def document_revocation_preview(document_id: str, tenant: str) -> dict[str, list[str]]:
    """What revoking a knowledge document would reach (knowledge's revoke page asks)."""
    from experience.selectors import revocation_impact

    return revocation_impact(document_id, tenant=tenant).as_json()


class ExperienceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experience"
    verbose_name = "Experience memory"

    def ready(self) -> None:
        from experience.services import document_revocation_store
        from knowledge.hooks import revocation_previewer_register, revocation_recorder_register

        # Revoking a knowledge document stores the runs whose tool results cited it.
        revocation_recorder_register(document_revocation_store)
        revocation_previewer_register(document_revocation_preview)

        from experience.models import Case, Lesson, Skill
        from reviewconsole.audit import audited_models_register

        # Cases, skills and lessons are written only by services that record their submission.
        audited_models_register(Case, Skill, Lesson)

        from experience.item_titles import title_resolvers_install

        # Item mentions on console pages show titles, resolved in batch (reviewconsole.itemrefs).
        title_resolvers_install()
