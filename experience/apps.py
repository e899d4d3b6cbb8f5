from django.apps import AppConfig


class ExperienceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experience"
    verbose_name = "Experience memory"

    def ready(self) -> None:
        from experience.services import document_revocation_store
        from knowledge.hooks import revocation_recorder_register

        # Revoking a knowledge document stores the runs whose tool results cited it.
        revocation_recorder_register(document_revocation_store)
