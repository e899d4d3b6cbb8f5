from django.apps import AppConfig


class InvestigationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "investigations"
    verbose_name = "Investigations"

    def ready(self) -> None:
        from experience.outcomes import run_owner_lookup_install
        from experience.selectors import tenant_run_ids_install
        from investigations.run_owners import investigation_actors, investigation_run_ids

        run_owner_lookup_install(investigation_actors)
        # A document's revocation reaches the investigations of its tenant only.
        tenant_run_ids_install(investigation_run_ids)
