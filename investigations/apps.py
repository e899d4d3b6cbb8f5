from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        from experience.outcomes import run_owner_lookup_install
        from investigations.run_owners import investigation_actors

        run_owner_lookup_install(investigation_actors)
